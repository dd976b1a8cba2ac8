#!/usr/bin/env bash
# make bench-bridge: what the stage bridge costs. FRAMES (2000) frames of 1280x720 RGB through
# `lenspass` versus the same pipeline without it in plain gst-launch-1.0, runs interleaved so
# both see the same machine load; medians of RUNS runs. Start-up is taken out of the per-frame
# figure: a 1-frame run of each is subtracted from its FRAMES-frame run. With BASELINE=path to
# another streamlens (an earlier commit built in a worktree), it runs in the same rounds too.
# Goals (issue "No frame copied"): <= 15 us added per frame on pattern=black (start-up taken
# out), <= 1.02x gst-launch-1.0's wall time on the default pattern. Also writes each run's seconds
# to $BENCH_RESULTS/bridge.tsv (bench/lib.sh results_open) for bench/report.py.
# Usage: bench/bridge.sh path/to/streamlens   (RUNS=7 FRAMES=2000 BASELINE=)
set -euo pipefail
BIN=${1:?usage: bench/bridge.sh path/to/streamlens}
RUNS=${RUNS:-7}
FRAMES=${FRAMES:-2000}
BASELINE=${BASELINE:-}
[ -z "$BASELINE" ] || [ -x "$BASELINE" ] || { echo "bench-bridge: BASELINE=$BASELINE is not an executable" >&2; exit 1; }
secs() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1 || { echo "bench: failed: $*" >&2; exit 1; }; e=$(date +%s.%N); awk -v a="$s" -v b="$e" 'BEGIN{printf "%.4f\n", b-a}'; }
source "$(dirname "$0")/lib.sh"
results_open bridge RUNS="$RUNS" FRAMES="$FRAMES" BASELINE="$BASELINE"
result goal.ratio_smpte 1.02
result goal.added_us_black 15

TMP=$(mktemp -d /tmp/bench-bridge.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
RUNNERS=(gst streamlens)
[ -n "$BASELINE" ] && RUNNERS+=(baseline)
# run RUNNER SPEC: one timed run of the pipeline SPEC (through lenspass unless gst-launch).
run() {
  case $1 in
    gst) secs gst-launch-1.0 -q $2 ! fakesink ;;
    streamlens) secs "$BIN" run -q "$2 ! lenspass ! fakesink" ;;
    baseline) secs "$BASELINE" run -q "$2 ! lenspass ! fakesink" ;;
  esac
}

printf '%-10s %-10s %11s %11s %8s %16s\n' pattern runner "${FRAMES} frames" "1 frame" ratio "added us/frame"
for pattern in smpte black; do
  spec="videotestsrc num-buffers=$FRAMES pattern=$pattern ! video/x-raw,format=RGB,width=1280,height=720"
  one="videotestsrc num-buffers=1 pattern=$pattern ! video/x-raw,format=RGB,width=1280,height=720"
  for _ in $(seq "$RUNS"); do
    for r in "${RUNNERS[@]}"; do
      run "$r" "$spec" >>"$TMP/$pattern.$r"
      run "$r" "$one" >>"$TMP/$pattern.$r.one"
    done
  done
  gm=$(median <"$TMP/$pattern.gst"); g1=$(median <"$TMP/$pattern.gst.one")
  for r in "${RUNNERS[@]}"; do
    key=$([ "$r" = gst ] && echo gst_launch || echo "$r")
    result_list "$pattern.$key.secs" "$TMP/$pattern.$r"
    result_list "$pattern.$key.one_frame_secs" "$TMP/$pattern.$r.one"
    m=$(median <"$TMP/$pattern.$r"); m1=$(median <"$TMP/$pattern.$r.one")
    awk -v p="$pattern" -v r="$r" -v g="$gm" -v g1="$g1" -v s="$m" -v s1="$m1" -v n="$FRAMES" \
      'BEGIN{printf "%-10s %-10s %10.3fs %10.3fs %7.3fx %16s\n", p, r, s, s1, s/g, (r == "gst") ? "-" : sprintf("%.1f", ((s-s1)-(g-g1))/(n-1)*1e6)}'
  done
done
echo "(medians of $RUNS interleaved rounds; ratio: wall time against gst-launch-1.0's, start-up included;"
echo " added us/frame: (N-frame run - 1-frame run) against gst-launch-1.0's the same way, over N-1 frames)"
results_close 0
