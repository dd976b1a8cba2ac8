#!/usr/bin/env bash
# make fuzz: coverage-guided fuzzing (libFuzzer) of what StreamLens reads from people and files.
#
#   pipeline-spec    pipeline files and command-line specs: loading, comments, ${…} expansion,
#                    NAME=value arguments (PipelineSpec)
#   property-value   property values and inference sizes (PropertySpec.parse, InferenceSize.parse)
#   model-manifest   model manifests as bytes, decoded, validated, a detector's decoder built and
#                    run (ModelManifest.decode, BlazeFaceDecoder, SSD anchors)
#   manifest-fields  the same, structure-aware: the bytes are edits (key, edge value) of the
#                    shipped manifests' JSON, so every key gets extreme values
#   control-command  control-channel lines (ControlCommand.parse)
#   http-response    what an inference server sends back: HTTP/1.1 answers in pieces
#                    (HTTPResponseReader: lengths, chunks, limits)
#   inference-response  the body of an inference answer: JSON header + binary tensors
#                    (InferenceResponseDecoder: header length, shapes, block sizes)
#   remote-tensors   an inference server's metadata shapes and answer values for the shipped
#                    detectors: the remote backend's shape check, the decoder, the mapping onto
#                    the frame (FrameBounds) and the drawing (FrameCanvas, RGB and BGRx)
#   coreml-import    .mlmodel files through `streamlens import`'s loading and checks
#                    (tools/coreml_import.py, fuzzed with atheris)
#
# Each target runs FUZZ_SECONDS (default 60) from its committed seed corpus Fuzz/corpus/<target>
# (inputs found on the way go to out/fuzz/<target>/corpus, not committed). Exits 1 if any target
# crashed or broke a promise (see Fuzz/Sources/FuzzEntryPoints); the inputs are saved as
# out/fuzz/<target>/crash-*. Replay one: Fuzz/.build/debug/fuzz-<target> FILE, or for
# coreml-import PYTHONPATH=.deps/python python3 Fuzz/coreml/fuzz_coreml_import.py --replay FILE.
#
#   FUZZ_SECONDS=600 FUZZ_TARGETS="model-manifest control-command" tools/fuzz.sh
#
# The Swift harnesses are the package in Fuzz/ (it depends on this one by path), built with
# libFuzzer and AddressSanitizer. The Python harness needs atheris, which only this script
# installs, into .deps/fuzz-venv (made from the same python3 as .deps/python, whose pinned
# coremltools/onnx/numpy it imports, as `streamlens import` does).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
TARGETS=${FUZZ_TARGETS:-pipeline-spec property-value model-manifest manifest-fields control-command http-response inference-response remote-tensors coreml-import}
OUT=$ROOT/out/fuzz
SWIFT=${SWIFT:-swift}
PY=${PYTHON:-python3}
ATHERIS_VERSION=3.0.0  # the newest with a wheel for CPython 3.11 (3.1.0 has none)
# libFuzzer's limits: an input running longer than this many seconds, or the process growing past
# this many MB, is a finding too (a hang or a runaway allocation).
LIMITS=(-timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb="${FUZZ_RSS_MB:-2048}")

say() { printf 'fuzz: %s\n' "$*"; }
mkdir -p "$OUT"

swift_targets=() python_target=false
for t in $TARGETS; do
  case $t in
    coreml-import) python_target=true ;;
    pipeline-spec|property-value|model-manifest|manifest-fields|control-command|http-response|inference-response|remote-tensors) swift_targets+=("$t") ;;
    *) say "unknown target $t"; exit 2 ;;
  esac
done

if [ ${#swift_targets[@]} -gt 0 ]; then
  say "building the harnesses (Fuzz/, libFuzzer + AddressSanitizer)"
  # SwiftPM passes --sanitize=fuzzer --sanitize=address to swiftc as two -sanitize= options, and
  # swiftc keeps only the last: the code would get AddressSanitizer but no coverage counters
  # ("no interesting inputs … Is the code instrumented?"). One combined option, after SwiftPM's,
  # instruments for both; --sanitize=fuzzer stays so SwiftPM links libFuzzer's main.
  # ld.gold warns about every ASan symbol it cannot export, and the root package's pkg-config
  # flags about -pthread: the full log is out/fuzz/build.log.
  if ! (cd Fuzz && "$SWIFT" build --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address) >"$OUT/build.log" 2>&1; then
    grep -v "Cannot export local symbol\|prohibited flag" "$OUT/build.log" | tail -40
    say "build failed (out/fuzz/build.log)"
    exit 1
  fi
  BIN=$(cd Fuzz && "$SWIFT" build --show-bin-path)
fi

if $python_target; then
  VENV=$ROOT/.deps/fuzz-venv
  if [ "$(cat "$VENV/.atheris" 2>/dev/null)" != "$ATHERIS_VERSION" ]; then
    [ -d "$ROOT/.deps/python" ] || { say ".deps/python is missing: run make setup first"; exit 1; }
    say "atheris $ATHERIS_VERSION into .deps/fuzz-venv"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: "atheris==$ATHERIS_VERSION"
    echo "$ATHERIS_VERSION" >"$VENV/.atheris"
  fi
fi

# The source files each target is about: their edge coverage is reported from the final corpus.
sources_of() {
  case $1 in
    pipeline-spec) echo "PipelineSpec.swift" ;;
    property-value) echo "StageDescriptor.swift InferenceSize.swift" ;;
    model-manifest|manifest-fields) echo "ModelManifest.swift BlazeFaceDecoder.swift SSDAnchors.swift Suppression.swift" ;;
    control-command) echo "ControlCommand.swift" ;;
    remote-tensors) echo "OutsideNumbers.swift FrameGeometry.swift BlazeFaceDecoder.swift CenterFaceDecoder.swift FrameCanvas.swift" ;;
  esac
}

