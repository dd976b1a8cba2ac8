#!/usr/bin/env python3
"""MediaPipe's own selfie segmentation (its Python solution, general model, threshold 0.5) of a
picture or of each frame of a video, as the reference the segmentation tests compare
StreamLens's masks with. Run with .deps/mediapipe-venv/bin/python (tools/setup.sh makes it).

    mediapipe_selfie_mask.py PICTURE OUT.pgm          one binary mask (0/255) at the picture's size
    mediapipe_selfie_mask.py VIDEO OUT.gray N         the first N frames' masks, raw, one after another
"""
import sys

import cv2
import numpy as np
from mediapipe.python.solutions import selfie_segmentation

source, out = sys.argv[1], sys.argv[2]
frames = int(sys.argv[3]) if len(sys.argv) > 3 else 0
with selfie_segmentation.SelfieSegmentation(model_selection=0) as segmenter:
    def mask(bgr):
        probability = segmenter.process(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)).segmentation_mask
        return np.where(probability > 0.5, 255, 0).astype(np.uint8)
    if frames == 0:
        picture = cv2.imread(source, cv2.IMREAD_COLOR)
        if picture is None:
            sys.exit(f"cannot read {source}")
        m = mask(picture)
        with open(out, "wb") as f:
            f.write(b"P5\n%d %d\n255\n" % (m.shape[1], m.shape[0]) + m.tobytes())
    else:
        video = cv2.VideoCapture(source)
        with open(out, "wb") as f:
            for _ in range(frames):
                ok, frame = video.read()
                if not ok:
                    sys.exit(f"{source} has fewer than {frames} frames")
                f.write(mask(frame).tobytes())
