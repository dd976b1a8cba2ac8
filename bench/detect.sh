#!/usr/bin/env bash
# make bench-detect: what the `lensdetect` face-detection stage costs and how it compares.
# A 1280x720 30 fps H.264 clip of a face (bench/make-face-clip.sh, 300 frames, cached in
# out/bench/) is decoded to BGRx, goes through X, and ends either in x264enc ! mp4mux !
# filesink ("encode") or in fakesink ("fakesink": x264enc bounds the first, ~77 fps here).
# X is:
#   floor       lenspass (the bridge alone), in streamlens
#   streamlens  lensdetect with the full-range BlazeFace model, boxes drawn, JSON Lines written
#   centerface  the same with CenterFace (Models/centerface.json: 640x384 input, 5 landmarks), an
#               anchor-free detector ~20x BlazeFace's arithmetic: its fps and ms per frame, no goal
#   landmarks   streamlens plus lensclassify with MediaPipe's face mesh (Models/face-mesh.json) on
#               every face: detect + 468 landmarks; landmarks2 the same on a clip with two faces
#               (FACES=2 bench/make-face-clip.sh): their fps, no goal
#   python      bench/python_peer.py: the same job in Python (PyGObject appsink/appsrc,
#               OpenVINO's Python API, numpy), as a user would write it
#   haar        GStreamer's OpenCV Haar-cascade `facedetect` (gstreamer1.0-opencv), display=true
#   decode      decoding alone (gst-launch-1.0: the same decode, then the ending): one half of the
#               2-core ideal
#   shortrange  lensdetect with MediaPipe's short-range model (Models/face-short-range.json), the
#               model MediaPipe's peer below runs
#   still       inference alone: shortrange on the clip's first frame repeated (imagefreeze, no
#               decoding), the other half of the 2-core ideal
#   together    decode and still at once, as two processes that share nothing (fakesink only):
#               the 2-core ideal as this machine runs it, wall time until both ended
#   mediapipe   bench/mediapipe_peer.py: MediaPipe's own framework (mediapipe==0.10.21 from PyPI, in
#               its own venv), its face detection solution with the short-range model, the clip
#               decoded by OpenCV as its samples do; its graph time (the frame loop, start-up not
#               counted) is recorded beside its whole process
# The 2-core ideal of shortrange: decoding and inference pipelined on the two cores. On paper the
# longer of decode and still (both whole processes, so start-up counts once in each); as measured,
# `together`: decoding alone keeps ~1.3 of 2 cores busy here, so the two compete for the cores
# even with nothing between them.
# Runs are interleaved (each round runs every variant once per ending), RUNS rounds, medians.
# Every run is a whole process: start-up and model loading are included for all of them.
# Goals: streamlens/floor >= 0.85, streamlens/python >= 2, streamlens/haar >= 20; shortrange's whole
# process >= 1.4x faster than MediaPipe's graph time.
# Also writes each run's figures to $BENCH_RESULTS/detect.tsv (bench/lib.sh) for bench/report.py.
# Usage: bench/detect.sh path/to/streamlens   (RUNS=3 HAAR_FRAMES=300 RUN_TIMEOUT=300)
set -euo pipefail
BIN=${1:?usage: bench/detect.sh path/to/streamlens}
RUNS=${RUNS:-3}
FRAMES=300
HAAR_FRAMES=${HAAR_FRAMES:-300}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
cd "$(dirname "$0")/.."
ROOT=$PWD
[ -x "$BIN" ] || { echo "bench-detect: $BIN is not an executable (swift build -c release)" >&2; exit 1; }
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "bench-detect: RUNS must be a positive integer" >&2; exit 1; }
[[ $HAAR_FRAMES =~ ^[1-9][0-9]*$ ]] && [ "$HAAR_FRAMES" -le "$FRAMES" ] \
  || { echo "bench-detect: HAAR_FRAMES must be 1..$FRAMES" >&2; exit 1; }
