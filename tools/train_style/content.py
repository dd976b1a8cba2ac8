"""Content photos for training, with their licences. The default set is the public-domain and
CC0 photographs inside scikit-image's wheel on PyPI (the wheel tools/setup.sh already fetched
for the demo clip); any folder of photos can be used instead (`--content DIR`).

The licences are those scikit-image's own docstrings (skimage/data/_fetchers.py) give; see
docs/training-styles.md for the table. Microscopy, synthetic and unclear-licence images of the
wheel (cell, colorwheel, logo, stereo motorcycle, moon) are left out.
"""

import glob
import os
import subprocess
import sys
import zipfile

SKIMAGE_VERSION = "0.26.0"

# file in skimage/data -> (what it shows, licence)
PHOTOS = {
    "astronaut.png": ("astronaut Eileen Collins (NASA)", "public domain"),
    "chelsea.png": ("a cat (Stefan van der Walt)", "CC0"),
    "coffee.png": ("a cup of coffee (Rachel Michetti)", "CC0"),
    "rocket.jpg": ("a Falcon 9 on its pad (SpaceX)", "public domain"),
    "hubble_deep_field.jpg": ("Hubble deep field (NASA)", "public domain"),
    "ihc.png": ("immunohistochemistry stain", "no known copyright restrictions"),
    "retina.jpg": ("fundus photograph (Mikael Häggström)", "CC0"),
    "camera.png": ("a photographer (Lav Varshney), grey", "CC0"),
    "brick.png": ("a brick wall (CC0Textures), grey", "CC0"),
    "grass.png": ("grass (linolafett), grey", "CC0"),
    "gravel.png": ("gravel (CC0Textures), grey", "CC0"),
    "coins.png": ("Greek coins (Brooklyn Museum), grey", "no known copyright restrictions"),
    "clock_motion.png": ("a clock, motion-blurred (Stefan van der Walt), grey", "public domain"),
}


# Kept out of the default training set: evaluate.py measures the styles on photos the student
# never saw (and on the astronaut, which it did).
HELD_OUT = ("chelsea.png", "coffee.png")


def default_folder(root: str) -> str:
    """.deps/train/content, filled from the scikit-image wheel (downloaded once into
    .deps/wheels if set-up has not already)."""
    out = os.path.join(root, ".deps", "train", "content")
    if all(os.path.isfile(os.path.join(out, f)) for f in PHOTOS):
        return out
    wheels = os.path.join(root, ".deps", "wheels")
    found = glob.glob(os.path.join(wheels, f"scikit_image-{SKIMAGE_VERSION}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        f"scikit-image=={SKIMAGE_VERSION}", "-d", wheels], check=True)
        found = glob.glob(os.path.join(wheels, f"scikit_image-{SKIMAGE_VERSION}-*.whl"))
    os.makedirs(out, exist_ok=True)
    with zipfile.ZipFile(found[0]) as z:
        for f in PHOTOS:
            with open(os.path.join(out, f), "wb") as dst:
                dst.write(z.read(f"skimage/data/{f}"))
    return out


def photos(folder: str, held_out=()):
    exts = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")
    files = sorted(f for f in glob.glob(os.path.join(folder, "**", "*"), recursive=True)
                   if f.lower().endswith(exts) and os.path.basename(f) not in held_out)
    if not files:
        raise SystemExit(f"train-style: no photos (.png/.jpg/…) in {folder}")
    return files
