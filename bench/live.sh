#!/usr/bin/env bash
# make bench-live: glass-to-client latency of a live 30 fps 1280x720 source through a StreamLens
# stage, served over RTSP and watched by a player on loopback; a benchmark, not a test.
#
# Wiring, three processes (the same for every variant, one variant at a time):
#   source   bench/live_peer.py source: a camera stand-in (PyGObject) pushing 1280x720 BGRx at a
#            steady 30 fps into `appsrc is-live=true do-timestamp=true ! shmsink`. A photo (the
#            astronaut, so the detector has a face) pans across a gradient; the top-right corner
#            carries a time code (sequence number, CLOCK_MONOTONIC microseconds, CRC-16) as
#            Manchester pairs of 32-px black/white squares, stamped just before the push.
#            Shared memory rather than UDP/TCP: a raw 720p frame (3.7 MB) crosses without being
#            serialized or fragmented, so the transport adds next to nothing to what is measured.
#   server   streamlens run -v 'shmsrc is-live=true do-timestamp=true ! video/x-raw,…30/1
#            ! X mode=live ! lensrtsp port=P mount=/bench' (lensrtsp: appsrc ! videoconvert
#            ! x264enc tune=zerolatency speed-preset=ultrafast, 2000 kbit/s ! rtph264pay), with X:
#              pass     lenspass: the baseline, "bridge + encoder + RTSP + decoder" latency
#              detect   lensdetect model=Models/face-full-range.json (boxes drawn)
#              stylize  lensstylize inference-size=320x180 (Magenta, its default style picture);
#                       skipped when Magenta's networks are not installed (streamlens models fetch magenta)
#              segment  lensdetect model=Models/person-segmentation.json draw=false ! lensblur shape=mask
#                       regions=outside method=gaussian block=SEGMENT_BLOCK (a background blur; not in the
#                       default VARIANTS: make bench-segmentation runs it). The time code sits in the
#                       background: the default radius (a sixth of the frame's height, 120 px) wipes it and
#                       16 px garbles most codes, 12 px leaves them readable; a wide blur works on the frame
#                       averaged down by radius/3, so 12 px costs about what the default does
#   client   bench/live_peer.py client: rtspsrc latency=0 (RTP over UDP on loopback)
#            ! rtph264depay ! avdec_h264 max-threads=1 ! appsink sync=false, I420. One decoder
#            thread: libav's frame threading would hold frames back. For every decoded frame,
#            CLOCK_MONOTONIC now minus its stamp, read from the luma plane (the pairs' means are
#            compared, so style transfer and compression do not flip bits; the CRC rejects a
#            damaged code, counted as unreadable). It measures DURATION s after WARMUP s from its
#            first frame, and samples the server's VmRSS and CPU time once a second.
# Figures: glass-to-client p50/p95/p99/max; fps delivered (distinct frames read / window);
# missing (frames the source sent between the first and last one seen that never arrived); the
# stage's own drops, inference median and frame age (its end-of-stream summary, whole run);
# server RSS at 10 s and at the end of the window, growth %, CPU %.
# Goals (the issue's): p95 <= 1.5 x (stage's inference median + 33.3 ms) + encoder latency, the
# encoder latency being the lenspass run's p50 measured in the same run; RSS growth <= 5 %.
# Exits 0 when goals are missed (it says so); 1 when a run fails. Also writes the figures to
# $BENCH_RESULTS/live.tsv (bench/lib.sh) for bench/report.py.
# Usage: bench/live.sh path/to/streamlens   (DURATION=60 WARMUP=3 PORT=18640 VARIANTS="pass detect stylize";
# also segment, with SEGMENT_BLOCK=12)
# DURATION may be cut to 6 s for a quick look; under 15 s the RSS growth is taken from DURATION/3
# (whole seconds) to the end instead of from 10 s, which says little about the 5 % goal.
set -euo pipefail
BIN=${1:?usage: bench/live.sh path/to/streamlens}
DURATION=${DURATION:-60}
WARMUP=${WARMUP:-3}
PORT=${PORT:-18640}
VARIANTS=${VARIANTS:-pass detect stylize}
SEGMENT_BLOCK=${SEGMENT_BLOCK:-12}
cd "$(dirname "$0")/.."
ROOT=$PWD
[ -x "$BIN" ] || { echo "bench-live: $BIN is not an executable (swift build -c release)" >&2; exit 1; }
[[ $DURATION =~ ^[0-9]+$ ]] && [ "$DURATION" -ge 6 ] || { echo "bench-live: DURATION must be a whole number of seconds >= 6" >&2; exit 1; }
RSS_AT=$((DURATION >= 15 ? 10 : DURATION / 3))  # RSS is compared at RSS_AT s and at the end of the window
[[ $WARMUP =~ ^[0-9]+$ ]] || { echo "bench-live: WARMUP must be a whole number of seconds" >&2; exit 1; }
[[ $PORT =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1024 ] && [ "$PORT" -le 65000 ] || { echo "bench-live: PORT must be 1024..65000" >&2; exit 1; }
for v in $VARIANTS; do
  case $v in pass|detect|stylize|segment) ;; *) echo "bench-live: unknown variant $v (pass, detect, stylize, segment)" >&2; exit 1 ;; esac
