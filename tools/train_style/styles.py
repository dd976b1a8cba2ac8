"""Style images drawn by code, so the default styles owe nothing to anyone's licence: each is a
pure function of its name and seed. `python3 styles.py OUT_DIR` writes 256x256 JPEG previews.

- mosaic: Voronoi tiles in a warm enamel palette with dark grout (a Byzantine floor).
- waves:  long brush strokes along a swirling flow field in Prussian blues and foam white
          (the mood of a woodblock sea).
- embers: dabs of saturated colour on a dark ground, in the manner of a pointillist at night.
"""

import math
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

SIZE = 512


def mosaic(seed: int = 1) -> Image.Image:
    rng = np.random.default_rng(seed)
    palette = np.array([[196, 62, 39], [232, 164, 48], [242, 214, 140], [38, 92, 120],
                        [120, 36, 52], [70, 128, 88], [230, 120, 60]], np.float32)
    n = 420
    pts = rng.uniform(0, SIZE, (n, 2))
    y, x = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32)
    d = np.full((SIZE, SIZE), np.inf, np.float32)
    d2 = np.full((SIZE, SIZE), np.inf, np.float32)
    idx = np.zeros((SIZE, SIZE), np.int32)
    for i, (px, py) in enumerate(pts):
        dist = np.hypot(x - px, y - py)
        closer = dist < d
        d2 = np.where(closer, d, np.minimum(d2, dist))
        idx = np.where(closer, i, idx)
        d = np.where(closer, dist, d)
    colours = palette[rng.integers(0, len(palette), n)] * rng.uniform(0.8, 1.15, (n, 1))
    img = colours[idx]
    # Each tile a little shaded from its centre; grout where two tiles are nearly equidistant.
    img *= (1.05 - 0.25 * np.clip(d / 30, 0, 1))[..., None]
    grout = np.clip((d2 - d) / 3.0, 0, 1)[..., None]
    img = img * grout + np.array([34, 26, 22], np.float32) * (1 - grout)
    img += rng.normal(0, 6, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def waves(seed: int = 2) -> Image.Image:
    rng = np.random.default_rng(seed)
    img = Image.new("RGB", (SIZE, SIZE), (18, 40, 78))
    draw = ImageDraw.Draw(img)
    blues = [(14, 48, 102), (28, 80, 140), (60, 120, 180), (110, 170, 210), (236, 240, 232), (20, 30, 60)]
    weights = np.array([3, 3, 2, 1.5, 1.2, 1.5])
    weights /= weights.sum()

    def angle(px, py):
        return (math.sin(px / 53.0) * 1.6 + math.cos(py / 41.0) * 1.3
                + math.sin((px + py) / 97.0) * 0.9)

    for _ in range(2600):
        px, py = rng.uniform(-20, SIZE + 20, 2)
        colour = blues[rng.choice(len(blues), p=weights)]
        width = int(rng.integers(2, 7))
        pts = [(px, py)]
        for _ in range(int(rng.integers(8, 28))):
            a = angle(px, py)
            px += 4 * math.cos(a)
            py += 4 * math.sin(a)
            pts.append((px, py))
        draw.line(pts, fill=colour, width=width, joint="curve")
    return img.filter(ImageFilter.SMOOTH)


def embers(seed: int = 3) -> Image.Image:
    rng = np.random.default_rng(seed)
    img = Image.new("RGB", (SIZE, SIZE), (22, 16, 30))
    draw = ImageDraw.Draw(img)
    hot = [(255, 196, 60), (250, 120, 40), (220, 50, 60), (255, 236, 170), (120, 60, 160), (40, 120, 170)]
    weights = np.array([3, 3, 2, 1, 1.2, 0.8])
    weights /= weights.sum()
    for _ in range(5200):
        px, py = rng.uniform(0, SIZE, 2)
        r = rng.uniform(2, 6)
        # Denser, hotter towards a few glowing centres.
        c = np.array(hot[rng.choice(len(hot), p=weights)], np.float32) * rng.uniform(0.7, 1.05)
        a = rng.uniform(0, math.pi)
        dx, dy = r * 1.6 * math.cos(a), r * 1.6 * math.sin(a)
        draw.line([(px - dx, py - dy), (px + dx, py + dy)], fill=tuple(np.clip(c, 0, 255).astype(int)), width=int(r * 1.4))
    return img


STYLES = {"mosaic": mosaic, "waves": waves, "embers": embers}


def main(out: str):
    """Each style image as a 256x256 JPEG: Models/styles/ holds these previews (README, tests)."""
    os.makedirs(out, exist_ok=True)
    for name, make in STYLES.items():
        path = os.path.join(out, f"{name}.jpg")
        make().resize((256, 256), Image.LANCZOS).save(path, quality=90)
        print(path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
