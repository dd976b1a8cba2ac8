#!/usr/bin/env bash
# .deps/mediapipe-venv: MediaPipe's own Python (mediapipe==0.10.21, --no-deps, with the few
# packages its solutions import, pinned): the reference the mask tests and benchmarks compare
# StreamLens with (selfie segmentation, BlazePose), and bench-detect's MediaPipe peer. The one
# recipe for that folder: tools/setup.sh, bench/lib.sh and bench/segmentation.py call it. Made
# once; a second run checks and returns (no network). Prints nothing when it is already there.
# Usage: tools/mediapipe-venv.sh   (PYTHON: the interpreter to make the venv with, default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.deps/mediapipe-venv
PACKAGES=("mediapipe==0.10.21" "numpy==1.26.4" "protobuf==4.25.9" "absl-py==2.5.1" "attrs==26.1.0"
  "flatbuffers==25.12.19" "opencv-python-headless==4.10.0.84" "matplotlib==3.11.2" "contourpy==1.3.3" "cycler==0.12.1"
  "fonttools==4.68.0" "kiwisolver==1.5.1" "packaging==26.4" "pillow==13.0.0" "pyparsing==3.3.3" "python-dateutil==4.0.0" "six==1.17.0")
MARKER="$VENV/.streamlens-packages"
CHECK='import cv2, mediapipe; from mediapipe.python.solutions import selfie_segmentation, face_detection; assert mediapipe.__version__ == "0.10.21"'
if [ "$(cat "$MARKER" 2>/dev/null)" = "${PACKAGES[*]}" ] && "$VENV/bin/python" -c "$CHECK" 2>/dev/null; then exit 0; fi
echo "mediapipe-venv: pip install ${PACKAGES[0]} (its Python, the masks' reference) into $VENV" >&2
rm -rf "$VENV"
"${PYTHON:-python3}" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "${PACKAGES[@]}" >&2
"$VENV/bin/python" -c "$CHECK"
echo "${PACKAGES[*]}" >"$MARKER"
