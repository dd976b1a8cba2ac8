#!/usr/bin/env python3
"""Masks from StreamLens in any GStreamer application: a PyGObject pipeline with the plugin's
`lensdetect` running a segmentation model, reading each region's mask from the `mask`
parameter structure of its GstVideoRegionOfInterestMeta (docs/metadata.md) in a pad probe.

    GST_PLUGIN_PATH=.build/release python3 examples/python/read_masks.py [PHOTO] [OUT.pgm] [MODEL]

Prints one line per region of the first frame: `person 0.99 box 0,12 512x500 mask 164x161, 61%
inside`, and with OUT.pgm writes the frame's regions' masks at the frame's size (0 or 255 at the
0.5 threshold, each mask stretched over its box as the meta's normalised corners give it).
Needs Debian's python3-gi.
"""
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstVideo", "1.0")
from gi.repository import GLib, Gst, GstVideo  # noqa: E402

photo = sys.argv[1] if len(sys.argv) > 1 else ".deps/media/astronaut.png"
out = sys.argv[2] if len(sys.argv) > 2 else None
model = sys.argv[3] if len(sys.argv) > 3 else "Models/person-segmentation.json"

Gst.init(None)
if Gst.ElementFactory.find("lensdetect") is None:
    sys.exit("read_masks: no lensdetect element: set GST_PLUGIN_PATH to the folder of libgststreamlens.so, "
             "or run make install-plugin")
pipeline = Gst.parse_launch(
    f"filesrc location={photo} ! decodebin ! imagefreeze num-buffers=1 ! videoconvert "
    f"! video/x-raw,format=RGB ! lensdetect name=detect draw=false model={model} ! fakesink")


def on_buffer(pad, info):
    buffer = info.get_buffer()
    caps = pad.get_current_caps().get_structure(0)
    width, height = caps.get_int("width")[1], caps.get_int("height")[1]
    frame = bytearray(width * height)
    i = 0
    while True:
        roi = GstVideo.buffer_get_video_region_of_interest_meta_id(buffer, i)
        if roi is None:
            break
        i += 1
        detection, mask = roi.get_param("detection"), roi.get_param("mask")
        text = f"{GLib.quark_to_string(roi.roi_type)} {detection.get_double('confidence')[1]:.2f} box {roi.x},{roi.y} {roi.w}x{roi.h}"
        if mask is None:
            print(text + " no mask")
            continue
        mw, mh = mask.get_int("width")[1], mask.get_int("height")[1]
        data = mask.get_value("data").extract_dup(0, mw * mh)  # a GstBuffer of GRAY8 coverage
        inside = sum(1 for v in data if v >= 128)
        print(f"{text} mask {mw}x{mh}, {100 * inside // (mw * mh)}% inside")
        x0, y0 = detection.get_double("x_min")[1] * width, detection.get_double("y_min")[1] * height
        x1, y1 = detection.get_double("x_max")[1] * width, detection.get_double("y_max")[1] * height
        for y in range(max(0, int(y0)), min(height, int(y1) + 1)):
            v = (y + 0.5 - y0) / (y1 - y0)
            if not 0 <= v < 1:
                continue
            row = int(v * mh) * mw
            for x in range(max(0, int(x0)), min(width, int(x1) + 1)):
                u = (x + 0.5 - x0) / (x1 - x0)
                if 0 <= u < 1 and data[row + int(u * mw)] >= 128:
                    frame[y * width + x] = 255
    if out:
        with open(out, "wb") as f:
            f.write(b"P5\n%d %d\n255\n" % (width, height) + bytes(frame))
    return Gst.PadProbeReturn.OK


pipeline.get_by_name("detect").get_static_pad("src").add_probe(Gst.PadProbeType.BUFFER, on_buffer)
pipeline.set_state(Gst.State.PLAYING)
message = pipeline.get_bus().timed_pop_filtered(Gst.CLOCK_TIME_NONE, Gst.MessageType.EOS | Gst.MessageType.ERROR)
pipeline.set_state(Gst.State.NULL)
if message.type == Gst.MessageType.ERROR:
    error, debug = message.parse_error()
    sys.exit(f"read_masks: {message.src.get_name()}: {error.message}")
