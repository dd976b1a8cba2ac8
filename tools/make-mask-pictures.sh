#!/usr/bin/env bash
# docs/masks.jpg: effects that follow a person's outline, made by the stages themselves (one
# streamlens run) on the astronaut (NASA, public domain), person-segmentation from the
# catalogue: the photo; the mosaic style outside the person only, its edge feathered (the seed
# app's "background tuned, the subject intact"); the background blurred; a virtual background
# (the cat, scikit-image's chelsea, public domain); lensoverlay's tinted mask.
# Usage: tools/make-mask-pictures.sh STREAMLENS_BINARY [OUT.jpg]
set -euo pipefail
bin=${1:?usage: make-mask-pictures.sh STREAMLENS_BINARY [OUT.jpg]}
out=${2:-docs/masks.jpg}
cd "$(dirname "$0")/.."
S=320
photo="filesrc location=.deps/media/astronaut.png ! pngdec ! videoconvert ! videoscale ! video/x-raw,format=RGB,width=$S,height=$S,pixel-aspect-ratio=1/1 ! imagefreeze num-buffers=1 ! video/x-raw,framerate=1/1"
seg="lensdetect draw=false precision=f32 model=Models/person-segmentation.json"
effects=(
  ""
  "lensstylize model=Models/mosaic.json regions=outside feather=8 precision=f32"
  "lensblur shape=mask regions=outside method=gaussian block=8 margin=0"
  "lensblur shape=mask regions=outside replace=.deps/media/chelsea.png margin=0"
  "lensoverlay masks=0.45 color=class thickness=2"
)
spec="$photo ! $seg ! tee name=photo compositor name=grid background=black"
for i in "${!effects[@]}"; do
  spec+=" sink_$i::xpos=$((i * S))"
done
spec+=" ! video/x-raw,width=$((${#effects[@]} * S)),height=$S ! videoconvert ! jpegenc quality=80 ! filesink location=$out"
for i in "${!effects[@]}"; do
  e=${effects[$i]}
  spec+=" photo. ! queue ! ${e:+$e ! }videoconvert ! grid.sink_$i"
done
"$bin" run -q "$spec"
echo "wrote $out"
