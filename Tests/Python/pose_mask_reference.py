#!/usr/bin/env python3
"""MediaPipe's own BlazePose on a photo: the reference lensclassify's pose landmarks and person mask
(Models/pose-landmarks.json after lensdetect model=Models/pose-detection.json) are compared with.

    pose_mask_reference.py PHOTO [MIN_DETECTION_CONFIDENCE]

Runs what mediapipe.solutions.pose.Pose(static_image_mode=True, model_complexity=1,
enable_segmentation=True, min_detection_confidence=MIN_DETECTION_CONFIDENCE (default 0.5, the
solution's)) builds — MediaPipe's whole CPU graph: the pose detector, the ROI it derives from the
detection (PoseDetectionToRoi), the crop, pose_landmark_full.tflite (the file of the catalogue's
mediapipe-pose-landmark), the mask's sigmoid and its warp back onto the picture — on PHOTO
(decoded by Pillow, RGB), and prints one JSON object:

    {"versions": {"mediapipe", "numpy", "python"}, "width", "height",
     "roi": {"x_center", "y_center", "width", "height", "rotation"},  # pixels; radians, clockwise
     "detection": {"score", "box": [x, y, w, h], "keypoints": [[x, y] * 4]},   # pixels
     "landmarks": [[x, y, z] * 33],        # pixels: x·width, y·height, z·width
     "mask": {"size": [height, width], "counts": [...]}}   # the picture's pixels of
                                            # segmentation_mask >= 0.5 as COCO's uncompressed RLE
                                            # (column-major runs, outside first), as lensmetadata
                                            # writes masks

Nothing of it is StreamLens's. Needs mediapipe, not in the project's Python packages: setup.sh
puts it in .deps/mediapipe-venv (run it without PYTHONPATH pointing at .deps/python, whose numpy
is not the one mediapipe 0.10.21 wants).
"""
import json
import platform
import sys

import mediapipe
import numpy as np
from mediapipe.python.solution_base import SolutionBase
from mediapipe.python.solutions import pose
from PIL import Image


class PoseWithROI(SolutionBase):
    """What Pose(static_image_mode=True, model_complexity=1, enable_segmentation=True) builds — the
    arguments its __init__ passes in mediapipe 0.10.21 (python/solutions/pose.py) — plus two more of
    the graph's outputs, the detection and the ROI made from it."""

    def __init__(self, min_detection_confidence):
        super().__init__(
            binary_graph_path=pose._BINARYPB_FILE_PATH,
            side_inputs={"model_complexity": 1, "smooth_landmarks": False, "enable_segmentation": True,
                         "smooth_segmentation": False, "use_prev_landmarks": False},
            calculator_params={
                "posedetectioncpu__TensorsToDetectionsCalculator.min_score_thresh": min_detection_confidence,
                "poselandmarkbyroicpu__tensorstoposelandmarksandsegmentation__ThresholdingCalculator.threshold": 0.5,
            },
            outputs=["pose_landmarks", "segmentation_mask", "pose_detection", "pose_rect_from_detection"])

    def process(self, image):
        return super().process(input_data={"image": image})


def run_lengths(mask):
    """COCO's uncompressed RLE of a boolean [height, width] array: runs down the columns."""
    flat = mask.T.reshape(-1)
    counts, inside, run = [], False, 0
    for here in flat:
        if here != inside:
            counts.append(run)
            run, inside = 0, here
        run += 1
    counts.append(run)
    return counts


def main():
    photo = sys.argv[1]
    confidence = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
    image = np.asarray(Image.open(photo).convert("RGB"))
    height, width = image.shape[:2]
    with PoseWithROI(confidence) as graph:
        r = graph.process(image)
    if r.pose_landmarks is None or r.segmentation_mask is None:
        print(json.dumps({"width": width, "height": height, "landmarks": None, "mask": None}))
        return
    roi, d = r.pose_rect_from_detection, r.pose_detection
    box = d.location_data.relative_bounding_box
    out = {
        "versions": {"mediapipe": mediapipe.__version__, "numpy": np.__version__, "python": platform.python_version()},
        "width": width, "height": height,
        "roi": {"x_center": roi.x_center * width, "y_center": roi.y_center * height,
                "width": roi.width * width, "height": roi.height * height, "rotation": roi.rotation},
        "detection": {"score": d.score[0], "box": [box.xmin * width, box.ymin * height, box.width * width, box.height * height],
                      "keypoints": [[k.x * width, k.y * height] for k in d.location_data.relative_keypoints]},
        "landmarks": [[p.x * width, p.y * height, p.z * width] for p in r.pose_landmarks.landmark],
        "mask": {"size": [height, width], "counts": run_lengths(np.asarray(r.segmentation_mask) >= 0.5)},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
