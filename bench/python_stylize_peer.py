#!/usr/bin/env python3
"""The Python peer of `lensstylize` for `make bench-stylize`: the same job written the way a user
would write it in Python (PyGObject, OpenVINO's Python API, numpy; no OpenCV or PIL).

    python_stylize_peer.py INPUT.mp4 OUTPUT.mp4|fakesink [WxH] [STRENGTH]

Decodes INPUT to BGRx frames (filesrc ! qtdemux ! h264parse ! avdec_h264 ! videoconvert !
appsink), stylizes each with Magenta's arbitrary style transfer network at WxH (default 320x180)
and pushes the frame with its timestamps into appsrc ! videoconvert ! x264enc ! mp4mux !
filesink (or appsrc ! fakesink). The models are the ones Models/magenta-style.json names, from
the model store (`streamlens models fetch magenta`):

- the style vector is computed once, at start, by style_predict_quantized_256.tflite from
  Models/styles/waves.jpg (the manifest's default), decoded and stretched to 256x256 RGB by GStreamer (jpegdec ! videoscale,
  as the stage does), values 0..1;
- style_transfer_f16_384.tflite is reshaped to content_image [1,H,W,3] and compiled for the
  CPU with the latency hint and the device's default precision (bf16 on this machine, like the
  stage); u8 BGR -> RGB -> f32 / 255 is OpenVINO pre-processing (PrePostProcessor) compiled into
  the model, as in bench/python_peer.py. Its output is [1,384,384,3] RGB 0..1 whatever the
  input size.

Per frame, in numpy:
- shrink: an area mean (box filter, the stage's filter) when the frame size is a whole multiple
  of WxH, written as sums of strided row and column slices in uint16 (1280x720 -> 320x180: the
  4 rows, then the 4 columns, + 8 >> 4; ~1.2 ms, against ~15 ms for the textbook
  reshape(...).mean(axis=(1, 3)) and ~0.2 ms for plain slicing frame[1::4, 1::4], which aliases);
  otherwise nearest-neighbour sampling (slicing with index arrays);
- bilinear upscale of the model's output to the frame size (pixel centres aligned, edge
  clamped), horizontal pass on the small image then vertical pass, float32, and a blend with the
  frame by STRENGTH (default 1: the model's output only), rounded to u8 into the BGRx frame.

At the end it prints on stderr a summary like lensstylize's, with medians of the per-frame steps,
the mean absolute difference (0..255) between the first output frame and its input (a check that
the output really is stylized), and the start-up time (models read, style predicted, compiled).
"""
import os
import statistics
import sys
import time

import numpy as np
import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstApp", "1.0")
gi.require_version("GstVideo", "1.0")
from gi.repository import Gst, GstApp, GstVideo  # noqa: E402
import openvino as ov  # noqa: E402
from openvino.preprocess import ColorFormat, PrePostProcessor  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import models as model_store  # noqa: E402  (tools/models.py: where `streamlens models fetch` installs)
MODELS = os.path.join(model_store.store_dir(), "magenta")
TRANSFER = os.path.join(MODELS, "style_transfer_f16_384.tflite")
PREDICT = os.path.join(MODELS, "style_predict_quantized_256.tflite")
STYLE_IMAGE = os.path.join(ROOT, "Models", "styles", "waves.jpg")
STYLE_SIZE = 256
STALL_SECONDS = 30  # no frame for this long: give up instead of hanging


def fail(message):
    print(f"python_stylize_peer: {message}", file=sys.stderr)
    sys.exit(1)


def check_bus(pipeline, what):
    msg = pipeline.get_bus().pop_filtered(Gst.MessageType.ERROR)
    if msg is not None:
        err, debug = msg.parse_error()
        fail(f"{what} pipeline: {msg.src.get_name()}: {err.message} ({debug})")


def load_style_image(path, size):
    """The picture decoded and stretched to size x size RGB by GStreamer: uint8 [size, size, 3]."""
    pipeline = Gst.parse_launch(
        f'filesrc location="{path}" ! decodebin ! videoconvert ! videoscale '
        f'! video/x-raw,format=RGB,width={size},height={size},pixel-aspect-ratio=1/1 '
        '! appsink name=sink sync=false max-buffers=1')
    sink = pipeline.get_by_name("sink")
    pipeline.set_state(Gst.State.PLAYING)
    sample = sink.try_pull_sample(10 * Gst.SECOND)
    if sample is None:
        check_bus(pipeline, "style image")
        fail(f"{path}: no picture decoded")
    info = GstVideo.VideoInfo.new_from_caps(sample.get_caps())
    buf = sample.get_buffer()
    data = buf.extract_dup(0, buf.get_size())
    stride = info.stride[0]
    image = np.frombuffer(data, np.uint8)[:size * stride].reshape(size, stride)[:, :size * 3].reshape(size, size, 3).copy()
    pipeline.set_state(Gst.State.NULL)
    return image


