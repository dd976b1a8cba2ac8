#!/usr/bin/env python3
"""The Python peer of `lensdetect` for `make bench-detect`: the same job written the way a user
would write it in Python (PyGObject, OpenVINO's Python API, numpy).

    python_peer.py INPUT.mp4 OUTPUT.mp4|fakesink

Decodes INPUT to BGRx frames (filesrc ! qtdemux ! h264parse ! avdec_h264 ! videoconvert !
appsink), finds faces in each with MediaPipe's BlazeFace full-range model (the same
face_detection_full_range_sparse.tflite (from the model store) as Models/face-full-range.json: 192x192 NHWC
float32 RGB in [-1, 1], the frame letterboxed to a square then resized; 2304 anchors on a
48x48 grid; sigmoid scores, threshold 0.5, weighted suppression at IoU 0.3), draws each box
(green, 3 px, no label) on the frame with numpy and pushes the frame with its timestamps into
appsrc ! videoconvert ! x264enc ! mp4mux ! filesink (or appsrc ! fakesink).

The letterbox is numpy (a padded canvas); resize, colour order, float conversion and scaling
are OpenVINO's pre-processing (PrePostProcessor), compiled into the model; decoding and
suppression are numpy. At the end it prints on stderr a summary like lensdetect's, with the
median milliseconds per frame from the letterbox to the decoded boxes.
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
from openvino.preprocess import ColorFormat, PrePostProcessor, ResizeAlgorithm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import models as model_store  # noqa: E402  (tools/models.py: where `streamlens models fetch` installs)
MODEL = os.path.join(model_store.store_dir(), "mediapipe-face-detection", "face_detection_full_range_sparse.tflite")
SIZE = 192          # model input, square
GRID = 48           # 192 / stride 4, one anchor per cell
THRESHOLD = 0.5
IOU = 0.3
COLOR = (0, 255, 0, 255)  # BGRx green
THICKNESS = 3
STALL_SECONDS = 30  # no frame for this long: give up instead of hanging


def fail(message):
    print(f"python_peer: {message}", file=sys.stderr)
    sys.exit(1)


def check_bus(pipeline, what):
    msg = pipeline.get_bus().pop_filtered(Gst.MessageType.ERROR)
    if msg is not None:
        err, debug = msg.parse_error()
        fail(f"{what} pipeline: {msg.src.get_name()}: {err.message} ({debug})")


class FaceDetector:
    def __init__(self, frame_width, frame_height):
        side = max(frame_width, frame_height)
        self.side = side
        self.top = (side - frame_height) // 2
        self.left = (side - frame_width) // 2
        self.width, self.height = frame_width, frame_height
        self.canvas = np.zeros((1, side, side, 3), np.uint8)  # letterbox: black padding

        core = ov.Core()
        model = core.read_model(MODEL)
        ppp = PrePostProcessor(model)
        ppp.input().tensor().set_element_type(ov.Type.u8).set_layout(ov.Layout("NHWC")) \
            .set_shape([1, side, side, 3]).set_color_format(ColorFormat.BGR)
        ppp.input().model().set_layout(ov.Layout("NHWC"))
        ppp.input().preprocess().convert_element_type(ov.Type.f32).convert_color(ColorFormat.RGB) \
            .resize(ResizeAlgorithm.RESIZE_LINEAR).mean(127.5).scale(127.5)
        model = ppp.build()
        self.compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY"})
        self.request = self.compiled.create_infer_request()
        shapes = [tuple(o.get_shape()) for o in self.compiled.outputs]
        self.boxes_index = next(i for i, s in enumerate(shapes) if s[-1] == 16)
        self.scores_index = next(i for i, s in enumerate(shapes) if i != self.boxes_index)

        cells = (np.arange(GRID, dtype=np.float32) + 0.5) / GRID
        ax, ay = np.meshgrid(cells, cells)   # row by row: anchor i is cell (i % 48, i // 48)
        self.anchors = np.stack([ax.ravel(), ay.ravel()], axis=1)  # [2304, 2], size fixed at 1

    def detect(self, bgrx):
        """Faces in one BGRx frame (height x width x 4): a list of (x0, y0, x1, y1, score) in
        frame pixels."""
        self.canvas[0, self.top:self.top + self.height, self.left:self.left + self.width] = bgrx[:, :, :3]
        self.request.infer({0: self.canvas})
        raw = self.request.get_output_tensor(self.boxes_index).data.reshape(-1, 16)
        logits = self.request.get_output_tensor(self.scores_index).data.reshape(-1)
        scores = 1.0 / (1.0 + np.exp(-np.clip(logits.astype(np.float64), -100, 100)))
        keep = scores >= THRESHOLD
        if not keep.any():
            return []
        r, s, a = raw[keep], scores[keep], self.anchors[keep]
        cx = r[:, 0] / SIZE + a[:, 0]
        cy = r[:, 1] / SIZE + a[:, 1]
        w = r[:, 2] / SIZE
        h = r[:, 3] / SIZE
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
        faces = []
        for (x0, y0, x1, y1), score in weighted_nms(boxes, s):
            # Normalised letterboxed square -> frame pixels, clamped to the frame.
            fx0 = min(max(x0 * self.side - self.left, 0), self.width)
            fy0 = min(max(y0 * self.side - self.top, 0), self.height)
            fx1 = min(max(x1 * self.side - self.left, 0), self.width)
            fy1 = min(max(y1 * self.side - self.top, 0), self.height)
            faces.append((fx0, fy0, fx1, fy1, score))
        return faces


def iou(box, boxes):
    ix0 = np.maximum(box[0], boxes[:, 0])
    iy0 = np.maximum(box[1], boxes[:, 1])
    ix1 = np.minimum(box[2], boxes[:, 2])
    iy1 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(ix1 - ix0, 0, None) * np.clip(iy1 - iy0, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0)


def weighted_nms(boxes, scores):
    """Best first: each best box and the remaining boxes overlapping it by IoU > 0.3 become one
    box, the score-weighted mean of their corners, scored with the group's mean score."""
    order = np.argsort(-scores, kind="stable")
    boxes, scores = boxes[order], scores[order]
    out = []
    while len(scores):
        group = iou(boxes[0], boxes) > IOU
        group[0] = True
        weights = scores[group] / scores[group].sum()
        out.append(((boxes[group] * weights[:, None]).sum(axis=0), float(scores[group].mean())))
        boxes, scores = boxes[~group], scores[~group]
    return out


