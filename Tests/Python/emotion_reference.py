#!/usr/bin/env python3
"""FER's emotion scores for one face box of a photo: the reference lensclassify's emotions are compared with.

    emotion_reference.py PHOTO X Y W H [--offsets DX,DY] [--save-input FILE.npy]

X Y W H is the face box in the photo's pixels (lensmetadata's x, y, width, height); fractions are
rounded to the nearest whole pixel, as fer works on whole pixels. What fer 25.10.3 does to a box
before classifying it (fer/fer.py, FER.detect_emotions with its defaults), here in numpy:

  1. grey: OpenCV's COLOR_BGR2GRAY for 8 bits, (9798 R + 19235 G + 3735 B + 16384) >> 15 — its
     fixed-point 0.299, 0.587, 0.114, rounded (what OpenCV 4.11 computes: the same on every pixel);
  2. the grey picture padded by 40 pixels (fer's PADDING) on every side with the mean of its
     bottom two rows, rounded to the nearest integer (cv2.copyMakeBorder, BORDER_CONSTANT);
  3. the box made square (FER.tosquare: the shorter side grown by the difference, the box moved
     back by half of it, in integers), grown by the offsets on every side (default 10,10, fer's
     `offsets`), moved into the padded picture, its left and top clamped at 0 (the right and
     bottom are clamped by the slice), and cut out;
  4. resized to 64x64 with cv2.resize's default, INTER_LINEAR: bilinear with pixel centres
     aligned ((d + 0.5) * scale - 0.5), edges repeated, no anti-aliasing, in OpenCV's fixed point
     (11-bit weights; the vertical pass as its x86 SIMD code does it) and 8-bit results; a crop
     of exactly 128x128 OpenCV resizes as INTER_AREA (2x2 means). The same bytes as cv2.resize of
     opencv-contrib-python 4.11.0.86 for every crop size from 8 to 399 (random pictures);
  5. x / 255, then (x - 0.5) * 2: -1..1, shape [1, 64, 64, 1].

The photo is decoded by ffmpeg (rgb24). OpenVINO's Python API runs the model from the store
(catalogue:fer-emotion/emotion_model_quantized.tflite, the file fer runs with tf.lite; its last op
is a softmax). Prints one JSON line: {"scores": [7], "label", "labels", "box" (the box used),
"crop" ([x0, y0, x1, y1] in the photo, before the clamp), "model"}. --save-input writes the
[1, 64, 64, 1] float32 input as .npy.

Needs PYTHONPATH with numpy and OpenVINO's Python API (.deps/python:.deps/openvino), and ffmpeg.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import openvino as ov

LABELS = ["angry", "disgust", "fear", "happy", "sad", "surprise", "neutral"]  # FER._get_labels
PADDING = 40
SIZE = 64
COEF_BITS = 11  # OpenCV's INTER_RESIZE_COEF_BITS
COEF_SCALE = 1 << COEF_BITS


def store():
    if os.environ.get("STREAMLENS_MODELS"):
        return os.environ["STREAMLENS_MODELS"]
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "streamlens", "models")


def decode(photo):
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height",
                            "-of", "csv=p=0", photo], check=True, capture_output=True, text=True).stdout
    w, h = (int(v) for v in probe.strip().split(",")[:2])
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", photo, "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                         check=True, capture_output=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(h, w, 3)


def grey(rgb):
    r, g, b = (rgb[..., k].astype(np.int64) for k in range(3))
    return ((9798 * r + 19235 * g + 3735 * b + (1 << 14)) >> 15).astype(np.uint8)


def linear_taps(src, dst, clamp_weights):
    """OpenCV's INTER_LINEAR source indices and 11-bit weights for one axis (resize.cpp). Past an edge
    the columns get weights (1, 0) on the edge pixel; the rows keep their weights on the edge row
    repeated (the difference shows when enlarging, in the outer two rows)."""
    scale = src / dst
    index = np.empty((dst, 2), np.int64)
    weight = np.empty((dst, 2), np.int64)
    for d in range(dst):
        f = np.float32((d + 0.5) * scale - 0.5)  # OpenCV computes it in float
        s = int(np.floor(f))
        f = np.float32(f - s)
        if clamp_weights and s < 0:
            s, f = 0, np.float32(0)
        if clamp_weights and s >= src - 1:
            s, f = src - 1, np.float32(0)
        w0 = int(np.rint(np.float32(1 - f) * COEF_SCALE))  # saturate_cast<short>: round half to even
        index[d] = (min(max(s, 0), src - 1), min(max(s + 1, 0), src - 1))
        weight[d] = (w0, COEF_SCALE - w0)
    return index, weight


def resize_linear(image, size):
    """cv2.resize(image, (size, size)) for an 8-bit single-channel image, INTER_LINEAR."""
    h, w = image.shape
    if w == 2 * size and h == 2 * size:  # OpenCV turns exactly half size into INTER_AREA: 2x2 means, rounded
        q = image.astype(np.int64)
        return ((q[0::2, 0::2] + q[0::2, 1::2] + q[1::2, 0::2] + q[1::2, 1::2] + 2) >> 2).astype(np.uint8)
    xi, xw = linear_taps(w, size, clamp_weights=True)
    yi, yw = linear_taps(h, size, clamp_weights=False)
    src = image.astype(np.int64)
    rows = src[:, xi[:, 0]] * xw[:, 0] + src[:, xi[:, 1]] * xw[:, 1]  # horizontal pass: ints, 8 + 11 bits
    r0, r1 = rows[yi[:, 0]], rows[yi[:, 1]]
    b0, b1 = yw[:, 0:1], yw[:, 1:2]
    # Vertical pass as VResizeLinearVec_32s8u: (((r0 >> 4) * b0) >> 16) + (((r1 >> 4) * b1) >> 16), then (+2) >> 2.
    out = (((r0 >> 4) * b0) >> 16) + (((r1 >> 4) * b1) >> 16)
    return np.clip((out + 2) >> 2, 0, 255).astype(np.uint8)


def tosquare(x, y, w, h):
    if h > w:
        diff = h - w
        x -= diff // 2
        w += diff
    elif w > h:
        diff = w - h
        y -= diff // 2
        h += diff
    return x, y, w, h


def fer_input(rgb, box, offsets):
    g = grey(rgb)
    value = np.rint(g[-2:, :].mean())  # cv2.mean of the bottom two rows, saturate_cast to 8 bits
    padded = np.pad(g, PADDING, mode="constant", constant_values=int(value))
    x, y, w, h = tosquare(*box)
    x0, x1 = x - offsets[0], x + w + offsets[0]
    y0, y1 = y - offsets[1], y + h + offsets[1]
    face = padded[max(0, y0 + PADDING):y1 + PADDING, max(0, x0 + PADDING):x1 + PADDING]
    small = resize_linear(face, SIZE).astype(np.float32)
    return ((small / 255.0 - 0.5) * 2.0)[None, :, :, None], [x0, y0, x1, y1]


def main(argv):
    p = argparse.ArgumentParser(prog="emotion_reference.py", description="FER's emotion scores for one face box of a photo.")
    p.add_argument("photo")
    for name in ("x", "y", "w", "h"):
        p.add_argument(name, type=float, help="the face box in the photo's pixels" if name == "x" else None)
    p.add_argument("--offsets", default="10,10", help="fer's offsets, DX,DY (default 10,10)")
    p.add_argument("--save-input", metavar="FILE.npy")
    args = p.parse_args(argv[1:])
    box = [int(np.floor(v + 0.5)) for v in (args.x, args.y, args.w, args.h)]
    offsets = [int(v) for v in args.offsets.split(",")]

    blob, crop = fer_input(decode(args.photo), box, offsets)
    if args.save_input:
        np.save(args.save_input, blob)
    path = os.path.join(store(), "fer-emotion", "emotion_model_quantized.tflite")
    if not os.path.isfile(path):
        print(f"error: {path} not found: run `streamlens models fetch fer-emotion`", file=sys.stderr)
        return 1
    core = ov.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    scores = compiled([blob])[compiled.output(0)][0]
    print(json.dumps({"scores": [round(float(s), 6) for s in scores], "label": LABELS[int(np.argmax(scores))],
                      "labels": LABELS, "box": box, "crop": crop, "offsets": offsets,
                      "model": "catalogue:fer-emotion/emotion_model_quantized.tflite"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