def linear_taps(n_in, n_out):
    """Bilinear sampling positions of n_out output pixels in n_in input pixels (centres aligned,
    edges clamped): the two neighbours and the weight of the second."""
    s = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
    i0 = np.floor(s).astype(np.intp)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return i0, i1, (s - i0).astype(np.float32)


class Stylizer:
    def __init__(self, frame_width, frame_height, width, height, strength):
        self.fw, self.fh, self.w, self.h, self.strength = frame_width, frame_height, width, height, strength
        core = ov.Core()
        # The style vector, once.
        style = load_style_image(STYLE_IMAGE, STYLE_SIZE).astype(np.float32)[None] / 255.0
        predict = core.compile_model(core.read_model(PREDICT), "CPU", {"PERFORMANCE_HINT": "LATENCY"})
        vector = predict.create_infer_request().infer({0: style})[predict.outputs[0]].copy()

        model = core.read_model(TRANSFER)
        names = [i.get_any_name() for i in model.inputs]
        if "content_image" not in names or len(names) != 2:
            fail(f"{TRANSFER}: expected inputs content_image and the style vector, got {names}")
        style_name = next(n for n in names if n != "content_image")
        model.reshape({"content_image": [1, height, width, 3], style_name: list(vector.shape)})
        ppp = PrePostProcessor(model)
        ppp.input("content_image").tensor().set_element_type(ov.Type.u8).set_layout(ov.Layout("NHWC")) \
            .set_color_format(ColorFormat.BGR)
        ppp.input("content_image").model().set_layout(ov.Layout("NHWC"))
        ppp.input("content_image").preprocess().convert_color(ColorFormat.RGB).convert_element_type(ov.Type.f32).scale(255.0)
        model = ppp.build()
        self.compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY"})
        self.precision = self.compiled.get_property("INFERENCE_PRECISION_HINT")
        self.request = self.compiled.create_infer_request()
        self.request.set_tensor(style_name, ov.Tensor(np.ascontiguousarray(vector, np.float32)))
        self.output = self.compiled.outputs[0]
        out_h, out_w = self.output.get_shape()[1], self.output.get_shape()[2]

        # Shrink: a box filter when the frame is a whole multiple of the inference size.
        self.fy, self.fx = frame_height // height, frame_width // width
        self.area = self.fy * height == frame_height and self.fx * width == frame_width
        if not self.area:
            self.rows = ((np.arange(height) + 0.5) * frame_height / height).astype(np.intp)
            self.cols = ((np.arange(width) + 0.5) * frame_width / width).astype(np.intp)
        # Upscale: bilinear taps from the model's output to the frame; 255 folded into the weights.
        self.x0, self.x1, wx = linear_taps(out_w, frame_width)
        self.y0, self.y1, wy = linear_taps(out_h, frame_height)
        self.wx0, self.wx1 = (255 * (1 - wx))[None, :, None], (255 * wx)[None, :, None]
        self.wy0, self.wy1 = (1 - wy)[:, None, None], wy[:, None, None]

    def shrink(self, frame):
        """BGRx [fh, fw, 4] -> BGR [h, w, 3] uint8."""
        if not self.area:
            return np.ascontiguousarray(frame[self.rows][:, self.cols, :3])
        fy, fx, n = self.fy, self.fx, self.fy * self.fx
        rows = frame[0::fy].astype(np.uint16)
        for i in range(1, fy):
            rows += frame[i::fy]
        acc = rows[:, 0::fx].copy()
        for j in range(1, fx):
            acc += rows[:, j::fx]
        return ((acc[:, :, :3] + n // 2) // n).astype(np.uint8)

    def infer(self, small):
        self.request.set_tensor("content_image", ov.Tensor(small[None]))
        self.request.infer()
        return self.request.get_tensor(self.output).data[0]  # [384, 384, 3] RGB 0..1

    def scale_blend(self, styled, frame):
        """The model's RGB output scaled bilinearly to the frame and blended into its BGR bytes."""
        wide = styled[:, self.x0] * self.wx0 + styled[:, self.x1] * self.wx1  # [oh, fw, 3], 0..255
        wide = wide[:, :, ::-1]  # RGB -> BGR
        up = wide[self.y0]
        up *= self.wy0
        lower = wide[self.y1]
        lower *= self.wy1
        up += lower
        if self.strength < 1:
            up *= self.strength
            up += frame[:, :, :3] * np.float32(1 - self.strength)
        up += 0.5
        np.clip(up, 0, 255, out=up)
        np.copyto(frame[:, :, :3], up, casting="unsafe")


def main():
    started = time.perf_counter()
    if len(sys.argv) not in (3, 4, 5):
        print("usage: python_stylize_peer.py INPUT.mp4 OUTPUT.mp4|fakesink [WxH] [STRENGTH]", file=sys.stderr)
        sys.exit(2)
    source, target = sys.argv[1], sys.argv[2]
    width, height = (int(v) for v in (sys.argv[3] if len(sys.argv) > 3 else "320x180").split("x"))
    strength = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    for path in (TRANSFER, PREDICT, STYLE_IMAGE):
        if not os.path.isfile(path):
            fail(f"{path} missing")
    Gst.init(None)

    decode = Gst.parse_launch(
        f'filesrc location="{source}" ! qtdemux ! h264parse ! avdec_h264 ! videoconvert '
        '! video/x-raw,format=BGRx ! appsink name=sink sync=false max-buffers=4')
    if target == "fakesink":
        encode = Gst.parse_launch("appsrc name=src format=time block=true ! fakesink")
    else:
        encode = Gst.parse_launch(
            'appsrc name=src format=time block=true ! videoconvert ! video/x-raw,format=I420 '
            f'! x264enc ! mp4mux ! filesink location="{target}"')
    appsink = decode.get_by_name("sink")
    appsrc = encode.get_by_name("src")
    decode.set_state(Gst.State.PLAYING)
    encode.set_state(Gst.State.PLAYING)

    stylizer = None
    startup = None
    changed = None
    totals, shrinks, infers, blends = [], [], [], []
    frames = waited = 0
    while True:
        sample = appsink.try_pull_sample(Gst.SECOND)
        if sample is None:
            check_bus(decode, "input")
            if appsink.is_eos():
                break
            waited += 1
            if waited >= STALL_SECONDS:
                fail(f"no frame from the decoder for {STALL_SECONDS} s")
            continue
        waited = 0
        buf = sample.get_buffer()
        if stylizer is None:
            info = GstVideo.VideoInfo.new_from_caps(sample.get_caps())
            fw, fh, stride = info.width, info.height, info.stride[0]
            stylizer = Stylizer(fw, fh, width, height, strength)
            startup = time.perf_counter() - started
            appsrc.set_property("caps", sample.get_caps())

        data = buf.extract_dup(0, buf.get_size())
        original = np.frombuffer(data, np.uint8)[:fh * stride].reshape(fh, stride)[:, :fw * 4].reshape(fh, fw, 4)
        frame = original.copy()

        t0 = time.perf_counter()
        small = stylizer.shrink(frame)
        t1 = time.perf_counter()
        styled = stylizer.infer(small)
        t2 = time.perf_counter()
        stylizer.scale_blend(styled, frame)
        t3 = time.perf_counter()
        shrinks.append((t1 - t0) * 1000)
        infers.append((t2 - t1) * 1000)
        blends.append((t3 - t2) * 1000)
        totals.append((t3 - t0) * 1000)
        if changed is None:
            changed = float(np.abs(frame[:, :, :3].astype(np.int16) - original[:, :, :3]).mean())
        frames += 1

        out = Gst.Buffer.new_wrapped(frame.tobytes())
        out.pts, out.dts, out.duration = buf.pts, buf.dts, buf.duration
        if appsrc.push_buffer(out) != Gst.FlowReturn.OK:
            check_bus(encode, "output")
            fail("appsrc refused a frame")

    appsrc.end_of_stream()
    msg = encode.get_bus().timed_pop_filtered(120 * Gst.SECOND, Gst.MessageType.EOS | Gst.MessageType.ERROR)
    if msg is None:
        fail("the output pipeline did not finish within 120 s")
    decode.set_state(Gst.State.NULL)
    encode.set_state(Gst.State.NULL)
    if msg.type == Gst.MessageType.ERROR:
        err, debug = msg.parse_error()
        fail(f"output pipeline: {msg.src.get_name()}: {err.message} ({debug})")
    if not totals:
        fail("no frames decoded")
    med = statistics.median
    print(f"python_stylize_peer: {frames} frames, {med(totals):.1f} ms a frame: shrink {med(shrinks):.1f} "
          f"({'area mean' if stylizer.area else 'nearest'}), inference {med(infers):.1f} at {width}x{height} "
          f"({stylizer.precision}), output+scale+blend {med(blends):.1f} (medians of {frames}); "
          f"first frame changed by {changed:.1f} (mean abs, 0..255); start-up {startup:.2f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
