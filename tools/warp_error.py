#!/usr/bin/env python3
"""Temporal consistency of a processed video against its input: the warping error of Lai et al.
2018 ("Learning Blind Video Temporal Consistency"; the same measure in ReCoNet and Ruder et al.).

    warp_error.py INPUT OUTPUT [--size WxH] [--frames N] [--skip-cuts]   (prints one JSON line)

For each frame t, the optical flow of the INPUT from t to t-1 (OpenCV's DIS, medium preset) and
back; pixels that fail the forward-backward check (|f + b|² < 0.01 (|f|² + |b|²) + 0.5, Sundaram
et al.'s occlusion test) are left out. Output frame t-1 warped to t by that flow, the mean squared
difference with output frame t over the kept pixels (RGB in 0..1, x1000). The same for the input
itself: what the content's own motion costs the measure (its flow errors, new detail). A
processed video that flickers no more than its content has a ratio near 1; a per-frame style
network typically has several times the input's.

--skip-cuts leaves out frame pairs where the check keeps under a fifth of the pixels (a cut: there
is no motion to follow). Both videos are read with OpenCV and scaled to --size (INTER_AREA).
Used by make bench-temporal and the steady-style tests (.deps/mediapipe-venv's OpenCV); never by
the product.
"""
import argparse
import json

import cv2
import numpy as np


def frames(path, size, n):
    cap = cv2.VideoCapture(path)
    out = []
    while len(out) < n:
        ok, f = cap.read()
        if not ok:
            break
        out.append(cv2.resize(f, size, interpolation=cv2.INTER_AREA))
    return out


def warp(img, flow):
    h, w = flow.shape[:2]
    gx, gy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    return cv2.remap(img, gx + flow[..., 0], gy + flow[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def measure(inputs, outputs, skip_cuts=False):
    """Per-pair warping errors (x1000) of inputs and of outputs, and the pairs used."""
    n = min(len(inputs), len(outputs))
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    ei, eo = [], []
    for t in range(1, n):
        g0 = cv2.cvtColor(inputs[t - 1], cv2.COLOR_BGR2GRAY)
        g1 = cv2.cvtColor(inputs[t], cv2.COLOR_BGR2GRAY)
        back = dis.calc(g1, g0, None)   # t -> t-1
        fwd = dis.calc(g0, g1, None)    # t-1 -> t
        fwd_at = warp(fwd, back)
        kept = (np.sum((back + fwd_at) ** 2, axis=2)
                < 0.01 * (np.sum(back ** 2, axis=2) + np.sum(fwd_at ** 2, axis=2)) + 0.5).astype(np.float32)
        if kept.sum() < (0.2 * kept.size if skip_cuts else 100):
            continue
        for src, acc in ((inputs, ei), (outputs, eo)):
            d = (src[t].astype(np.float32) - warp(src[t - 1], back).astype(np.float32)) / 255.0
            acc.append(1000 * float((np.sum(d ** 2, axis=2) * kept).sum() / (3 * kept.sum())))
    return ei, eo


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("--size", default="480x270")
    p.add_argument("--frames", type=int, default=100000)
    p.add_argument("--skip-cuts", action="store_true")
    a = p.parse_args()
    size = tuple(int(v) for v in a.size.split("x"))
    inputs, outputs = frames(a.input, size, a.frames), frames(a.output, size, a.frames)
    ei, eo = measure(inputs, outputs, a.skip_cuts)
    if not ei:
        raise SystemExit("warp_error: no pair of frames to measure")
    mean_diff = float(np.mean([np.abs(x.astype(np.float32) - y.astype(np.float32)).mean() for x, y in zip(inputs, outputs)]))
    print(json.dumps({"frames": min(len(inputs), len(outputs)), "pairs": len(ei), "input": float(np.mean(ei)),
                      "output": float(np.mean(eo)), "ratio": float(np.mean(eo) / np.mean(ei)),
                      "mean_difference": mean_diff}))


if __name__ == "__main__":
    main()
