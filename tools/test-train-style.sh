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
# Going on from that network (--init, with the content loss): the manifest records where it
# started (sha256, that network's own training record), and commands.py gives both commands in order.
"$bin" train-style code:waves --out "$dir/more" --init "$dir/tiny.onnx" --iterations 10 --pairs 8 --snapshot-every 0 --seed 5 --content-weight 0.5 2>"$dir/more.log" \
  || { cat "$dir/more.log" >&2; fail "train-style --init exited $?"; }
python3 - "$dir" <<'PY' || exit 1
import hashlib, json, subprocess, sys
d = sys.argv[1]
tiny, more = (json.load(open(f"{d}/{n}.json"))["training"] for n in ("tiny", "more"))
problems = []
if more["init"]["sha256"] != hashlib.sha256(open(f"{d}/tiny.onnx", "rb").read()).hexdigest(): problems.append("init sha256")
if more["init"]["training"] != tiny: problems.append("init's training record")
if more["network"] != tiny["network"]: problems.append(f"network {more['network']} from {tiny['network']}")
if not (more["content_weight"] == 0.5 and more["final_content_loss"] > 0): problems.append(f"content loss {more['content_weight']} {more['final_content_loss']}")
chain = subprocess.run([sys.executable, "tools/train_style/commands.py", f"{d}/more.json"], capture_output=True, text=True).stdout.splitlines()
if chain != [tiny["command"], more["command"]]: problems.append(f"commands.py: {chain}")
if problems: print("test-train: FAIL: --init: " + "; ".join(problems)); sys.exit(1)
PY
# Bad input: a clear message and a non-zero exit.
if "$bin" train-style code:waves --out "$dir/bad" --init tools/setup.sh 2>"$dir/bad.log"; then fail "a shell script was accepted as --init"; fi
grep -q "init tools/setup.sh: not a network train-style wrote" "$dir/bad.log" || fail "bad --init: $(cat "$dir/bad.log")"
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
