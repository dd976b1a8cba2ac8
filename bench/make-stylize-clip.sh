#!/usr/bin/env bash
# Makes the clip for `make bench-stylize`: the four public-domain / CC0 photos set-up took from
# scikit-image (.deps/media: astronaut, coffee, chelsea, rocket), each filling the frame (scaled
# to cover WIDTHxHEIGHT plus a margin, centre-cropped) and panning slowly left to right for 2.5 s,
# 30 fps, 300 frames (10 s), H.264 (libx264 veryfast, yuv420p) in MP4, no audio.
# Usage: make-stylize-clip.sh OUT.mp4 [WIDTH HEIGHT]   (default 1280 720)
set -euo pipefail
out=${1:?usage: make-stylize-clip.sh OUT.mp4 [WIDTH HEIGHT]}
w=${2:-1280} h=${3:-720}
media="$(cd "$(dirname "$0")/.." && pwd)/.deps/media"
command -v ffmpeg >/dev/null || { echo "make-stylize-clip: ffmpeg missing (run make setup)" >&2; exit 1; }
photos=(astronaut.png coffee.png chelsea.png rocket.jpg)
# Cover a frame 1/8 wider than the output, so the crop window has room to pan.
cw=$(( (w * 9 / 8 + 1) / 2 * 2 )) ch=$(( (h * 9 / 8 + 1) / 2 * 2 ))
inputs=() filters="" labels=""
for i in "${!photos[@]}"; do
  [ -f "$media/${photos[$i]}" ] || { echo "make-stylize-clip: $media/${photos[$i]} missing (run make setup)" >&2; exit 1; }
  inputs+=(-loop 1 -framerate 30 -t 2.5 -i "$media/${photos[$i]}")
  filters+="[$i:v]scale=$cw:$ch:force_original_aspect_ratio=increase,crop=$cw:$ch,"
  filters+="crop=$w:$h:x='(in_w-out_w)*t/2.5':y='(in_h-out_h)/2',setsar=1,format=yuv420p[v$i];"
  labels+="[v$i]"
done
mkdir -p "$(dirname "$out")"
ffmpeg -v error -y "${inputs[@]}" -filter_complex "${filters}${labels}concat=n=${#photos[@]}:v=1:a=0[v]" \
  -map '[v]' -frames:v 300 -r 30 -c:v libx264 -preset veryfast -pix_fmt yuv420p -an -movflags +faststart "$out.tmp.mp4"
mv "$out.tmp.mp4" "$out"