for f in Models/face-full-range.json "$(python3 tools/models.py path mediapipe-face-detection)/face_detection_full_range_sparse.tflite" \
         Models/centerface.json "$(python3 tools/models.py path centerface)/centerface.onnx" .deps/media/astronaut.png; do
  [ -f "$f" ] || { echo "bench-detect: $f missing (run make setup)" >&2; exit 1; }
done

# --- Debian packages: the Haar element and its cascades, GNU time, PyGObject (idempotent) ---
source "$ROOT/bench/lib.sh"
bench_apt bench-detect gstreamer1.0-opencv opencv-data time python3-gi python3-venv gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0
CASCADE=$(dpkg -L opencv-data | grep '/haarcascade_frontalface_default\.xml$' | head -n1)
[ -f "$CASCADE" ] || { echo "bench-detect: haarcascade_frontalface_default.xml not found in opencv-data" >&2; exit 1; }
gst-inspect-1.0 facedetect >/dev/null 2>&1 || { echo "bench-detect: GStreamer has no facedetect element (gstreamer1.0-opencv)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-detect: /usr/bin/time missing (apt package time)" >&2; exit 1; }

# --- The Python peer's venv: Debian's python3 (for its python3-gi), numpy and the pinned
# openvino wheel from pip. The PATH's python3 may be another interpreter without gi. ---
bench_venv bench-detect
bench_mediapipe_venv bench-detect

# --- The clip (made once) ---
CLIP=out/bench/face-clip.mp4
if [ ! -f "$CLIP" ]; then
  echo "bench-detect: making $CLIP" >&2
  bench/make-face-clip.sh "$CLIP"
fi
n=$(ffprobe -v error -count_packets -select_streams v:0 -show_entries stream=nb_read_packets -of csv=p=0 "$CLIP")
[ "$n" = "$FRAMES" ] || { echo "bench-detect: $CLIP has $n frames, expected $FRAMES (delete it to remake it)" >&2; exit 1; }
CLIP2=out/bench/face-clip-2faces.mp4
if [ ! -f "$CLIP2" ]; then
  echo "bench-detect: making $CLIP2" >&2
  FACES=2 bench/make-face-clip.sh "$CLIP2"
fi

TMP=$(mktemp -d /tmp/bench-detect.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
results_open detect RUNS="$RUNS" FRAMES="$FRAMES" HAAR_FRAMES="$HAAR_FRAMES" RUN_TIMEOUT="$RUN_TIMEOUT"
GOAL_FLOOR=0.85 GOAL_PYTHON=2 GOAL_HAAR=20 GOAL_MEDIAPIPE=1.4
result goal.floor "$GOAL_FLOOR"; result goal.python "$GOAL_PYTHON"; result goal.haar "$GOAL_HAAR"; result goal.mediapipe "$GOAL_MEDIAPIPE"

decode_of() { echo "filesrc location=$ROOT/$1 ! qtdemux ! h264parse ! avdec_h264 ! videoconvert ! video/x-raw,format=BGRx"; }
DECODE=$(decode_of "$CLIP")
# Threshold 0.5 like the Python peer and the demo pipeline (the manifest's min_score is 0.6).
DETECT="lensdetect model=Models/face-full-range.json threshold=0.5 metadata=$TMP/faces.jsonl"
# CenterFace at its manifest's 640x384 and min_score (0.5).
CENTERFACE="lensdetect model=Models/centerface.json metadata=$TMP/centerface.jsonl"
HAAR="videoconvert ! video/x-raw,format=RGB ! facedetect profile=$CASCADE display=true"
# Haar on fewer frames: the clip's first HAAR_FRAMES frames, re-encoded once into their own clip
# (identity eos-after lets a couple of frames more through, so it cannot count them exactly).
HAAR_CLIP=$CLIP
if [ "$HAAR_FRAMES" -lt "$FRAMES" ]; then
  HAAR_CLIP=out/bench/face-clip-$HAAR_FRAMES.mp4
  if [ ! -f "$HAAR_CLIP" ]; then
    ffmpeg -v error -y -i "$CLIP" -frames:v "$HAAR_FRAMES" -c:v libx264 -preset veryfast -pix_fmt yuv420p -an \
      -movflags +faststart "$HAAR_CLIP.tmp.mp4"
    mv "$HAAR_CLIP.tmp.mp4" "$HAAR_CLIP"
  fi
  n=$(ffprobe -v error -count_packets -select_streams v:0 -show_entries stream=nb_read_packets -of csv=p=0 "$HAAR_CLIP")
  [ "$n" = "$HAAR_FRAMES" ] || { echo "bench-detect: $HAAR_CLIP has $n frames, expected $HAAR_FRAMES" >&2; exit 1; }
fi
MESH="lensclassify model=Models/face-mesh.json"
SHORTRANGE="lensdetect model=Models/face-short-range.json"
# The clip's first frame, decoded once, repeated from memory: the input of `still`.
STILL="filesrc location=$ROOT/$CLIP ! qtdemux ! h264parse ! avdec_h264 ! videoconvert ! video/x-raw,format=BGRx ! imagefreeze num-buffers=$FRAMES"
VARIANTS=(floor decode streamlens shortrange still together mediapipe centerface landmarks landmarks2 python haar)
ENDINGS=(encode fakesink)

ending_spec() {  # ending -> the pipeline's tail
  case $1 in
    encode) echo "videoconvert ! video/x-raw,format=I420 ! x264enc ! mp4mux ! filesink location=$TMP/out.mp4" ;;
    fakesink) echo "fakesink" ;;
  esac
}
frames_of() { [ "$1" = haar ] && echo "$HAAR_FRAMES" || echo "$FRAMES"; }
# MediaPipe's peer only detects (its samples draw on a window): not in the encode ending.
# `together` runs two pipelines, which would write the same file in the encode ending.
skipped() { { [ "$1" = mediapipe ] || [ "$1" = together ]; } && [ "$2" = encode ]; }