done
[[ $SEGMENT_BLOCK =~ ^[0-9]+$ ]] || { echo "bench-live: SEGMENT_BLOCK must be a whole number of pixels" >&2; exit 1; }
if [[ " $VARIANTS " == *" segment "* ]]; then
  for f in Models/person-segmentation.json "$(python3 tools/models.py path mediapipe-selfie-segmentation)/selfie_segmentation.tflite"; do
    [ -f "$f" ] || { echo "bench-live: $f missing (run make setup)" >&2; exit 1; }
  done
fi
for f in Models/face-full-range.json "$(python3 tools/models.py path mediapipe-face-detection)/face_detection_full_range_sparse.tflite" Models/magenta-style.json .deps/media/astronaut.png; do
  [ -f "$f" ] || { echo "bench-live: $f missing (run make setup)" >&2; exit 1; }
done
"$BIN" stages lensrtsp >/dev/null 2>&1 || { echo "bench-live: $BIN has no lensrtsp stage" >&2; exit 1; }
MAGENTA=$(python3 tools/models.py path magenta)
SKIPPED=()
if [[ " $VARIANTS " == *" stylize "* ]]; then
  for f in style_transfer_f16_384.tflite style_predict_quantized_256.tflite; do
    if [ ! -f "$MAGENTA/$f" ]; then
      SKIPPED+=("stylize skipped: $MAGENTA/$f is absent (Magenta's networks are not installed: streamlens models fetch magenta)")
      VARIANTS=$(echo " $VARIANTS " | sed 's/ stylize / /')
      break
    fi
  done
fi

# --- Debian packages: PyGObject and its typelibs (idempotent) ---
source "$ROOT/bench/lib.sh"
bench_apt bench-live python3-gi python3-venv gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0
for e in shmsink shmsrc rtspsrc rtph264depay avdec_h264 x264enc pngdec; do
  gst-inspect-1.0 "$e" >/dev/null 2>&1 || { echo "bench-live: GStreamer has no $e element (run make setup)" >&2; exit 1; }
done

# --- The Python venv (the one bench/detect.sh and bench/stylize.sh make): Debian's python3 (for
# its python3-gi), numpy and the pinned openvino wheel (not used here; one venv for all benches) ---
bench_venv bench-live

TMP=$(mktemp -d /tmp/bench-live.XXXXXX)
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

stage_of() {
  case $1 in
    pass) echo "lenspass mode=live" ;;
    detect) echo "lensdetect model=Models/face-full-range.json mode=live" ;;
    stylize) echo "lensstylize model=Models/magenta-style.json inference-size=320x180 mode=live" ;;
    segment) echo "lensdetect model=Models/person-segmentation.json draw=false mode=live ! lensblur shape=mask regions=outside method=gaussian block=$SEGMENT_BLOCK mode=live" ;;
  esac
}
spec_of() {  # variant socket port
  echo "shmsrc socket-path=$2 is-live=true do-timestamp=true ! video/x-raw,format=BGRx,width=1280,height=720,framerate=30/1 ! $(stage_of "$1") ! lensrtsp port=$3 mount=/bench"
}

