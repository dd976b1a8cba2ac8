#!/usr/bin/env bash
# Batching across streams (lensdetect batch-size=): SOURCES sources (4) of one `streamlens serve`
# on the same 640x360 clip, decoded as fast as they go, for SECONDS (15) then Ctrl-C; once with
# batch-size=1 and once with batch-size=B (4), MODEL (Models/centerface.json, which batches).
# Prints each run's frames per source (from the summaries), total fps and CPU seconds (GNU time).
# A quick comparison, not a timed test. Usage: bench/batch.sh path/to/streamlens
set -euo pipefail
BIN=${1:?usage: bench/batch.sh path/to/streamlens}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
cd "$(dirname "$0")/.."
SOURCES=${SOURCES:-4} SECONDS_=${SECONDS:-15} B=${B:-4}
CLIP=out/bench/batch-input.mp4
mkdir -p out/bench
[ -f "$CLIP" ] || ffmpeg -v error -y -loop 1 -framerate 30 -t 60 -i .deps/media/astronaut.png \
  -vf "scale=640:360:force_original_aspect_ratio=decrease,pad=640:360:(ow-iw)/2:0,format=yuv420p" -c:v libx264 -preset veryfast "$CLIP"
sources=()
for i in $(seq 1 "$SOURCES"); do sources+=("s$i=file://$PWD/$CLIP"); done
for batch in 1 "$B"; do
  log=out/bench/batch-b$batch.log
  STREAMLENS_VAR_B=$batch STREAMLENS_VAR_MODEL=${MODEL:-Models/centerface.json} \
    /usr/bin/time -f "cpu %U user %S sys %e wall" -o out/bench/batch-b$batch.time \
    "$BIN" serve bench/batch-serve.pipeline "${sources[@]}" > "$log" 2>&1 &
  pid=$!
  sleep "$SECONDS_"
  kill -INT "$(pgrep -P $pid)" 2>/dev/null || kill -INT $pid
  wait $pid || true
  echo "== batch-size=$batch: $(cat out/bench/batch-b$batch.time)"
  grep -E "lensdetect" "$log" | grep -E "frames|fps|batch" || tail -20 "$log"
done