# The command of one variant and ending, as an array in CMD.
command_for() {
  local variant=$1 ending=$2 tail
  tail=$(ending_spec "$ending")
  case $variant in
    floor) CMD=("$BIN" run -q "$DECODE ! lenspass ! $tail") ;;
    decode) CMD=(gst-launch-1.0 -q $DECODE ! $tail) ;;
    shortrange) CMD=("$BIN" run -q "$DECODE ! $SHORTRANGE ! $tail") ;;
    still) CMD=("$BIN" run -q "$STILL ! $SHORTRANGE ! $tail") ;;
    together) CMD=(bash -c "$(printf '%q ' gst-launch-1.0 -q $DECODE ! $tail) & $(printf '%q ' "$BIN" run -q "$STILL ! $SHORTRANGE ! $tail") & wait -n && wait -n") ;;
    mediapipe) CMD=("$MP_PY" bench/mediapipe_peer.py "$ROOT/$CLIP") ;;
    streamlens) CMD=("$BIN" run -q "$DECODE ! $DETECT ! $tail") ;;
    centerface) CMD=("$BIN" run -q "$DECODE ! $CENTERFACE ! $tail") ;;
    landmarks) CMD=("$BIN" run -q "$DECODE ! $DETECT ! $MESH ! $tail") ;;
    landmarks2) CMD=("$BIN" run -q "$(decode_of "$CLIP2") ! $DETECT ! $MESH ! $tail") ;;
    python) CMD=("$PY" bench/python_peer.py "$ROOT/$CLIP" "$([ "$ending" = encode ] && echo "$TMP/out.mp4" || echo fakesink)") ;;
    haar) CMD=(gst-launch-1.0 -q $(decode_of "$HAAR_CLIP") ! $HAAR ! $tail) ;;
  esac
}