# stop PID SECONDS: SIGINT, then SIGTERM and SIGKILL if it does not end in time. Returns its exit code.
stop() {
  local pid=$1 secs=$2 i rc=0
  kill -INT "$pid" 2>/dev/null || true
  for ((i = 0; i < secs * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "bench-live: process $pid did not end ${secs} s after SIGINT; SIGTERM" >&2
    kill -TERM "$pid" 2>/dev/null || true; sleep 3; kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || rc=$?
  forget "$pid"
  return $rc
}
forget() {  # drop PID from PIDS (the processes cleanup would end)
  local p kept=()
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || kept+=("$p"); done
  PIDS=("${kept[@]}")
}

FAILED=0
note() {  # a failure of the current run ($v, $d): recorded for the report and on stderr
  echo "$*" >>"$d/note.txt"; FAILED=1; echo "bench-live: $v: $*" >&2
}
# run VARIANT INDEX: one measured run; leaves client.json, source.json, stage.txt, rtsp.txt in $TMP/VARIANT.
run() {
  local v=$1 port=$(($PORT + $2)) d=$TMP/$1 sock=$TMP/$1.sock sp lp cp rc=0 i stage_name
  mkdir -p "$d"
  "$PY" bench/live_peer.py source "$sock" --stats "$d/source.json" 2>"$d/source.err" & sp=$!; PIDS+=("$sp")
  for ((i = 0; i < 100; i++)); do [ -S "$sock" ] && break; kill -0 "$sp" 2>/dev/null || break; sleep 0.1; done
  if [ ! -S "$sock" ]; then
    note "the source did not create $sock: $(tail -n 3 "$d/source.err" | tr '\n' ' ')"; stop "$sp" 5 || true; return 0
  fi
  "$BIN" run -v "$(spec_of "$v" "$sock" "$port")" 2>"$d/server.err" >/dev/null & lp=$!; PIDS+=("$lp")
  for ((i = 0; i < 600; i++)); do
    grep -q 'lensrtsp0: serving rtsp://' "$d/server.err" 2>/dev/null && break
    kill -0 "$lp" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -q 'lensrtsp0: serving rtsp://' "$d/server.err"; then
    note "streamlens did not start serving: $(grep -v ': video/x-raw' "$d/server.err" | tail -n 5 | tr '\n' ' ')"
    stop "$lp" 10 || true; stop "$sp" 5 || true; return 0
  fi
  timeout -k 10 $((DURATION + WARMUP + 90)) "$PY" bench/live_peer.py client "rtsp://127.0.0.1:$port/bench" \
    --duration "$DURATION" --warmup "$WARMUP" --rss-pid "$lp" --source-pid "$sp" --out "$d/client.json" --snapshot "$d/frame.i420" \
    2>"$d/client.err" & cp=$!; PIDS+=("$cp")
  wait "$cp" || rc=$?
  forget "$cp"
  [ $rc -eq 0 ] || note "the client failed (exit $rc): $(tail -n 3 "$d/client.err" | tr '\n' ' ')"
  kill -0 "$lp" 2>/dev/null || note "streamlens ended before the client was done: $(grep -v ': video/x-raw' "$d/server.err" | tail -n 5 | tr '\n' ' ')"
  rc=0; stop "$lp" 30 || rc=$?
  [ $rc -eq 0 ] || note "streamlens exited $rc after SIGINT: $(grep -v ': video/x-raw' "$d/server.err" | tail -n 5 | tr '\n' ' ')"
  stop "$sp" 10 || true
  # The last summary lines (end of stream; -v adds the same every 5 s while it runs).
  case $v in pass) stage_name=lenspass0 ;; detect|segment) stage_name=lensdetect0 ;; stylize) stage_name=lensstylize0 ;; esac
  { grep "^$stage_name: [0-9]* frames in" "$d/server.err" || true; } | tail -n 1 >"$d/stage.txt"
  { grep '^lensrtsp0: [0-9]* frames in' "$d/server.err" || true; } | tail -n 1 >"$d/rtsp.txt"
  mkdir -p out/bench
  for f in source server client; do echo "== $f"; cat "$d/$f.err" 2>/dev/null; done >"out/bench/live-$v.log"
  [ -f "$d/client.json" ] && cp "$d/client.json" "out/bench/live-$v.json"
  if [ -f "$d/frame.i420" ]; then
    ffmpeg -v error -y -f rawvideo -pix_fmt yuv420p -s 1280x720 -i "$d/frame.i420" -frames:v 1 "out/bench/live-$v.png" 2>/dev/null || true
  fi
}

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
results_open live DURATION="$DURATION" WARMUP="$WARMUP" VARIANTS="$VARIANTS" RSS_AT="$RSS_AT"
for s in "${SKIPPED[@]}"; do result skipped "$s"; done
echo "bench-live: 1280x720 at 30 fps, $DURATION s measured after $WARMUP s warm-up, variants: $VARIANTS; load average $LOAD_START" >&2
i=0
for v in $VARIANTS; do
  echo "bench-live: $v ($(stage_of "$v"))…" >&2
  run "$v" "$i"
  i=$((i + 1))
done

echo
echo "== live: source (appsrc ! shmsink, 1280x720 BGRx 30 fps) -> shmsrc ! X mode=live ! lensrtsp (x264enc tune=zerolatency) -> RTSP/RTP-UDP on loopback -> rtspsrc latency=0 ! avdec_h264 ! appsink"
echo "   $DURATION s measured per variant after $WARMUP s warm-up; latencies in ms, glass (stamp at the source) to client (decoded frame)"
"$PY" bench/live_peer.py report "$TMP" --variants "$(echo $VARIANTS | tr ' ' ',')" --rss-at "$RSS_AT" --results "$RESULTS_FILE" || FAILED=1
for s in "${SKIPPED[@]}"; do echo "$s"; done
echo
echo "X: pass = $(stage_of pass); detect = $(stage_of detect); stylize = $(stage_of stylize)$([[ " $VARIANTS " == *" segment "* ]] && echo "; segment = $(stage_of segment)")."
echo "frames/fps: distinct frames whose time code was read in the window; missing: sent by the source between the first and"
echo "last frame seen, never read; st.drop, infer ms, age p95: the stage's end-of-stream summary (whole run, warm-up and"
echo "the time before the client joined included; age = its own part of the latency). RSS: the streamlens process's VmRSS"
echo "at ${RSS_AT} s into the window and at its end; CPU %: its CPU time over the window (200 % = both cores); other %: the"
echo "machine's busy time (steal included) minus streamlens, source and client: other work disturbing the run."
echo "A decoded frame of each variant as the client saw it: out/bench/live-*.png; each run's stderr: live-*.log; the client's"
echo "figures (every latency, RSS and CPU once a second): live-*.json. Load average: $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end."
results_close $FAILED
exit $FAILED
