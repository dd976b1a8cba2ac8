#!/usr/bin/env bash
# make bench-track: what tracking and hiding cost.
# 1. The tracker alone (tracker-bench, a build target: bench/TrackerBench): microseconds a frame
#    with 1, 10 and 100 synthetic moving objects, noisy, 5 % missed a frame.
# 2. The whole job on the 1280x720 30 fps face clip (bench/make-face-clip.sh, 300 frames, shared
#    with bench-detect), decoded to BGRx and ending in fakesink (x264enc would bound every
#    variant at ~60-77 fps here and hide the differences):
#      detect        lensdetect (full range, threshold 0.5, draw=false)
#      private       lensdetect ! lenstrack ! lensblur
#      private-i3    the same with lensdetect interval=3 (the tracker moves the boxes between runs)
#    Runs interleaved, RUNS rounds, medians; each run a whole process (start-up included).
#    Reported: fps of each, private/detect (what tracking + blurring cost on top of detection;
#    no goal set) and private-i3/private.
# Also writes its figures to $BENCH_RESULTS/track.tsv (bench/lib.sh).
# Usage: bench/track.sh path/to/streamlens path/to/tracker-bench   (RUNS=3 RUN_TIMEOUT=300)
set -euo pipefail
BIN=${1:?usage: bench/track.sh path/to/streamlens path/to/tracker-bench}
TRACKER_BENCH=${2:?usage: bench/track.sh path/to/streamlens path/to/tracker-bench}
RUNS=${RUNS:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
FRAMES=300
cd "$(dirname "$0")/.."
ROOT=$PWD
for b in "$BIN" "$TRACKER_BENCH"; do [ -x "$b" ] || { echo "bench-track: $b is not an executable (swift build -c release)" >&2; exit 1; }; done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "bench-track: RUNS must be a positive integer" >&2; exit 1; }
source "$ROOT/bench/lib.sh"
CLIP=out/bench/face-clip.mp4
[ -f "$CLIP" ] || { echo "bench-track: making $CLIP" >&2; bench/make-face-clip.sh "$CLIP"; }
TMP=$(mktemp -d /tmp/bench-track.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
results_open track RUNS="$RUNS" FRAMES="$FRAMES"

echo "== tracker alone (MultiObjectTracker.update, 570 frames after 30 of warm-up)"
"$TRACKER_BENCH" 1 10 100 | tee "$TMP/tracker.txt"
while read -r _ n median _ _ p95 _; do
  n=${n%:}; result "tracker.$n.median_us" "${median}"; result "tracker.$n.p95_us" "${p95}"
done < <(sed 's/ µs,\{0,1\}//g' "$TMP/tracker.txt" | awk '{print $1, $2, $4, $5, $6, $7}')

DECODE="filesrc location=$ROOT/$CLIP ! qtdemux ! h264parse ! avdec_h264 ! videoconvert ! video/x-raw,format=BGRx"
DETECT="lensdetect model=Models/face-full-range.json threshold=0.5 draw=false"
VARIANTS=(detect private private-i3)
spec_of() {
  case $1 in
    detect) echo "$DECODE ! $DETECT ! fakesink" ;;
    private) echo "$DECODE ! $DETECT ! lenstrack ! lensblur ! fakesink" ;;
    private-i3) echo "$DECODE ! $DETECT interval=3 ! lenstrack ! lensblur ! fakesink" ;;
  esac
}
FAILED=0
for round in $(seq 1 "$RUNS"); do
  for v in "${VARIANTS[@]}"; do
    s=$(date +%s.%N); rc=0
    timeout -k 10 "$RUN_TIMEOUT" "$BIN" run "$(spec_of "$v")" >"$TMP/$v.$round.out" 2>"$TMP/$v.$round.err" || rc=$?
    e=$(date +%s.%N)
    if [ $rc -ne 0 ]; then FAILED=1; echo "bench-track: $v run $round failed (exit $rc): $(tail -2 "$TMP/$v.$round.err")" >&2; continue; fi
    awk -v a="$s" -v b="$e" -v n=$FRAMES 'BEGIN{printf "%.2f\n", n/(b-a)}' >>"$TMP/$v.fps"
  done
done
echo "== 1280x720, $FRAMES frames into fakesink, $RUNS rounds (medians; whole processes)"
for v in "${VARIANTS[@]}"; do
  printf '%-11s %6s fps   (runs: %s)\n' "$v" "$(med "$v.fps")" "$(tr '\n' ' ' <"$TMP/$v.fps" 2>/dev/null)"
  result_list "fps.$v" "$TMP/$v.fps"
done
d=$(med detect.fps) p=$(med private.fps) p3=$(med private-i3.fps)
[ -n "$d" ] && [ -n "$p" ] && [ -n "$p3" ] && awk -v d="$d" -v p="$p" -v p3="$p3" 'BEGIN{
  printf "private/detect %.2f (tracking + hiding on top of detection)\nprivate-i3/private %.2f (the detector every 3rd frame)\n", p/d, p3/p}'
grep -h "lenstrack0:\|lensblur0:" "$TMP/private.1.err" 2>/dev/null | sed 's/^/  /' || true
results_close "$FAILED"
exit "$FAILED"