# How the Swift harnesses run. Swift's own backtracer reads the crashed process's memory in a way
# ASan reports as a second, bogus error; without it libFuzzer's handler prints ASan's symbolized
# stack, whose top frame names the failure ("Swift runtime failure: arithmetic overflow").
# Fuzz/lsan.supp: a leak in the toolchain's Foundation (see there).
swift_env=(env SWIFT_BACKTRACE=enable=no "LSAN_OPTIONS=suppressions=$ROOT/Fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}")

failed=() summary=()
for t in $TARGETS; do
  dir=$OUT/$t
  mkdir -p "$dir/corpus" "$dir/tmp"
  # The harnesses' scratch files (the input as a pipeline file or an .mlmodel) go here.
  export TMPDIR=$dir/tmp
  rm -f "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* "$dir"/slow-unit-*
  say "$t: ${SECONDS_PER_TARGET} s (log: out/fuzz/$t/fuzz.log)"
  args=(-max_total_time="$SECONDS_PER_TARGET" "${LIMITS[@]}" -print_final_stats=1 -artifact_prefix="$dir/")
  [ -f "Fuzz/dict/$t.dict" ] && args+=(-dict="Fuzz/dict/$t.dict")
  status=0
  if [ "$t" = coreml-import ]; then
    # The importer's notes go to a StringIO; a Python exception that escapes is the crash.
    PYTHONPATH="$ROOT/.deps/python" "$VENV/bin/python" Fuzz/coreml/fuzz_coreml_import.py \
      "${args[@]}" "$dir/corpus" Fuzz/corpus/coreml-import >"$dir/fuzz.log" 2>&1 || status=$?
  else
    "${swift_env[@]}" "$BIN/fuzz-$t" "${args[@]}" "$dir/corpus" "Fuzz/corpus/$t" >"$dir/fuzz.log" 2>&1 || status=$?
  fi
  stat() { grep -o "stat::$1: *[0-9]*" "$dir/fuzz.log" | grep -o '[0-9]*$' | tail -1; }
  last=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$dir/fuzz.log" | tail -1 || true)
  line="$t: $(stat number_of_executed_units) runs, $(stat average_exec_per_sec) exec/s, ${last:-no coverage line}, $(stat new_units_added) new inputs, peak RSS $(stat peak_rss_mb) MB"
  if [ "$t" != coreml-import ] && [ $status = 0 ]; then
    # Edge coverage of the target's own source files by the corpus (seed + found), per file.
    "${swift_env[@]}" "$BIN/fuzz-$t" -runs=0 -print_coverage=1 "$dir/corpus" "Fuzz/corpus/$t" >"$dir/coverage.log" 2>&1 || true
    for f in $(sources_of "$t"); do
      line+=$'\n'"    $f: $(grep -E "^(UN)?COVERED_FUNC: .*/$f:" "$dir/coverage.log" \
        | grep -oE 'edges: [0-9]+/[0-9]+' | awk -F'[ /]' '{c+=$2; n+=$3} END {printf "%d of %d edges (%.0f%%)", c, n, n ? 100*c/n : 0}')"
    done
  fi
  if [ $status != 0 ]; then
    crashes=$(ls "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* 2>/dev/null | sed "s|$ROOT/||" | tr '\n' ' ' || true)
    line+=$'\n'"    FAILED (exit $status): ${crashes:-see the log}"
    # The first message: Swift's runtime failure (a trap) or fatal error (a broken promise),
    # the Python exception, or a sanitizer's or libFuzzer's report (leak, out-of-memory, timeout).
    first=$(grep -m1 -E 'Swift runtime failure|Fatal error' "$dir/fuzz.log" || true)
    [ -n "$first" ] || first=$(grep -m1 -A1 'Uncaught Python exception' "$dir/fuzz.log" | sed -n 2p || true)
    [ -n "$first" ] || first=$(grep -m1 -E 'ERROR: ' "$dir/fuzz.log" || true)
    line+=$'\n'"    $first"
    failed+=("$t")
  fi
  summary+=("$line")
done

{
  echo "fuzz: ${SECONDS_PER_TARGET} s per target"
  printf '%s\n' "${summary[@]}"
} | tee "$OUT/summary.txt"
if [ ${#failed[@]} -gt 0 ]; then
  say "crashes in: ${failed[*]} (reproduce: see the comment at the top of tools/fuzz.sh)"
  exit 1
fi
say "no crashes"
