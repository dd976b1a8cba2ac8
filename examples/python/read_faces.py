#!/usr/bin/env python3
"""StreamLens stages in any GStreamer application: a PyGObject pipeline with the plugin's
`lensdetect` element, reading the faces it found from each buffer's
GstVideoRegionOfInterestMeta in a pad probe.

    GST_PLUGIN_PATH=.build/release python3 examples/python/read_faces.py [PHOTO] [FRAMES] [MODEL]

(or `make install-plugin` once, then no GST_PLUGIN_PATH). Prints one line per frame:
`frame N: face 0.84 at 179,81 93x93 [label_id 0, box 179.3,81.7 92.2x92.2]` — the meta's whole
pixels, then its `detection` structure in Intel DL Streamer's layout (normalised corners,
label_id, confidence; docs/metadata.md) turned into frame pixels. Needs Debian's python3-gi.
"""
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstVideo", "1.0")
from gi.repository import GLib, Gst, GstVideo  # noqa: E402

photo = sys.argv[1] if len(sys.argv) > 1 else ".deps/media/astronaut.png"
frames = int(sys.argv[2]) if len(sys.argv) > 2 else 10
model = sys.argv[3] if len(sys.argv) > 3 else "Models/face-short-range.json"

Gst.init(None)
if Gst.ElementFactory.find("lensdetect") is None:
    sys.exit("read_faces: no lensdetect element: set GST_PLUGIN_PATH to the folder of libgststreamlens.so, "
             "or run make install-plugin")
pipeline = Gst.parse_launch(
    f"filesrc location={photo} ! decodebin ! imagefreeze num-buffers={frames} ! videoconvert "
    f"! video/x-raw,format=RGB,framerate=10/1 ! lensdetect name=detect model={model} ! fakesink")
seen = 0


def on_buffer(pad, info):
    global seen
    buffer = info.get_buffer()
    caps = pad.get_current_caps().get_structure(0)
    size = (caps.get_int("width")[1], caps.get_int("height")[1])
    faces = []
    i = 0
    while True:  # the stage numbers its regions 0, 1, 2… in each buffer
        roi = GstVideo.buffer_get_video_region_of_interest_meta_id(buffer, i)
        if roi is None:
            break
        detection = roi.get_param("detection")
        score = detection.get_double("confidence")[1] if detection else float("nan")
        text = f"{GLib.quark_to_string(roi.roi_type)} {score:.2f} at {roi.x},{roi.y} {roi.w}x{roi.h}"
        if detection and detection.has_field("x_min"):
            w, h = size
            x0, y0 = detection.get_double("x_min")[1] * w, detection.get_double("y_min")[1] * h
            x1, y1 = detection.get_double("x_max")[1] * w, detection.get_double("y_max")[1] * h
            text += f" [label_id {detection.get_int('label_id')[1]}, box {x0:.1f},{y0:.1f} {x1 - x0:.1f}x{y1 - y0:.1f}]"
        faces.append(text)
        i += 1
    print(f"frame {seen}: " + ("; ".join(faces) if faces else "no face"), flush=True)
    seen += 1
    return Gst.PadProbeReturn.OK


pipeline.get_by_name("detect").get_static_pad("src").add_probe(Gst.PadProbeType.BUFFER, on_buffer)
pipeline.set_state(Gst.State.PLAYING)
message = pipeline.get_bus().timed_pop_filtered(Gst.CLOCK_TIME_NONE, Gst.MessageType.EOS | Gst.MessageType.ERROR)
pipeline.set_state(Gst.State.NULL)
if message.type == Gst.MessageType.ERROR:
    error, debug = message.parse_error()
    sys.exit(f"read_faces: {message.src.get_name()}: {error.message}")
print(f"{seen} frames")
