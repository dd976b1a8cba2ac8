#!/usr/bin/env bash
# `make test-train`: tools/train-style end to end on a tiny budget — 40 steps on a style drawn
# by code — then the result through lensstylize (frame count, the picture changed) and
# evaluate.py. Checks what a newcomer's first run exercises, not the quality of a real style.
set -euo pipefail
bin=${1:?usage: test-train-style.sh STREAMLENS_BINARY}
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "test-train: FAIL: $*" >&2; exit 1; }
"$bin" train-style code:waves --out "$dir/tiny" --iterations 40 --pairs 8 --snapshot-every 20 --filters 8,16,1 --seed 5 2>"$dir/train.log" \
  || { cat "$dir/train.log" >&2; fail "train-style exited $?"; }
for f in tiny.onnx tiny.json tiny.snapshots/iteration-00020.png tiny.snapshots/iteration-00040.png; do
  [ -s "$dir/$f" ] || fail "$f not written"
done
grep -q '"command": "streamlens train-style code:waves --out' "$dir/tiny.json" || fail "the manifest does not record the command"
grep -q 'ETA' "$dir/train.log" || fail "no progress line with an ETA"
# Bad input: a clear message and a non-zero exit.
if "$bin" train-style /nonexistent.png --out "$dir/bad" 2>"$dir/bad.log"; then fail "a missing style image was accepted"; fi
grep -q "cannot read the style image /nonexistent.png" "$dir/bad.log" || fail "missing style image: $(cat "$dir/bad.log")"
src="filesrc location=.deps/media/astronaut.png ! pngdec ! videoconvert ! videoscale ! video/x-raw,format=RGB,width=320,height=180 ! imagefreeze num-buffers=5 ! video/x-raw,framerate=10/1"
"$bin" run -q "$src ! filesink location=$dir/in.rgb"
"$bin" run -q "$src ! lensstylize model=$dir/tiny.json ! videoconvert ! video/x-raw,format=RGB ! filesink location=$dir/out.rgb" \
  || fail "lensstylize could not run the trained model"
python3 - "$dir" <<'PY' || exit 1
import sys
d = sys.argv[1]
a = open(f"{d}/in.rgb", "rb").read(); b = open(f"{d}/out.rgb", "rb").read()
frame = 320 * 180 * 3
if len(b) != len(a) or len(a) != 5 * frame:
    print(f"test-train: FAIL: {len(a) // frame} frames in, {len(b) // frame} out"); sys.exit(1)
change = sum(abs(x - y) for x, y in zip(a[:frame], b[:frame])) / frame
print(f"test-train: lensstylize ran the 40-step model, mean abs change {change:.1f}/255")
if change < 10: print("test-train: FAIL: the trained model did not change the picture"); sys.exit(1)
PY
.deps/train-venv/bin/python tools/train_style/evaluate.py "$dir/tiny.json" --out "$dir/q.md" 2>"$dir/eval.log" || { cat "$dir/eval.log" >&2; fail "evaluate.py failed"; }
grep -q '| tiny | astronaut.png |' "$dir/q.md" || fail "evaluate.py wrote no row for the model"
echo "test-train: passed ($(grep -o 'teacher [0-9]* s + training [0-9]* s' "$dir/train.log"))"
