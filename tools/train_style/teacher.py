"""The teacher: Magenta's arbitrary-image-stylization networks (TFLite, Apache-2.0;
installed by `streamlens models fetch magenta`, the files Models/magenta-style.json uses), run
with OpenVINO.

Strength and density act where Magenta's own paper puts them:
- strength s blends the style image's 100-number style vector with the content image's own:
  v = s * style(style image) + (1 - s) * style(content). Create ML's low/high strength.
- density d is the scale at which the style's statistics are taken: the style image is shown
  to the style network tiled d x d (d > 1: finer, smaller brush marks) or as a centre crop of
  1/d of its width (d < 1: coarser, larger marks). Create ML's fine/coarse density.
"""

import os
import sys

import numpy as np
from PIL import Image

PREDICT = "style_predict_quantized_256.tflite"
TRANSFER = "style_transfer_f16_384.tflite"
TRANSFER_SIZE = 384
PREDICT_SIZE = 256


def style_view(image: Image.Image, density: float) -> np.ndarray:
    """The style image as the style network sees it at this density: [256, 256, 3] in [0, 1]."""
    img = image.convert("RGB")
    w, h = img.size
    side = min(w, h)
    if density >= 1:
        sq = img.crop(((w - side) // 2, (h - side) // 2, (w - side) // 2 + side, (h - side) // 2 + side))
        n = max(1, int(round(density)))
        tile = sq.resize((int(np.ceil(PREDICT_SIZE / n)),) * 2, Image.LANCZOS)
        canvas = Image.new("RGB", (tile.width * n, tile.height * n))
        for i in range(n):
            for j in range(n):
                # Mirror alternate tiles so the seams do not add straight edges to the style.
                t = tile
                if i % 2:
                    t = t.transpose(Image.FLIP_LEFT_RIGHT)
                if j % 2:
                    t = t.transpose(Image.FLIP_TOP_BOTTOM)
                canvas.paste(t, (i * tile.width, j * tile.height))
        view = canvas.crop((0, 0, PREDICT_SIZE, PREDICT_SIZE))
    else:
        crop = max(16, int(side * density))
        view = img.crop(((w - crop) // 2, (h - crop) // 2, (w - crop) // 2 + crop, (h - crop) // 2 + crop))
        view = view.resize((PREDICT_SIZE, PREDICT_SIZE), Image.LANCZOS)
    return np.asarray(view, np.float32) / 255.0


def default_folder(root: str) -> str:
    """Magenta's networks where `streamlens models fetch magenta` installs them (tools/models.py)."""
    sys.path.insert(0, os.path.join(root, "tools"))
    import models
    return os.path.join(models.store_dir(), "magenta")


class Teacher:
    def __init__(self, folder: str, style: Image.Image, strength: float, density: float):
        import openvino as ov
        for f in (PREDICT, TRANSFER):
            if not os.path.isfile(os.path.join(folder, f)):
                raise SystemExit(f"train-style: the teacher network {os.path.join(folder, f)} is missing: "
                                 "install Magenta's networks with `streamlens models fetch magenta` "
                                 "(Models/model-catalogue.json lists them), or pass --teacher DIR")
        core = ov.Core()
        # f32: the teacher's output is the training target; bf16 would add its rounding to it.
        cfg = {"INFERENCE_PRECISION_HINT": "f32"}
        self.predict = core.compile_model(os.path.join(folder, PREDICT), "CPU", cfg)
        self.transfer = core.compile_model(os.path.join(folder, TRANSFER), "CPU", cfg)
        self.strength = strength
        self.style_vector = self._vector(style_view(style, density))

    def _vector(self, view: np.ndarray) -> np.ndarray:
        return list(self.predict([view[None]]).values())[0].reshape(1, 1, 1, 100).astype(np.float32)

    def __call__(self, content: np.ndarray) -> np.ndarray:
        """content: [384, 384, 3] in [0, 1] -> stylized [384, 384, 3] in [0, 1]."""
        v = self.style_vector
        if self.strength < 1:
            small = np.asarray(Image.fromarray((content * 255).astype(np.uint8)).resize(
                (PREDICT_SIZE, PREDICT_SIZE), Image.BILINEAR), np.float32) / 255.0
            v = self.strength * v + (1 - self.strength) * self._vector(small)
        inputs = {}
        for port in self.transfer.inputs:
            shape = list(port.get_partial_shape().to_shape())
            inputs[port.any_name] = v if shape[-1] == 100 else content[None].astype(np.float32)
        out = list(self.transfer(inputs).values())[0][0]
        return np.clip(out, 0, 1)
