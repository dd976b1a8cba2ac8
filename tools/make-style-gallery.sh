#!/usr/bin/env bash
# docs/styles.jpg: the README's before/after picture, made by lensstylize itself (one streamlens
# run): the astronaut (NASA, public domain) and each shipped style (Models/*.json with a training
# record) at inference-size=256, with the style images below.
# Usage: tools/make-style-gallery.sh STREAMLENS_BINARY [OUT.jpg]
set -euo pipefail
bin=${1:?usage: make-style-gallery.sh STREAMLENS_BINARY [OUT.jpg]}
out=${2:-docs/styles.jpg}
cd "$(dirname "$0")/.."
styles=$(grep -l '"training"' Models/*.json | xargs -n1 basename | sed 's/\.json$//' | sort)
S=256
photo="filesrc location=.deps/media/astronaut.png ! pngdec ! videoconvert ! videoscale ! video/x-raw,format=RGB,width=$S,height=$S,pixel-aspect-ratio=1/1 ! imagefreeze num-buffers=1 ! video/x-raw,framerate=1/1 ! tee name=photo"
spec="$photo photo. ! queue ! videoconvert ! grid.sink_0"
i=1 layout=""
for s in $styles; do
  spec+=" photo. ! queue ! lensstylize model=Models/$s.json inference-size=256 precision=f32 ! videoconvert ! grid.sink_$i"
  spec+=" filesrc location=Models/styles/$s.jpg ! jpegdec ! videoconvert ! videoscale ! video/x-raw,format=RGB,width=$S,height=$S,pixel-aspect-ratio=1/1 ! imagefreeze num-buffers=1 ! video/x-raw,framerate=1/1 ! videoconvert ! grid.sink_$((i + 10))"
  layout+=" sink_$i::xpos=$((i * S)) sink_$((i + 10))::xpos=$((i * S)) sink_$((i + 10))::ypos=$S"
  i=$((i + 1))
done
spec+=" compositor name=grid background=black $layout ! video/x-raw,width=$((i * S)),height=$((2 * S)) ! videoconvert ! jpegenc quality=75 ! filesink location=$out"
"$bin" run -q "$spec"
echo "wrote $out ("$styles")"
