#!/usr/bin/env bash
# Makes the face clip for `make bench-detect`: the public-domain astronaut photo (scikit-image,
# put in .deps/media by `make setup`) scaled to 720x720 and sliding slowly from the left edge to
# the right edge of a 1280x720 grey background, 30 fps, 300 frames (10 s), H.264 (libx264
# veryfast, yuv420p) in MP4, no audio. FACES=2: two copies of the photo at 600x600 (one mirrored)
# side by side, sliding a little, for the landmark variants of bench-detect. SIZE=640x360 (for
# `make bench-streams`): a 640x360 frame, the photo's upper part (288x288 from x=84: head and
# shoulders) scaled to 360x360 sliding the same way, so that the face is ~150 px wide — large
# enough for the short-range detector (128x128 input), which finds no face in the 720p clip
# merely scaled down.
# Usage: [FACES=2 | SIZE=640x360] make-face-clip.sh OUT.mp4
set -euo pipefail
out=${1:?usage: make-face-clip.sh OUT.mp4}
photo="$(cd "$(dirname "$0")/.." && pwd)/.deps/media/astronaut.png"
[ -f "$photo" ] || { echo "make-face-clip: $photo missing (run make setup)" >&2; exit 1; }
command -v ffmpeg >/dev/null || { echo "make-face-clip: ffmpeg missing (run make setup)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
size=1280x720
if [ "${SIZE:-1280x720}" = 640x360 ]; then
  size=640x360
  filter="[1:v]crop=288:288:84:0,scale=360:360,setsar=1[p];[0:v][p]overlay=x='(W-w)*t/10':y=0:shortest=1,format=yuv420p[v]"
elif [ "${SIZE:-1280x720}" != 1280x720 ]; then
  echo "make-face-clip: SIZE must be 1280x720 or 640x360" >&2; exit 1
elif [ "${FACES:-1}" = 2 ]; then
  filter="[1:v]scale=600:600,setsar=1,split[p][q];[q]hflip[m];[0:v][p]overlay=x='20+4*t':y=60[a];[a][m]overlay=x='640+4*t':y=60:shortest=1,format=yuv420p[v]"
else
  filter="[1:v]scale=720:720,setsar=1[p];[0:v][p]overlay=x='(W-w)*t/10':y=0:shortest=1,format=yuv420p[v]"
fi
ffmpeg -v error -y -f lavfi -i "color=c=0x3a4450:s=$size:r=30:d=10" -loop 1 -framerate 30 -t 10 -i "$photo" \
  -filter_complex "$filter" \
  -map '[v]' -frames:v 300 -r 30 -c:v libx264 -preset veryfast -pix_fmt yuv420p -an -movflags +faststart "$out.tmp.mp4"
mv "$out.tmp.mp4" "$out"
