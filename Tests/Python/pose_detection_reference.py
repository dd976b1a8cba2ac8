#!/usr/bin/env python3
"""MediaPipe's pose detections on a picture by MediaPipe's own decoding math: the reference lensdetect
with Models/pose-detection.json is compared with.

    pose_detection_reference.py IMAGE

Independent of StreamLens's manifest, pre-processing and decoder: the options below are those of
MediaPipe's graph mediapipe/modules/pose_detection/pose_detection_cpu.pbtxt, written here by hand
(not read from Models/pose-detection.json, so a wrong manifest shows); ffmpeg decodes the picture
(no scaling); numpy letterboxes it onto 224x224 as MediaPipe's ImageToTensorCalculator does on the
CPU (keep_aspect_ratio, centred, BORDER_ZERO; the square region in whole picture pixels, the odd
one to the right or bottom, as lensdetect's FrameGeometry puts it; plain bilinear sampling at
pixel centres, no anti-aliasing, as its OpenCV warpPerspective with INTER_LINEAR does) and maps
0..255 to -1..1 (output_tensor_float_range); OpenVINO's Python API runs the model from the store
(catalogue:mediapipe-pose-detection/pose_detection.tflite); then, in numpy:

- SsdAnchorsCalculator::GenerateAnchors (ssd_anchors_calculator.cc) for those options;
- TensorsToDetectionsCalculator's DecodeBoxes and score handling (tensors_to_detections_calculator.cc,
  reverse_output_order: x, y, w, h; keypoints x, y; sigmoid of the logit clipped to +-100;
  min_score_thresh 0.2; boxes of negative size dropped);
- NonMaxSuppressionCalculator's WEIGHTED algorithm at IoU 0.3 (non_max_suppression_calculator.cc:
  best first, every remaining detection overlapping it by more than the threshold, itself
  included, averaged into it weighted by score; MediaPipe keeps the best one's score).

The detections are mapped back onto the picture (DetectionLetterboxRemovalCalculator) and printed as
JSON lines: {"box": [x0, y0, x1, y1], "score": s, "mean_score": m, "group": n, "keypoints":
[[x, y] * 4]} in picture pixels. "score" is MediaPipe's (the best of the group); "mean_score" is the
plain mean of the group's scores, which StreamLens's weighted suppression reports instead
(docs/models.md). The keypoints are MediaPipe's: mid hip centre, full-body size and rotation point,
mid shoulder centre, upper-body size and rotation point. The box is the face's (the graph's own
comment says so), not the body's.

An ffmpeg resize instead (swscale's bilinear filter widens when it shrinks, an anti-aliased
downscale) moves the astronaut's box by ~1.5 px and the far keypoints by up to 16 px: the model
is that sensitive to its input, so the reference samples as MediaPipe does.

Needs PYTHONPATH with numpy and OpenVINO's Python API (.deps/python:.deps/openvino), and ffmpeg.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import openvino as ov

# pose_detection_cpu.pbtxt, SsdAnchorsCalculatorOptions (interpolated_scale_aspect_ratio,
# reduce_boxes_in_lowest_layer: the proto's defaults, 1.0 and false).
ANCHORS = dict(num_layers=5, min_scale=0.1484375, max_scale=0.75, input_size_height=224, input_size_width=224,
               anchor_offset_x=0.5, anchor_offset_y=0.5, strides=[8, 16, 32, 32, 32], aspect_ratios=[1.0],
               fixed_anchor_size=True, interpolated_scale_aspect_ratio=1.0, reduce_boxes_in_lowest_layer=False)
# TensorsToDetectionsCalculatorOptions.
NUM_BOXES, NUM_COORDS, KEYPOINT_OFFSET, NUM_KEYPOINTS, VALUES_PER_KEYPOINT = 2254, 12, 4, 4, 2
SCALE = 224.0
SCORE_CLIPPING, MIN_SCORE = 100.0, 0.2
# NonMaxSuppressionCalculatorOptions.
IOU_THRESHOLD = 0.3
SIZE = 224


def store():
    if os.environ.get("STREAMLENS_MODELS"):
        return os.environ["STREAMLENS_MODELS"]
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "streamlens", "models")


def calculate_scale(min_scale, max_scale, index, count):
    if count == 1:
        return (min_scale + max_scale) * 0.5
    return min_scale + (max_scale - min_scale) * index / (count - 1.0)


def generate_anchors(o):
    anchors = []  # (x_center, y_center, w, h)
    layer_id = 0
    strides = o["strides"]
    while layer_id < o["num_layers"]:
        anchor_height, anchor_width, aspect_ratios, scales = [], [], [], []
        last_same_stride_layer = layer_id
        while last_same_stride_layer < len(strides) and strides[last_same_stride_layer] == strides[layer_id]:
            scale = calculate_scale(o["min_scale"], o["max_scale"], last_same_stride_layer, len(strides))
            if last_same_stride_layer == 0 and o["reduce_boxes_in_lowest_layer"]:
                aspect_ratios += [1.0, 2.0, 0.5]
                scales += [0.1, scale, scale]
            else:
                for ratio in o["aspect_ratios"]:
                    aspect_ratios.append(ratio)
                    scales.append(scale)
                if o["interpolated_scale_aspect_ratio"] > 0.0:
                    scale_next = 1.0 if last_same_stride_layer == len(strides) - 1 else \
                        calculate_scale(o["min_scale"], o["max_scale"], last_same_stride_layer + 1, len(strides))
                    scales.append(math.sqrt(scale * scale_next))
                    aspect_ratios.append(o["interpolated_scale_aspect_ratio"])
            last_same_stride_layer += 1
        for ratio, scale in zip(aspect_ratios, scales):
            ratio_sqrts = math.sqrt(ratio)
            anchor_height.append(scale / ratio_sqrts)
            anchor_width.append(scale * ratio_sqrts)
        stride = strides[layer_id]
        feature_map_height = math.ceil(o["input_size_height"] / stride)
        feature_map_width = math.ceil(o["input_size_width"] / stride)
        for y in range(feature_map_height):
            for x in range(feature_map_width):
                for a in range(len(anchor_height)):
                    x_center = (x + o["anchor_offset_x"]) / feature_map_width
                    y_center = (y + o["anchor_offset_y"]) / feature_map_height
                    w, h = (1.0, 1.0) if o["fixed_anchor_size"] else (anchor_width[a], anchor_height[a])
                    anchors.append((x_center, y_center, w, h))
        layer_id = last_same_stride_layer
    return np.array(anchors, dtype=np.float64)


def decode(raw_boxes, raw_scores, anchors):
    """DecodeBoxes + the score step: [(score, xmin, ymin, xmax, ymax, keypoints[4][2])] in 0..1."""
    raw = raw_boxes.reshape(NUM_BOXES, NUM_COORDS).astype(np.float64)
    ax, ay, aw, ah = anchors[:, 0], anchors[:, 1], anchors[:, 2], anchors[:, 3]
    x_center = raw[:, 0] / SCALE * aw + ax
    y_center = raw[:, 1] / SCALE * ah + ay
    w = raw[:, 2] / SCALE * aw
    h = raw[:, 3] / SCALE * ah
    keypoints = np.empty((NUM_BOXES, NUM_KEYPOINTS, 2))
    for k in range(NUM_KEYPOINTS):
        offset = KEYPOINT_OFFSET + k * VALUES_PER_KEYPOINT
        keypoints[:, k, 0] = raw[:, offset] / SCALE * aw + ax
        keypoints[:, k, 1] = raw[:, offset + 1] / SCALE * ah + ay
    logits = np.clip(raw_scores.reshape(NUM_BOXES).astype(np.float64), -SCORE_CLIPPING, SCORE_CLIPPING)
    scores = 1.0 / (1.0 + np.exp(-logits))
    found = []
    for i in range(NUM_BOXES):
        if scores[i] < MIN_SCORE or w[i] < 0 or h[i] < 0:
            continue
        found.append((scores[i], x_center[i] - w[i] / 2, y_center[i] - h[i] / 2,
                      x_center[i] + w[i] / 2, y_center[i] + h[i] / 2, keypoints[i]))
    return found


def iou(a, b):
    ix = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    iy = max(0.0, min(a[4], b[4]) - max(a[2], b[2]))
    inter = ix * iy
    union = (a[3] - a[1]) * (a[4] - a[2]) + (b[3] - b[1]) * (b[4] - b[2]) - inter
    return inter / union if union > 0 else 0.0


def weighted_nms(detections):
    remaining = sorted(detections, key=lambda d: -d[0])
    kept = []
    while remaining:
        best = remaining[0]
        candidates = [d for d in remaining if iou(d, best) > IOU_THRESHOLD]
        remaining = [d for d in remaining if iou(d, best) <= IOU_THRESHOLD]
        if not candidates:  # a box of no area overlaps nothing, not even itself: MediaPipe keeps it and stops
            kept.append((best[0], best[0], 1, list(best[1:5]), best[5]))
            break
        total = sum(d[0] for d in candidates)
        box = [sum(d[j] * d[0] for d in candidates) / total for j in (1, 2, 3, 4)]
        keypoints = sum(d[5] * d[0] for d in candidates) / total
        kept.append((best[0], total / len(candidates), len(candidates), box, keypoints))
    return kept


def letterbox(picture, rx, ry, rw, rh):
    """ImageToTensorCalculator's CPU path: the region (rx, ry, rw, rh) of the picture sampled onto
    SIZE x SIZE by plain bilinear interpolation at pixel centres (OpenCV's warpPerspective, INTER_LINEAR,
    no anti-aliasing), pixels outside the picture 0 (BORDER_ZERO)."""
    fh, fw = picture.shape[:2]
    padded = np.zeros((fh + 2, fw + 2, 3), np.float64)
    padded[1:-1, 1:-1] = picture
    centres = (np.arange(SIZE) + 0.5) / SIZE
    x = np.clip(rx + centres * rw - 0.5 + 1, 0, fw + 1)  # in padded coordinates
    y = np.clip(ry + centres * rh - 0.5 + 1, 0, fh + 1)
    x0 = np.minimum(np.floor(x).astype(int), fw)
    y0 = np.minimum(np.floor(y).astype(int), fh)
    ax = (x - x0)[None, :, None]
    ay = (y - y0)[:, None, None]
    top = padded[y0][:, x0] * (1 - ax) + padded[y0][:, x0 + 1] * ax
    bottom = padded[y0 + 1][:, x0] * (1 - ax) + padded[y0 + 1][:, x0 + 1] * ax
    return top * (1 - ay) + bottom * ay


def main(argv):
    image = argv[1]
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height",
                            "-of", "csv=p=0", image], check=True, capture_output=True, text=True).stdout
    fw, fh = (int(v) for v in probe.strip().split(","))
    # FrameGeometry's letterbox: the padded region, in whole frame pixels.
    if fw > fh:
        rw, rh, rx, ry = fw, fw, 0, -((fw - fh) // 2)
    elif fw < fh:
        rw, rh, rx, ry = fh, fh, -((fh - fw) // 2), 0
    else:
        rw, rh, rx, ry = fw, fh, 0, 0
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", image, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                         check=True, capture_output=True).stdout
    picture = np.frombuffer(raw, np.uint8).reshape(fh, fw, 3)
    blob = (letterbox(picture, rx, ry, rw, rh) / 127.5 - 1.0)[None].astype(np.float32)

    core = ov.Core()
    model = core.read_model(os.path.join(store(), "mediapipe-pose-detection", "pose_detection.tflite"))
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    result = compiled([blob])
    outputs = [result[compiled.output(i)] for i in range(len(compiled.outputs))]
    raw_boxes = next(o for o in outputs if o.shape[-1] == NUM_COORDS)
    raw_scores = next(o for o in outputs if o.shape[-1] == 1)

    anchors = generate_anchors(ANCHORS)
    assert len(anchors) == NUM_BOXES, len(anchors)
    for score, mean_score, group, box, keypoints in weighted_nms(decode(raw_boxes, raw_scores, anchors)):
        def frame(x, y):
            return [rx + x * rw, ry + y * rh]
        x0, y0 = frame(box[0], box[1])
        x1, y1 = frame(box[2], box[3])
        points = [frame(p[0], p[1]) for p in keypoints]
        print(json.dumps({"box": [round(float(v), 2) for v in (x0, y0, x1, y1)], "score": round(float(score), 4),
                          "mean_score": round(float(mean_score), 4), "group": group,
                          "keypoints": [[round(float(v), 2) for v in p] for p in points]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
