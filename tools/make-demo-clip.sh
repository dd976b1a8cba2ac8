#!/usr/bin/env bash
# Makes the demo clip: the photos set-up took from scikit-image (public domain / CC0), each held
# for 1.5 s, letterboxed to 1280x720 at 30 fps (180 frames), H.264 in MP4 with a quiet 440 Hz
# AAC track, so the demo shows audio surviving the pipeline. Usage: make-demo-clip.sh OUT.mp4
# (ffmpeg, from Debian, because GStreamer's imagefreeze+concat writes an edit-listed first
# segment that re-encodes without timestamps.)
set -euo pipefail
out=${1:?usage: make-demo-clip.sh OUT.mp4}
media="$(cd "$(dirname "$0")/.." && pwd)/.deps/media"
photos=(astronaut.png coffee.png chelsea.png rocket.jpg)
inputs=() filters="" labels=""
for i in "${!photos[@]}"; do
  [ -f "$media/${photos[$i]}" ] || { echo "make-demo-clip: $media/${photos[$i]} missing (run make setup)" >&2; exit 1; }
  inputs+=(-loop 1 -framerate 30 -t 1.5 -i "$media/${photos[$i]}")
  filters+="[$i:v]scale=1280:720:force_original_aspect_ratio=decrease,pad=1280:720:(ow-iw)/2:(oh-ih)/2,setsar=1,format=yuv420p[v$i];"
  labels+="[v$i]"
done
ffmpeg -v error -y "${inputs[@]}" -f lavfi -t 6 -i "sine=frequency=440:sample_rate=44100" \
  -filter_complex "${filters}${labels}concat=n=${#photos[@]}:v=1:a=0[v]" \
  -map '[v]' -map "${#photos[@]}:a" -c:v libx264 -preset veryfast -c:a aac -b:a 64k -af volume=0.1 \
  -movflags +faststart "$out.tmp.mp4"
mv "$out.tmp.mp4" "$out"