def draw(frame, faces):
    h, w = frame.shape[:2]
    t = THICKNESS
    for x0, y0, x1, y1, _ in faces:
        x0, y0, x1, y1 = int(round(x0)), int(round(y0)), int(round(x1)), int(round(y1))
        frame[max(y0, 0):min(y0 + t, h), x0:x1] = COLOR
        frame[max(y1 - t, 0):min(y1, h), x0:x1] = COLOR
        frame[y0:y1, max(x0, 0):min(x0 + t, w)] = COLOR
        frame[y0:y1, max(x1 - t, 0):min(x1, w)] = COLOR


def main():
    if len(sys.argv) != 3:
        print("usage: python_peer.py INPUT.mp4 OUTPUT.mp4|fakesink", file=sys.stderr)
        sys.exit(2)
    source, target = sys.argv[1], sys.argv[2]
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

    detector = None
    times = []
    frames = boxes = 0
    waited = 0
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
        if detector is None:
            info = GstVideo.VideoInfo.new_from_caps(sample.get_caps())
            width, height, stride = info.width, info.height, info.stride[0]
            detector = FaceDetector(width, height)
            appsrc.set_property("caps", sample.get_caps())

        data = buf.extract_dup(0, buf.get_size())
        frame = np.frombuffer(data, np.uint8)[:height * stride].reshape(height, stride)[:, :width * 4] \
            .reshape(height, width, 4).copy()

        start = time.perf_counter()
        faces = detector.detect(frame)
        times.append((time.perf_counter() - start) * 1000)
        frames += 1
        boxes += len(faces)
        draw(frame, faces)

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
    if not times:
        fail("no frames decoded")
    print(f"python_peer: {frames} frames, inference {statistics.median(times):.1f} ms median "
          f"({len(times)} runs), {boxes} face boxes", file=sys.stderr)


if __name__ == "__main__":
    main()