FAILED=0
# run VARIANT ENDING ROUND: one timed run; records seconds, peak RSS and stderr.
run() {
  local variant=$1 ending=$2 round=$3 key="$1.$2.$3" s e rc=0
  command_for "$variant" "$ending"
  rm -f "$TMP/out.mp4"
  s=$(date +%s.%N)
  timeout -k 10 "$RUN_TIMEOUT" /usr/bin/time -f %M -o "$TMP/$key.rss" "${CMD[@]}" >"$TMP/$key.out" 2>"$TMP/$key.err" || rc=$?
  e=$(date +%s.%N)
  if [ $rc -ne 0 ]; then
    FAILED=1
    [ $rc -eq 124 ] && echo "bench-detect: $variant/$ending run $round timed out after ${RUN_TIMEOUT}s" >&2 \
                    || echo "bench-detect: $variant/$ending run $round failed (exit $rc): ${CMD[*]}" >&2
    tail -n 15 "$TMP/$key.err" | sed 's/^/    /' >&2
    return 0
  fi
  if [ "$ending" = encode ]; then
    local got
    got=$(ffprobe -v error -count_packets -select_streams v:0 -show_entries stream=nb_read_packets -of csv=p=0 "$TMP/out.mp4" 2>/dev/null || echo 0)
    if [ "$got" != "$(frames_of "$variant")" ]; then
      FAILED=1
      echo "bench-detect: $variant/$ending run $round wrote $got frames, expected $(frames_of "$variant")" >&2
      tail -n 15 "$TMP/$key.err" | sed 's/^/    /' >&2
      return 0
    fi
  fi
  awk -v a="$s" -v b="$e" 'BEGIN{printf "%.4f\n", b-a}' >>"$TMP/$variant.$ending.secs"
  tail -n 1 "$TMP/$key.rss" >>"$TMP/$variant.$ending.rss"
  if [ "$variant" = python ]; then  # "python_peer: 300 frames, inference 9.9 ms median (300 runs), ..."
    sed -n 's/^python_peer: .*inference \([0-9.]*\) ms median.*/\1/p' "$TMP/$key.err" >>"$TMP/$variant.$ending.ms"
  fi
  if [ "$variant" = mediapipe ]; then  # "mediapipe_peer: 300 frames, 300 faces, graph 1.234 s, start-up 0.567 s"
    sed -n 's/^mediapipe_peer: .* graph \([0-9.]*\) s.*/\1/p' "$TMP/$key.err" >>"$TMP/mediapipe.$ending.graph"
    sed -n 's/^mediapipe_peer: [0-9]* frames, \([0-9]*\) faces.*/\1/p' "$TMP/$key.err" >>"$TMP/mediapipe.$ending.faces"
  fi
}

echo "bench-detect: $FRAMES frames of 1280x720 ($CLIP), $RUNS interleaved rounds; haar on $HAAR_FRAMES frames" >&2
for round in $(seq "$RUNS"); do
  for ending in "${ENDINGS[@]}"; do
    for variant in "${VARIANTS[@]}"; do
      skipped "$variant" "$ending" || run "$variant" "$ending" "$round"
    done
  done
  echo "bench-detect: round $round of $RUNS done" >&2
done

# StreamLens's inference time: its end-of-stream summary, printed without -q, one more run per ending:
# "lensdetect0: 300 frames in, 300 out, 0 dropped, inference 15.4 ms median (300 runs), ..."
# The same for CenterFace (files centerface.summary.* and centerface.*.ms).
for ending in "${ENDINGS[@]}"; do
  for variant in streamlens centerface; do
    stage=$DETECT; sum=summary
    [ "$variant" = centerface ] && { stage=$CENTERFACE; sum=centerface.summary; }
    if "$BIN" run "$DECODE ! $stage ! $(ending_spec "$ending")" >/dev/null 2>"$TMP/$sum.$ending.err"; then
      grep '^lensdetect0:' "$TMP/$sum.$ending.err" >"$TMP/$sum.$ending.line" || true
      sed -n 's/^lensdetect0: .*inference \([0-9.]*\) ms median.*/\1/p' "$TMP/$sum.$ending.err" >"$TMP/$variant.$ending.ms"
    else
      FAILED=1
      echo "bench-detect: $variant/$ending summary run failed:" >&2
      tail -n 15 "$TMP/$sum.$ending.err" | sed 's/^/    /' >&2
    fi
  done
