#!/usr/bin/env bash
# Makes a test clip for the text reader: N licence plates (white, 200x56, black DejaVu Sans Mono
# Bold at 40 px; distinct strings: KX 4729, BM 0318, TR 5501, HZ 8842, in that order) on a plain
# background, 640x360 at 25 fps, H.264 (libx264, yuv420p) in MP4, no audio.
#
#   make-plates-clip.sh OUT.mp4 N [SECONDS]      N: 0 to 4; SECONDS: default 8 (200 frames)
#
# The frame is split into a grid (1: one cell; 2: 2x1; 3 and 4: 2x2), one plate per cell, each
# moving smoothly inside its own cell (a sine on each axis, at most 1.8 px a frame, a different
# phase per plate), so the plates never overlap and stay wholly in view, at least a plate's height
# from the frame's edges (Models/text-recognition.json reads no line nearer: edge_margin 1),
# however long the clip. Prints nothing on success; on bad arguments or a failure, says why and exits non-zero.
set -euo pipefail
usage="usage: make-plates-clip.sh OUT.mp4 N [SECONDS]   (N plates, 0 to 4; SECONDS > 0, default 8)"
die() { printf 'make-plates-clip: %s\n' "$*" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || die "$usage"
out=$1 n=$2 seconds=${3:-8}
[ -n "$out" ] || die "$usage"
[[ $n =~ ^[0-4]$ ]] || die "N must be a whole number from 0 to 4, not '$n'"
[[ $seconds =~ ^([0-9]+([.][0-9]*)?|[.][0-9]+)$ ]] && awk -v s="$seconds" 'BEGIN { exit !(s > 0) }' \
  || die "SECONDS must be a number above 0, not '$seconds'"

plates=("KX 4729" "BM 0318" "TR 5501" "HZ 8842")
W=640 H=360 FPS=25 PW=200 PH=56 MARGIN=4 EDGE=60
font=$(fc-list : file | grep -m1 'DejaVuSansMono-Bold\.ttf' | sed 's/: *$//' || true)
[ -n "$font" ] && [ -f "$font" ] || { echo "make-plates-clip: DejaVu Sans Mono Bold not found (fc-list; Debian's fonts-dejavu-core)" >&2; exit 1; }

case $n in
  0 | 1) cols=1 rows=1 ;;
  2) cols=2 rows=1 ;;
  *) cols=2 rows=2 ;;
esac
graph="color=c=0x5f6b73:s=${W}x${H}:r=$FPS:d=$seconds,format=yuv420p[bg0];"
for ((i = 0; i < n; i++)); do
  # The plate's cell, the room it has there, and its path: centre + A*sin(w*t + phase) per axis,
  # w such that the speed is at most 45 px/s (1.8 px a frame) and a period at least 4 s.
  read -r x y <<<"$(awk -v i=$i -v cols=$cols -v rows=$rows -v W=$W -v H=$H -v pw=$PW -v ph=$PH -v m=$MARGIN -v e=$EDGE 'BEGIN {
    cw = int((W - 2 * e) / cols); ch = int((H - 2 * e) / rows)
    cx = e + (i % cols) * cw; cy = e + int(i / cols) * ch
    ax = int((cw - pw - 2 * m) / 2); ay = int((ch - ph - 2 * m) / 2)
    xc = cx + m + ax; yc = cy + m + ay
    v = 45; wmax = 2 * 3.14159265 / 4
    wx = ax > 0 ? v / ax : 0; if (wx > wmax) wx = wmax
    wy = ay > 0 ? v / ay : 0; if (wy > wmax) wy = wmax
    printf "%d+%d*sin(%.5f*t+%.3f) %d+%d*sin(%.5f*t+%.3f)\n", xc, ax, wx, 1.3 * i, yc, ay, wy, 0.7 + 2.1 * i
  }')"
  graph+="color=c=white:s=${PW}x${PH}:r=$FPS:d=$seconds,"
  graph+="drawtext=fontfile='$font':text='${plates[$i]}':fontsize=40:fontcolor=black:x=(w-text_w)/2:y=(h-text_h)/2[p$i];"
  graph+="[bg$i][p$i]overlay=x='$x':y='$y'[bg$((i + 1))];"
done
graph+="[bg$n]null[v]"

tmp="$out.tmp.mp4"
trap 'rm -f "$tmp"' EXIT
ffmpeg -v error -nostdin -y -filter_complex "$graph" -map '[v]' -an \
  -c:v libx264 -preset veryfast -pix_fmt yuv420p -r $FPS -movflags +faststart "$tmp"
mv "$tmp" "$out"
