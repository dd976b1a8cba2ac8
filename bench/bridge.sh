#!/usr/bin/env bash
# make bench-bridge: what the appsink/appsrc bridge costs. 2000 frames of 1280x720 RGB through
# `lenspass` versus the same pipeline without it in plain gst-launch-1.0, runs interleaved so
# both see the same machine load; medians of RUNS runs. Goals (issue "The host"): <= 1.03x wall
# time on the default pattern, <= 40 us added per frame on pattern=black. Also writes each run's
# seconds to $BENCH_RESULTS/bridge.tsv (bench/lib.sh results_open) for bench/report.py.
set -euo pipefail
BIN=${1:?usage: bench/bridge.sh path/to/streamlens}
RUNS=${RUNS:-7}
FRAMES=${FRAMES:-2000}
secs() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1 || { echo "bench: failed: $*" >&2; exit 1; }; e=$(date +%s.%N); awk -v a="$s" -v b="$e" 'BEGIN{printf "%.4f\n", b-a}'; }
source "$(dirname "$0")/lib.sh"
results_open bridge RUNS="$RUNS" FRAMES="$FRAMES"
result goal.ratio_smpte 1.03
result goal.added_us_black 40

printf '%-10s %12s %12s %8s %14s\n' pattern gst-launch streamlens ratio "added us/frame"
for pattern in smpte black; do
  spec="videotestsrc num-buffers=$FRAMES pattern=$pattern ! video/x-raw,format=RGB,width=1280,height=720"
  g=(); s=()
  for _ in $(seq "$RUNS"); do
    g+=("$(secs gst-launch-1.0 -q $spec ! fakesink)")
    s+=("$(secs "$BIN" run -q "$spec ! lenspass ! fakesink")")
  done
  result "$pattern.gst_launch.secs" "${g[@]}"
  result "$pattern.streamlens.secs" "${s[@]}"
  gm=$(printf '%s\n' "${g[@]}" | median); sm=$(printf '%s\n' "${s[@]}" | median)
  awk -v p="$pattern" -v g="$gm" -v s="$sm" -v n="$FRAMES" \
    'BEGIN{printf "%-10s %11.3fs %11.3fs %7.3fx %14.1f\n", p, g, s, s/g, (s-g)/n*1e6}'
done
echo "(medians of $RUNS interleaved runs, $FRAMES frames each; process start-up included in both)"
results_close 0