done

HEADLINES=()
for ending in "${ENDINGS[@]}"; do
  echo
  echo "== $ending: decode -> X -> $(ending_spec "$ending" | sed "s|$TMP/|/tmp/…/|")"
  printf '%-11s %6s %10s %8s %12s %16s  %s\n' variant frames "median s" fps "peak RSS MB" "detect ms/frame" "each run (s)"
  declare -A FPS=()
  for variant in "${VARIANTS[@]}"; do
    skipped "$variant" "$ending" && continue
    secs=$(med "$variant.$ending.secs"); rss=$(med "$variant.$ending.rss"); ms=$(med "$variant.$ending.ms")
    frames=$(frames_of "$variant")
    if [ -z "$secs" ]; then
      printf '%-11s %6s %10s %8s %12s %16s  %s\n' "$variant" "$frames" failed - - - -
      FPS[$variant]=""
      continue
    fi
    FPS[$variant]=$(awk -v n="$frames" -v s="$secs" 'BEGIN{printf "%.1f", n/s}')
    each=$(awk '{printf "%s%.2f", (NR > 1) ? " " : "", $1}' "$TMP/$variant.$ending.secs")
    awk -v v="$variant" -v n="$frames" -v s="$secs" -v f="${FPS[$variant]}" -v r="$rss" -v m="${ms:--}" -v e="$each" \
      'BEGIN{printf "%-11s %6d %9.3fs %8.1f %12.0f %16s  %s\n", v, n, s, f, r/1024, m, e}'
  done
  ratio() { [ -n "${FPS[streamlens]}" ] && [ -n "${FPS[$1]}" ] && awk -v a="${FPS[streamlens]}" -v b="${FPS[$1]}" 'BEGIN{printf "%.2f", a/b}' || echo "n/a"; }
  verdict() { [ "$1" = n/a ] && echo "n/a" || awk -v r="$1" -v g="$2" 'BEGIN{print (r >= g) ? "met" : "NOT met"}'; }
  rf=$(ratio floor); rp=$(ratio python); rh=$(ratio haar)
  echo "ratios: streamlens/floor ${rf}x (goal >= $GOAL_FLOOR: $(verdict "$rf" $GOAL_FLOOR)), streamlens/python ${rp}x (goal >= $GOAL_PYTHON: $(verdict "$rp" $GOAL_PYTHON)), streamlens/haar ${rh}x (goal >= $GOAL_HAAR: $(verdict "$rh" $GOAL_HAAR))"
  # Short range against MediaPipe's graph time, and against the 2-core ideal (decoding and
  # inference pipelined: the longer of the two alone).
  sr=$(med "shortrange.$ending.secs"); dec=$(med "decode.$ending.secs"); still=$(med "still.$ending.secs")
  if [ -n "$sr" ] && [ -n "$dec" ] && [ -n "$still" ]; then
    ideal=$(awk -v a="$dec" -v b="$still" 'BEGIN{printf "%.4f", (a > b) ? a : b}')
    ri=$(awk -v a="$ideal" -v b="$sr" 'BEGIN{printf "%.2f", a/b}')
    echo "short range: ${sr}s; 2-core ideal on paper ${ideal}s (decode ${dec}s, inference alone ${still}s): shortrange/ideal ${ri}x"
    HEADLINES+=("$ending: short range ${sr}s against the 2-core ideal on paper ${ideal}s (${ri}x)")
  fi
  together=$(med "together.$ending.secs" || true)
  if [ -n "$together" ] && [ -n "$sr" ] && [ -n "$dec" ]; then
    rt=$(awk -v a="$together" -v b="$sr" 'BEGIN{printf "%.2f", a/b}')
    echo "short range: decode and inference alone at once (two processes) ${together}s = $(awk -v a="$dec" -v b="$together" 'BEGIN{printf "%.2f", a/b}')x of decoding alone; shortrange ${rt}x of that"
    HEADLINES+=("$ending: decode and inference alone at once ${together}s ($(awk -v a="$dec" -v b="$together" 'BEGIN{printf "%.2f", a/b}')x of decoding alone); short range ${rt}x of it")
  fi
  graph=$(med "mediapipe.$ending.graph" || true)
  if [ -n "$graph" ] && [ -n "$sr" ]; then
    mp=$(med "mediapipe.$ending.secs"); faces=$(med "mediapipe.$ending.faces" || true)
    rm_=$(awk -v g="$graph" -v s="$sr" 'BEGIN{printf "%.2f", g/s}')
    echo "mediapipe: graph ${graph}s, whole process ${mp}s, ${faces:-?} faces; shortrange whole process is ${rm_}x faster than MediaPipe's graph time (goal >= $GOAL_MEDIAPIPE: $(verdict "$rm_" $GOAL_MEDIAPIPE))"
    HEADLINES+=("$ending: short range ${sr}s whole process vs MediaPipe graph ${graph}s (${rm_}x), MediaPipe whole process ${mp}s")
  fi
  [ -f "$TMP/summary.$ending.line" ] && echo "summary (extra run without -q): $(cat "$TMP/summary.$ending.line")"
  [ -f "$TMP/centerface.summary.$ending.line" ] && echo "centerface summary (extra run without -q): $(cat "$TMP/centerface.summary.$ending.line")"
  HEADLINES+=("$ending: streamlens ${FPS[streamlens]:-failed} fps, floor ${FPS[floor]:-failed} fps (${rf}x), python ${FPS[python]:-failed} fps (${rp}x), haar ${FPS[haar]:-failed} fps (${rh}x)")
  HEADLINES+=("$ending: centerface 640x384 ${FPS[centerface]:-failed} fps, $(med "centerface.$ending.ms" || true) ms per frame (inference median)")
  HEADLINES+=("$ending: detect + face mesh (468 landmarks) ${FPS[landmarks]:-failed} fps with 1 face, ${FPS[landmarks2]:-failed} fps with 2 faces (detection alone ${FPS[streamlens]:-failed} fps)")
  unset FPS
