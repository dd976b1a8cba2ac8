#!/usr/bin/env bash
# Creates .deps/triton-venv: NVIDIA PyTriton (bundled tritonserver) + OpenVINO's Python API,
# pinned by tools/remote/requirements.txt, for the loopback KServe v2 server (serve.py) and
# the reference client (reference_client.py).
#
# Idempotent: a copy of requirements.txt inside the venv marks a finished install; the venv is
# (re)built only when it is missing or requirements.txt changed. Prints one "remote: ..." line
# when it installs (~60 s, needs network), nothing when up to date.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENV="$ROOT/.deps/triton-venv"
REQ="$HERE/requirements.txt"
MARKER="$VENV/streamlens-requirements.txt"
PY=${PYTHON:-python3}

fail() { printf 'remote: error: %s\n' "$*" >&2; exit 1; }

[ -f "$REQ" ] || fail "missing $REQ"
if [ -x "$VENV/bin/python" ] && [ -f "$MARKER" ] && cmp -s "$REQ" "$MARKER"; then
  exit 0
fi

command -v "$PY" >/dev/null 2>&1 || fail "$PY not found (set PYTHON=/path/to/python3.11)"
printf 'remote: installing PyTriton + OpenVINO into %s (pinned by %s)\n' "$VENV" "${REQ#"$ROOT"/}"

mkdir -p "$ROOT/.deps"
rm -rf "$VENV"
LOG=$(mktemp "${TMPDIR:-/tmp}/setup-remote.XXXXXX.log")
trap 'rm -f "$LOG"' EXIT
if ! "$PY" -m venv "$VENV" >"$LOG" 2>&1; then
  cat "$LOG" >&2
  fail "'$PY -m venv $VENV' failed"
fi
if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$REQ" >"$LOG" 2>&1; then
  tail -n 30 "$LOG" >&2
  fail "pip install -r $REQ failed (venv left incomplete; rerun after fixing)"
fi
if ! "$VENV/bin/python" -c 'import openvino, pytriton.triton, tritonclient.http, numpy' >"$LOG" 2>&1; then
  cat "$LOG" >&2
  fail "installed venv cannot import openvino/pytriton/tritonclient"
fi
cp "$REQ" "$MARKER"
