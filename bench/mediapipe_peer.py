"""bench-detect's MediaPipe peer: what a user of the seed apps' model family would run instead.

MediaPipe's own framework (mediapipe==0.10.21 from PyPI, in its own venv: bench/lib.sh
bench_mediapipe_venv), its face detection solution with the short-range model
(model_selection=0, min_detection_confidence=0.5), on the clip decoded by OpenCV as MediaPipe's
samples do (cv2.VideoCapture, BGR to RGB, `process` frame by frame).

Usage: mediapipe_peer.py CLIP
Prints one line on stderr: "mediapipe_peer: N frames, F faces, graph 1.234 s, start-up 0.567 s",
where graph is the frame loop (decoding and detection; the graph's construction and the imports
are start-up, not counted there) and start-up is everything before the first frame was read.
"""
import sys
import time

began = time.monotonic()
import cv2  # noqa: E402
import mediapipe as mp  # noqa: E402


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    capture = cv2.VideoCapture(sys.argv[1])
    if not capture.isOpened():
        print(f"mediapipe_peer: cannot open {sys.argv[1]}", file=sys.stderr)
        return 1
    with mp.solutions.face_detection.FaceDetection(model_selection=0, min_detection_confidence=0.5) as detector:
        start = time.monotonic()
        frames = faces = 0
        while True:
            ok, bgr = capture.read()
            if not ok:
                break
            result = detector.process(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
            frames += 1
            faces += len(result.detections or [])
        graph = time.monotonic() - start
    print(f"mediapipe_peer: {frames} frames, {faces} faces, graph {graph:.3f} s, start-up {start - began:.3f} s", file=sys.stderr)
    return 0 if frames > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