done

echo
echo "fps = frames / median wall seconds of $RUNS interleaved runs per variant, each a whole process (start-up and"
echo "model loading included). floor and streamlens run in $BIN run -q; python is bench/python_peer.py;"
echo "haar is gst-launch-1.0 -q with videoconvert to RGB ! facedetect profile=$(basename "$CASCADE") display=true$([ "$HAAR_FRAMES" -lt "$FRAMES" ] && echo ", on the clip's first $HAAR_FRAMES frames only ($HAAR_CLIP), its fps from those frames")."
echo "In the fakesink ending the floor is decoding alone, so streamlens/floor there is detection's whole cost against it."
echo "detect ms/frame: streamlens and centerface from lensdetect's summary (model + decoding, one extra run without -q); python its own"
echo "median from letterbox to decoded boxes; haar has no such figure. Peak RSS: /usr/bin/time %M, median."
echo
printf '%s\n' "${HEADLINES[@]}"

# The figures of every run, for bench/report.py (it takes the medians and ratios itself).
for ending in "${ENDINGS[@]}"; do
  for variant in "${VARIANTS[@]}"; do
    result "$ending.$variant.frames" "$(frames_of "$variant")"
    result_list "$ending.$variant.secs" "$TMP/$variant.$ending.secs"
    result_list "$ending.$variant.rss_kb" "$TMP/$variant.$ending.rss"
    result_list "$ending.$variant.ms" "$TMP/$variant.$ending.ms"
  done
  result_list "$ending.mediapipe.graph" "$TMP/mediapipe.$ending.graph"
  if [ -f "$TMP/summary.$ending.line" ]; then result "$ending.streamlens.summary" "$(cat "$TMP/summary.$ending.line")"; fi
  if [ -f "$TMP/centerface.summary.$ending.line" ]; then result "$ending.centerface.summary" "$(cat "$TMP/centerface.summary.$ending.line")"; fi
done
results_close $FAILED
exit $FAILED
