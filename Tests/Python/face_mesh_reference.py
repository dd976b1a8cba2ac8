#!/usr/bin/env python3
"""MediaPipe's own face mesh on a photo: the reference lensclassify's face landmarks are compared with.

    face_mesh_reference.py PHOTO OUT.json

Runs mediapipe.solutions.face_mesh.FaceMesh(static_image_mode=True, max_num_faces=1,
refine_landmarks=False) — MediaPipe's whole CPU graph: the short-range BlazeFace detector, the
rotated ROI it derives from the detection, the crop, face_landmark.tflite (the file of the
catalogue's mediapipe-face-landmark) and the projection back — on PHOTO (decoded by Pillow, RGB),
and writes OUT.json:

    {"command": …, "venv": …, "graph": …, "versions": {"mediapipe", "numpy", "pillow", "python"},
     "image": {"photo", "width", "height", "rgb_sha256" (of the decoded pixels), …}, "units": …,
     "roi": {"x_center", "y_center", "width", "height", "rotation"},   # pixels; radians, clockwise
     "detection": {"score", "box": [x, y, w, h], "keypoints": [[x, y] * 6]},   # pixels
     "landmarks": [[x, y, z] * 468]}            # pixels: x·width, y·height, z·width (MediaPipe's
                                                # z has x's scale, smaller is nearer the camera)

"roi" is face_rects_from_detections, the region the landmark model was run on (in static-image mode
every frame's ROI comes from a fresh detection). Needs mediapipe, not in the project's Python
packages: a throwaway venv outside the repository, e.g.

    /usr/bin/python3 -m venv /tmp/mpvenv && /tmp/mpvenv/bin/pip install mediapipe==0.10.21
    /tmp/mpvenv/bin/python Tests/Python/face_mesh_reference.py .deps/media/astronaut.png \\
        Tests/Fixtures/face-mesh-astronaut.json
"""
import hashlib
import json
import platform
import re
import sys

import mediapipe
import numpy as np
from mediapipe.python.solution_base import SolutionBase
from mediapipe.python.solutions import face_mesh
import PIL
from PIL import Image


class FaceMeshWithROI(SolutionBase):
    """What FaceMesh(static_image_mode=True, max_num_faces=1, refine_landmarks=False) builds — the
    arguments its __init__ passes in mediapipe 0.10.21 (python/solutions/face_mesh.py), defaults
    min_detection_confidence=min_tracking_confidence=0.5 — plus two more of the graph's outputs."""

    def __init__(self):
        super().__init__(
            binary_graph_path=face_mesh._BINARYPB_FILE_PATH,
            side_inputs={"num_faces": 1, "with_attention": False, "use_prev_landmarks": False},
            calculator_params={
                "facedetectionshortrangecpu__facedetectionshortrange__facedetection__TensorsToDetectionsCalculator.min_score_thresh": 0.5,
                "facelandmarkcpu__ThresholdingCalculator.threshold": 0.5,
            },
            outputs=["multi_face_landmarks", "face_rects_from_detections", "face_detections"])

    def process(self, image):
        return super().process(input_data={"image": image})


def plain_face_mesh(image):
    with face_mesh.FaceMesh(static_image_mode=True, max_num_faces=1, refine_landmarks=False) as mesh:
        return mesh.process(image).multi_face_landmarks


def main(argv):
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    photo, out = argv[1], argv[2]
    image = np.asarray(Image.open(photo).convert("RGB"))
    h, w = image.shape[:2]
    with FaceMeshWithROI() as mesh:
        result = mesh.process(image)
    if not result.multi_face_landmarks:
        print(f"error: MediaPipe found no face in {photo}", file=sys.stderr)
        return 1
    points = result.multi_face_landmarks[0].landmark
    # The public class itself, to show the extra outputs changed nothing.
    plain = plain_face_mesh(image)
    if not plain or [(p.x, p.y, p.z) for p in plain[0].landmark] != [(p.x, p.y, p.z) for p in points]:
        print("error: FaceMesh itself gives other landmarks than the same graph with the ROI as an output", file=sys.stderr)
        return 1
    record = {
        "command": f"{sys.executable} Tests/Python/face_mesh_reference.py {photo} {out}",
        "venv": "/usr/bin/python3 -m venv /tmp/mpvenv && /tmp/mpvenv/bin/pip install mediapipe==0.10.21",
        "graph": "mediapipe.solutions.face_mesh.FaceMesh(static_image_mode=True, max_num_faces=1, refine_landmarks=False), "
                 "min_detection_confidence=min_tracking_confidence=0.5 (the defaults)",
        "versions": {"mediapipe": mediapipe.__version__, "numpy": np.__version__, "pillow": PIL.__version__,
                     "python": platform.python_version()},
        "image": {"photo": photo, "width": w, "height": h, "rgb_sha256": hashlib.sha256(image.tobytes()).hexdigest(),
                  "what": "scikit-image's astronaut (Eileen Collins, NASA, public domain), RGB" if "astronaut" in photo else "RGB"},
        "units": "pixels of the photo: x*width, y*height, z*width (MediaPipe's normalised z shares x's scale)",
    }
    if result.face_rects_from_detections:
        r = result.face_rects_from_detections[0]
        record["roi"] = {"x_center": round(r.x_center * w, 3), "y_center": round(r.y_center * h, 3),
                         "width": round(r.width * w, 3), "height": round(r.height * h, 3),
                         "rotation": round(r.rotation, 5)}
    if result.face_detections:
        d = result.face_detections[0]
        b = d.location_data.relative_bounding_box
        record["detection"] = {
            "score": round(d.score[0], 5),
            "box": [round(b.xmin * w, 3), round(b.ymin * h, 3), round(b.width * w, 3), round(b.height * h, 3)],
            "keypoints": [[round(k.x * w, 3), round(k.y * h, 3)] for k in d.location_data.relative_keypoints],
        }
    record["landmarks"] = [[round(p.x * w, 3), round(p.y * h, 3), round(p.z * w, 3)] for p in points]
    # Lists of numbers on one line (a landmark a line), so a diff of the fixture shows which points moved.
    text = re.sub(r"\[[-0-9.,\s]*\]", lambda m: json.dumps(json.loads(m.group(0))), json.dumps(record, indent=1)) + "\n"
    assert json.loads(text) == record
    with open(out, "w") as f:
        f.write(text)
    print(f"{out}: {len(record['landmarks'])} landmarks", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
