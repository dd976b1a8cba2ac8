#!/usr/bin/env bash
# make bench: every benchmark in one run (bench/bridge.sh, detect.sh, stylize.sh, live.sh,
# multi.sh, precision.sh, in that order), then bench/REPORT.md and bench/report.png from what they measured
# (bench/report.py). Each benchmark prints what it prints when run alone, and writes its figures
# to $BENCH_RESULTS/NAME.tsv (bench/lib.sh results_open; out/bench/results by default, emptied
# first); its printed output is kept there too (NAME.out, and its messages NAME.err). This script adds run.tsv: the machine
# (CPU, vCPUs, RAM, OS, kernel, GStreamer, OpenVINO, Swift), the git commit, the settings, the
# load average at the start and end (the machine is shared), and each benchmark's exit code and
# wall time. Every figure in the report comes from these files, ratios included: the baselines
# are measured in the same run, interleaved with StreamLens, never typed in.
# Settings reach the benchmarks as environment (make passes its command-line variables on):
#   RUNS          rounds per variant (bridge 7, detect and stylize 3 by default)
#   DURATION      seconds measured per live variant (60 by default; at least 6)
#   FRAMES        bridge frames (2000); HAAR_FRAMES, WARMUP, VARIANTS, RUN_TIMEOUT, PORT as in each script
#   BENCHES       which benchmarks ("bridge detect stylize live multi precision")
#   BENCH_RESULTS where the figures go (out/bench/results); BENCH_REPORT_DIR where REPORT.md and
#                 report.png go (bench, where they are committed)
# A quick look: make bench RUNS=1 DURATION=10 (the report's header says it is a short run).
# Exits 1 when a benchmark failed; the report is written all the same and says which.
# Usage: bench/all.sh path/to/streamlens
set -euo pipefail
BIN=${1:?usage: bench/all.sh path/to/streamlens}
[ -x "$BIN" ] || { echo "bench: $BIN is not an executable (swift build -c release)" >&2; exit 1; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")   # the benchmarks run from other folders
cd "$(dirname "$0")/.."
ROOT=$PWD
BENCHES=${BENCHES:-bridge detect stylize live multi precision}
for b in $BENCHES; do
  [ -f "bench/$b.sh" ] && [[ $b =~ ^(bridge|detect|stylize|live|multi|precision)$ ]] || { echo "bench: unknown benchmark $b (bridge, detect, stylize, live, multi, precision)" >&2; exit 1; }
done
source bench/lib.sh

# matplotlib first: a venv that cannot draw the chart should fail now, not after the benchmarks.
bench_plot_venv bench

export BENCH_RESULTS=${BENCH_RESULTS:-out/bench/results}
[[ $BENCH_RESULTS = /* ]] || BENCH_RESULTS=$ROOT/$BENCH_RESULTS
export BENCH_RUN_ID="$(date +%Y%m%dT%H%M%S)-$$"
mkdir -p "$BENCH_RESULTS"
rm -f "$BENCH_RESULTS"/*.tsv "$BENCH_RESULTS"/*.out "$BENCH_RESULTS"/*.err

# --- The run: machine, code, settings ---
settings=()
for v in RUNS DURATION FRAMES HAAR_FRAMES WARMUP VARIANTS RUN_TIMEOUT PORT; do
  if [ -n "${!v:-}" ]; then settings+=("$v=${!v}"); fi
done
results_open run "${settings[@]}"
result benches "$BENCHES"
result machine.cpu "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
result machine.vcpus "$(nproc --all) ($(nproc) available to this process)"
result machine.ram_kb "$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
result machine.os "$(. /etc/os-release && echo "$PRETTY_NAME")"
result machine.kernel "$(uname -srm)"
result machine.gstreamer "$("$BIN" --version 2>/dev/null | sed -n 's/.*(\(GStreamer [^)]*\)).*/\1/p') (the library streamlens runs on); $(gst-launch-1.0 --version | sed -n 's/^GStreamer //p' | head -n1) (gst-launch-1.0)"
ov_c=$(sed -n 's/^Version: //p' .deps/openvino/openvino-*.dist-info/METADATA 2>/dev/null | head -n1)
ov_py=$("$PY" -c 'import openvino; print(openvino.get_version())' 2>/dev/null || echo "?")
result machine.openvino "${ov_c:-?} (C API, .deps/openvino, linked by streamlens); $ov_py (Python, $VENV: benchmark_app and the Python peers)"
result machine.swift "$(swift --version 2>/dev/null | head -n1)"
result binary "$BIN (built $(date -r "$BIN" -Iseconds))"
# Read-only git queries (--no-optional-locks: no index refresh, no lock): the commit, and the
# tracked files that differ from it, since the measured binary may include them.
result git.commit "$(git --no-optional-locks rev-parse HEAD 2>/dev/null || echo unknown)"
result git.subject "$(git --no-optional-locks log -1 --format=%s 2>/dev/null || true)"
result git.changed "$(git --no-optional-locks status --porcelain --untracked-files=no 2>/dev/null | awk '{print $NF}' | tr '\n' ' ')"

STATUS=0
t0=$(date +%s)
for b in $BENCHES; do
  echo "== bench: $b (bench/$b.sh), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  result "$b.load_start" "$(cut -d' ' -f1-3 /proc/loadavg)"
  s=$(date +%s)
  set +e
  # stdout to the terminal and NAME.out, stderr to the terminal's stderr and NAME.err; with
  # pipefail the group's status is the benchmark's (tee exits 0).
  { "bench/$b.sh" "$BIN" 2>&1 1>&3 3>&- | tee "$BENCH_RESULTS/$b.err" >&2 3>&-; } 3>&1 | tee "$BENCH_RESULTS/$b.out"
  rc=${PIPESTATUS[0]}
  set -e
  result "$b.seconds" "$(($(date +%s) - s))"
  result "$b.exit" "$rc"
  result "$b.load_end" "$(cut -d' ' -f1-3 /proc/loadavg)"
  [ "$rc" -eq 0 ] || { STATUS=1; echo "bench: $b exited $rc" >&2; }
done
result seconds "$(($(date +%s) - t0))"
results_close "$STATUS"

# --- The report ---
REPORT_DIR=${BENCH_REPORT_DIR:-bench}
mkdir -p "$REPORT_DIR"
"$PY" bench/report.py "$BENCH_RESULTS" --markdown "$REPORT_DIR/REPORT.md" --chart "$REPORT_DIR/report.png"
echo "bench: $(($(date +%s) - t0)) s; wrote $REPORT_DIR/REPORT.md and $REPORT_DIR/report.png (figures in $BENCH_RESULTS)" >&2
exit $STATUS
