#!/usr/bin/env python3
"""streamlens train-style: train a small, fast feed-forward style network from one style image.

    streamlens train-style STYLE_IMAGE --out Models/my-style [--strength high|low|0..1]
        [--density coarse|medium|fine|SCALE] [--iterations N] [--size PX] [--validation PHOTO]
        [--snapshot-every K] [--seed N] [--content DIR] [--teacher DIR] [--temporal-weight W]

Writes OUT.onnx (RGB [0, 1], NCHW, height and width free), OUT.json (the manifest lensstylize
reads, recording the exact command, seed and losses) and OUT.snapshots/ (the validation photo
stylized every K iterations, beside the teacher's version).

The training signal is distillation (issue 7, option b): Magenta's arbitrary-style networks (the
teacher, installed by `streamlens models fetch magenta`, run by OpenVINO) stylize random crops of the content
photos once, up front; the student then learns to reproduce the teacher's picture from the
photo, pixel for pixel (L1 on colours and on their gradients). Nothing is downloaded at run
time, a training step needs no ImageNet backbone (the student's own forward and backward pass
only: ~0.3 s for 4 crops of 192² here), and the student inherits a teacher whose quality
is known. What it cannot do is go beyond the teacher: see docs/training-styles.md.

Steady on video (issue 38): a feed-forward network paints each frame on its own, and its two
stride-2 layers make it answer a shift of the picture by a pixel with a different painting: the
marks crawl on motion. The temporal loss (--temporal-weight) shows the network each crop twice,
the second time moved as a camera moves it between frames (a small random affine warp: sub-pixel
shift, rotation, zoom; sensor noise; a patch of another crop pasted over part of it, an object
coming into view), and asks the painting of the moved crop to be the first painting moved the
same way, outside the pasted patch and the borders (ReCoNet's output-level temporal loss, with
synthetic motion instead of video and optical flow: arXiv 2102.05822 finds that enough).

Keeping what it paints (issue 55): the temporal loss has a trivially steady answer, a flat
picture, and pulls the network towards it wherever the teacher's marks are weak: a face became
a smooth patch the face detector no longer finds. The content loss (--content-weight) asks the
painting to keep the photo's structure at the scale of features (a face's eyes, nose and mouth,
an object's outline), not its colours: on the luminance of both at a quarter of the size (the
style's marks averaged out), it is one minus their correlation in 7x7 windows (SSIM's structure
term, Wang et al. 2004), so a style may recolour and re-contrast a region and draw its marks over
it, but not flatten or move its shapes. Flat regions of the photo ask nothing (the correlation's
constant makes them agree). It comes with the temporal loss, which it is there to balance (from
the first step when there is none). Measured on embers (issue 55): at half the size, or at a
quarter with weight 2, it washed the marks out to a sepia photo; at a quarter with 0.2 the face
stayed lost; 0.5 keeps both.
"""

import argparse
import functools
import hashlib
import json
import os
import shlex
import sys
import time

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import content  # noqa: E402
import network  # noqa: E402
import styles  # noqa: E402
import teacher as teacher_mod  # noqa: E402

DENSITIES = {"coarse": 0.5, "medium": 1.0, "fine": 2.0}
STRENGTHS = {"low": 0.6, "high": 1.0}
MANIFEST_SIZE = (320, 180)
TEMPORAL_WEIGHT = 1.0
CONTENT_WEIGHT = 0.5
STEADY_FROM = 0.4


def parse_args(argv):
    p = argparse.ArgumentParser(prog="streamlens train-style", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("style", help="style image (PNG/JPEG), or code:NAME for a style drawn by "
                                 f"tools/train_style/styles.py ({', '.join(styles.STYLES)})")
    p.add_argument("--out", required=True, help="output path without extension: writes OUT.onnx, OUT.json, OUT.snapshots/")
    p.add_argument("--strength", default="high", help="how much of the style: low, high, or 0..1 (default high)")
    p.add_argument("--density", default="medium", help="scale of the style's marks: coarse, medium, fine, or a scale "
                                                     "(0.25..4; >1 finer; default medium)")
    p.add_argument("--iterations", type=int, default=2500, help="training steps (default 2500, ~12 min on one core here)")
    p.add_argument("--size", type=int, default=192, help="training crop size in pixels (multiple of 4; default 192)")
    p.add_argument("--batch", type=int, default=4, help="crops per step (default 4)")
    p.add_argument("--pairs", type=int, default=400, help="photo crops the teacher stylizes up front (default 400)")
    p.add_argument("--filters", default="32,64,4", help="network shape F1,F2,BLOCKS (default 32,64,4)")
    p.add_argument("--learning-rate", type=float, default=2e-3)
    p.add_argument("--validation", default="", help="photo stylized into OUT.snapshots/ (default: the astronaut)")
    p.add_argument("--snapshot-every", type=int, default=250, help="write a snapshot every K iterations (default 250; 0: only the last)")
    p.add_argument("--seed", type=int, default=0, help="random seed: crops, order, initial weights (default 0)")
    p.add_argument("--content", default="", help="folder of content photos (default: scikit-image's CC0 / public-domain photos)")
    p.add_argument("--teacher", default=teacher_mod.default_folder(ROOT),
                   help="folder with Magenta's TFLite networks (default: where `streamlens models fetch magenta` installs them)")
    p.add_argument("--name", default="", help="style name in the manifest (default: OUT's file name)")
    p.add_argument("--temporal-weight", type=float, default=TEMPORAL_WEIGHT,
                   help=f"weight of the temporal loss, against flicker on video (default {TEMPORAL_WEIGHT}; 0: off, "
                        "the per-frame training of earlier styles)")
    p.add_argument("--content-weight", type=float, default=CONTENT_WEIGHT,
                   help=f"weight of the content loss, keeping the photo's shapes (faces, edges) under the style "
                        f"(default {CONTENT_WEIGHT}; 0: off, the training of earlier styles)")
    p.add_argument("--init", default="", help="start from this network (an OUT.onnx train-style wrote) instead of random "
                                              "weights: the temporal and content losses from the first step (its marks are "
                                              "learnt already); its shape, sha256 and training record go into the manifest")
    a = p.parse_args(argv)

    def named(value, table, what, lo, hi):
        if value in table:
            return table[value]
        try:
            v = float(value)
        except ValueError:
            p.error(f"--{what} {value}: expected {', '.join(table)} or a number in {lo}..{hi}")
        if not lo <= v <= hi:
            p.error(f"--{what} {value}: out of range {lo}..{hi}")
        return v

    a.strength_value = named(a.strength, STRENGTHS, "strength", 0.0, 1.0)
    a.density_value = named(a.density, DENSITIES, "density", 0.25, 4.0)
    if a.size % 4 or not 64 <= a.size <= 384:
        p.error(f"--size {a.size}: a multiple of 4 in 64..384")
    if a.validation and not os.path.isfile(a.validation):
        p.error(f"--validation {a.validation}: no such file")
    if a.content and not os.path.isdir(a.content):
        p.error(f"--content {a.content}: no such folder")
    if not 0 <= a.temporal_weight <= 100:
        p.error(f"--temporal-weight {a.temporal_weight}: out of range 0..100")
    if not 0 <= a.content_weight <= 100:
        p.error(f"--content-weight {a.content_weight}: out of range 0..100")
    if a.iterations < 1:
        p.error("--iterations must be at least 1")
    try:
        f1, f2, blocks = (int(x) for x in a.filters.split(","))
        a.shape = network.Shape(f1, f2, blocks)
    except ValueError:
        p.error(f"--filters {a.filters}: expected F1,F2,BLOCKS, e.g. 16,32,3")
    a.init_params = None
    if a.init:
        try:
            a.shape, a.init_params = network.load_onnx(a.init)
        except Exception as e:  # noqa: BLE001 (a file that is no ONNX model raises protobuf's own errors)
            p.error(f"--init {a.init}: not a network train-style wrote ({type(e).__name__}: {e})")
        with open(a.init, "rb") as f:
            a.init_sha256 = hashlib.sha256(f.read()).hexdigest()
        sibling = os.path.splitext(a.init)[0] + ".json"
        try:
            with open(sibling) as f:
                a.init_training = json.load(f).get("training")
        except (OSError, ValueError):
            a.init_training = None
    return a


def load_style(spec: str) -> Image.Image:
    if spec.startswith("code:"):
        name = spec[5:]
        if name not in styles.STYLES:
            raise SystemExit(f"train-style: no style named {name} in styles.py ({', '.join(styles.STYLES)})")
        return styles.STYLES[name]()
    try:
        return Image.open(spec).convert("RGB")
    except (OSError, ValueError) as e:
        raise SystemExit(f"train-style: cannot read the style image {spec}: {e}")


class Progress:
    """One line on stderr: bar, step, loss, rate and time left."""

    def __init__(self, total, label):
        self.total, self.label, self.start = total, label, time.time()
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def update(self, n, extra=""):
        now = time.time()
        if n < self.total and now - self.last < (0.5 if self.tty else 15):
            return
        self.last = now
        done = n / self.total
        elapsed = now - self.start
        eta = elapsed / done - elapsed if done > 0 else 0
        bar = "#" * int(done * 30)
        line = (f"{self.label} [{bar:<30}] {n}/{self.total} {extra} "
                f"{elapsed:5.0f} s elapsed, ETA {int(eta // 60)}:{int(eta % 60):02d}")
        sys.stderr.write(("\r" + line + "\x1b[K") if self.tty else line + "\n")
        if n >= self.total and self.tty:
            sys.stderr.write("\n")
        sys.stderr.flush()


def make_pairs(photos, teach, count, rng):
    """`count` random crops of the photos (scale 0.25..1 of the short side, flipped half the
    time) at the teacher's 384², and the teacher's stylized version of each, as uint8."""
    size = teacher_mod.TRANSFER_SIZE
    images = [Image.open(f).convert("RGB") for f in photos]
    xs = np.zeros((count, size, size, 3), np.uint8)
    ys = np.zeros_like(xs)
    bar = Progress(count, "teacher ")
    for i in range(count):
        img = images[rng.integers(len(images))]
        w, h = img.size
        side = int(min(w, h) * rng.uniform(0.25, 1.0))
        x0, y0 = rng.integers(0, w - side + 1), rng.integers(0, h - side + 1)
        crop = img.crop((x0, y0, x0 + side, y0 + side)).resize((size, size), Image.BILINEAR)
        if rng.random() < 0.5:
            crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
        x = np.asarray(crop, np.float32) / 255.0
        xs[i] = np.asarray(crop)
        ys[i] = np.round(teach(x) * 255).astype(np.uint8)
        bar.update(i + 1)
    return xs, ys


def warp_affine(images, motion):
    """images [N, H, W, C] resampled (bilinear) where each output pixel (x, y, 1) comes from
    motion[n] @ (x, y, 1) of its image; and [N, H, W], 1 where that point lies inside it."""
    import jax.numpy as jnp
    n, h, w, c = images.shape
    ys, xs = jnp.meshgrid(jnp.arange(h, dtype=jnp.float32), jnp.arange(w, dtype=jnp.float32), indexing="ij")
    sx = motion[:, 0, 0, None, None] * xs + motion[:, 0, 1, None, None] * ys + motion[:, 0, 2, None, None]
    sy = motion[:, 1, 0, None, None] * xs + motion[:, 1, 1, None, None] * ys + motion[:, 1, 2, None, None]
    inside = ((sx >= 0) & (sx <= w - 1) & (sy >= 0) & (sy <= h - 1)).astype(jnp.float32)
    x0 = jnp.clip(jnp.floor(sx), 0, w - 2)
    y0 = jnp.clip(jnp.floor(sy), 0, h - 2)
    fx = jnp.clip(sx - x0, 0, 1)[..., None]
    fy = jnp.clip(sy - y0, 0, 1)[..., None]
    flat = images.reshape(n, h * w, c)
    x0i, y0i = x0.astype(jnp.int32), y0.astype(jnp.int32)

    def at(yy, xx):
        idx = (yy * w + xx).reshape(n, h * w, 1)
        return jnp.take_along_axis(flat, idx, axis=1).reshape(n, h, w, c)

    top = at(y0i, x0i) * (1 - fx) + at(y0i, x0i + 1) * fx
    bottom = at(y0i + 1, x0i) * (1 - fx) + at(y0i + 1, x0i + 1) * fx
    return top * (1 - fy) + bottom * fy, inside


_warp_jit = None


def synthetic_motion(x, rng):
    """The next frame of each crop as a camera would see it: a random affine motion about the
    centre (shift up to 4 px in any direction, sub-pixel; rotation up to 1.5 degrees; zoom up to
    3 %), sensor noise (sigma 1.5/255), and a patch of another crop pasted over a random box (an
    object coming into view). Returns the motions (output pixel -> source pixel), the mask of
    pixels the loss compares (not the patch; borders are left to warp_affine), and the frames."""
    n, h, w, _ = x.shape
    motion = np.zeros((n, 2, 3), np.float32)
    keep = np.ones((n, h, w), np.float32)
    cx, cy = (w - 1) / 2, (h - 1) / 2
    for i in range(n):
        angle = np.deg2rad(rng.uniform(-1.5, 1.5))
        zoom = rng.uniform(0.97, 1.03)
        tx, ty = rng.uniform(-4, 4, 2)
        c, s = np.cos(angle) / zoom, np.sin(angle) / zoom
        motion[i] = [[c, -s, cx - c * cx + s * cy + tx], [s, c, cy - s * cx - c * cy + ty]]
    global _warp_jit
    if _warp_jit is None:
        import jax
        _warp_jit = jax.jit(warp_affine)
    moved = np.array(_warp_jit(x, motion)[0])
    moved += rng.normal(0, 1.5 / 255, moved.shape).astype(np.float32)
    for i in range(n):
        if rng.random() < 0.5:
            bh, bw = rng.integers(h // 8, h // 3, 2)
            y0, x0 = rng.integers(0, h - bh), rng.integers(0, w - bw)
            moved[i, y0:y0 + bh, x0:x0 + bw] = x[(i + 1) % n, y0:y0 + bh, x0:x0 + bw]
            keep[i, y0:y0 + bh, x0:x0 + bw] = 0
    return motion, keep, np.clip(moved, 0, 1)


def structure_loss(out, photo):
    """One minus the local correlation of the two pictures' luminance, at a quarter of their size,
    in 7x7 windows (SSIM's structure term): 0 where the painting keeps the photo's shapes
    whatever its colours and contrast, up to 2 where it inverts them. out, photo: [N, H, W, 3]
    in [0, 1]."""
    import jax
    import jax.numpy as jnp
    weights = jnp.asarray([0.299, 0.587, 0.114], jnp.float32)

    def mean(z, k, stride):
        return jax.lax.reduce_window(z, 0.0, jax.lax.add, (1, k, k), (1, stride, stride), "VALID") / (k * k)

    a, b = mean(out @ weights, 4, 4), mean(photo @ weights, 4, 4)
    ma, mb = mean(a, 7, 1), mean(b, 7, 1)
    va = jnp.maximum(mean(a * a, 7, 1) - ma * ma, 0)
    vb = jnp.maximum(mean(b * b, 7, 1) - mb * mb, 0)
    cov = mean(a * b, 7, 1) - ma * mb
    c = 0.03 ** 2 / 2
    return jnp.mean(1 - (cov + c) / jnp.sqrt((va + c) * (vb + c)))


def stylize_numpy(params, shape, image: np.ndarray):
    import jax.numpy as jnp
    h, w = image.shape[:2]
    h4, w4 = h - h % 4, w - w % 4
    x = jnp.asarray(image[None, :h4, :w4].astype(np.float32) / 255.0)
    return np.asarray(network.forward(params, x, shape)[0])


def validation_photo(path):
    img = Image.open(path).convert("RGB")
    img.thumbnail((384, 384))
    return img


def train(a):
    import jax
    import jax.numpy as jnp

    t0 = time.time()
    rng = np.random.default_rng(a.seed)
    style = load_style(a.style)
    folder = a.content or content.default_folder(ROOT)
    photos = content.photos(folder, () if a.content else content.HELD_OUT)
    teach = teacher_mod.Teacher(a.teacher, style, a.strength_value, a.density_value)
    print(f"train-style: {len(photos)} content photos from {folder}; teacher {a.teacher}; "
          f"strength {a.strength_value}, density {a.density_value}", file=sys.stderr)
    xs, ys = make_pairs(photos, teach, a.pairs, rng)
    teacher_seconds = time.time() - t0

    shape = a.shape
    params = jax.tree_util.tree_map(jnp.asarray, a.init_params or network.init(shape, a.seed))

    tw, cw = a.temporal_weight, a.content_weight

    def loss_fn(p, x, y, moved, motion, keep, steady):
        if steady:
            both = network.forward(p, jnp.concatenate([x, moved]), shape)
            out, out_moved = both[:len(x)], both[len(x):]
        else:
            out = network.forward(p, x, shape)
        colour = jnp.mean(jnp.abs(out - y))
        dx = lambda z: z[:, :, 1:] - z[:, :, :-1]  # noqa: E731
        dy = lambda z: z[:, 1:] - z[:, :-1]  # noqa: E731
        grad = jnp.mean(jnp.abs(dx(out) - dx(y))) + jnp.mean(jnp.abs(dy(out) - dy(y)))
        structure = structure_loss(out, x) if cw > 0 and (steady or tw == 0) else jnp.float32(0)
        painted = colour + grad + cw * structure
        if not steady:
            return painted, (structure, jnp.float32(0))
        expected, inside = warp_affine(out[:len(moved)], motion)
        m = inside * keep
        temporal = jnp.sum(m[..., None] * jnp.abs(out_moved - expected)) / (3 * jnp.sum(m) + 1e-6)
        return painted + tw * temporal, (structure, temporal)

    b1, b2, eps = 0.9, 0.999, 1e-8

    @functools.partial(jax.jit, static_argnums=(10,))
    def step(p, m, v, t, x, y, moved, motion, keep, lr, steady):
        (loss, parts), g = jax.value_and_grad(loss_fn, has_aux=True)(p, x, y, moved, motion, keep, steady)
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        mhat = jax.tree_util.tree_map(lambda m: m / (1 - b1 ** t), m)
        vhat = jax.tree_util.tree_map(lambda v: v / (1 - b2 ** t), v)
        p = jax.tree_util.tree_map(lambda p, mh, vh: p - lr * mh / (jnp.sqrt(vh) + eps), p, mhat, vhat)
        return p, m, v, loss, parts

    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)

    val_path = a.validation or os.path.join(content.default_folder(ROOT), "astronaut.png")
    val = validation_photo(val_path)
    val_np = np.asarray(val)
    val_teacher = np.round(teach(np.asarray(val.resize((384, 384)), np.float32) / 255.0) * 255).astype(np.uint8)
    val_teacher = np.asarray(Image.fromarray(val_teacher).resize(val.size, Image.BILINEAR))
    snapdir = a.out + ".snapshots"
    os.makedirs(snapdir, exist_ok=True)

    def snapshot(it):
        out = (stylize_numpy(params, shape, val_np) * 255).round().astype(np.uint8)
        h, w = out.shape[:2]
        canvas = Image.new("RGB", (w * 3, h))
        canvas.paste(Image.fromarray(val_np[:h, :w]), (0, 0))
        canvas.paste(Image.fromarray(out), (w, 0))
        canvas.paste(Image.fromarray(val_teacher[:h, :w]), (2 * w, 0))
        path = os.path.join(snapdir, f"iteration-{it:05d}.png")
        canvas.save(path)
        return path

    size, n = a.size, a.batch
    full = teacher_mod.TRANSFER_SIZE
    bar = Progress(a.iterations, "training")
    losses, temporals, structures = [], [], []
    # The style first, then steadiness: from the start the temporal loss would pull the network
    # to its trivially steady answer, a flat picture, before it has learnt any marks. The moved
    # copies are of half the batch (each costs a forward and backward pass).
    steady_from = 0 if a.init else int(STEADY_FROM * a.iterations)
    t1 = time.time()
    for it in range(1, a.iterations + 1):
        idx = rng.integers(0, len(xs), n)
        oy, ox = rng.integers(0, full - size + 1, (2, n))
        x = np.stack([xs[i, y0:y0 + size, x0:x0 + size] for i, y0, x0 in zip(idx, oy, ox)]).astype(np.float32) / 255.0
        y = np.stack([ys[i, y0:y0 + size, x0:x0 + size] for i, y0, x0 in zip(idx, oy, ox)]).astype(np.float32) / 255.0
        # Cosine decay to a tenth of the rate: large steps early, fine detail late.
        lr = a.learning_rate * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * (it - 1) / a.iterations)))
        steady = tw > 0 and it > steady_from
        motion, keep, moved = synthetic_motion(x[:(n + 1) // 2], rng) if steady else (np.zeros((1, 2, 3), np.float32), np.zeros((1, size, size), np.float32), x[:1])
        params, m, v, loss, (structure, temporal) = step(params, m, v, float(it), jnp.asarray(x), jnp.asarray(y),
                                                            jnp.asarray(moved), jnp.asarray(motion), jnp.asarray(keep), lr, steady)
        losses.append(float(loss))
        temporals.append(float(temporal))
        structures.append(float(structure))
        recent = float(np.mean(losses[-50:]))
        parts = ([f"content {np.mean(structures[-50:]):.4f}"] if cw > 0 else []) + ([f"temporal {np.mean(temporals[-50:]):.4f}"] if tw > 0 else [])
        bar.update(it, f"loss {recent:.4f}" + (f" ({', '.join(parts)})" if parts else ""))
        if a.snapshot_every and it % a.snapshot_every == 0 and it < a.iterations:
            snapshot(it)
    last = snapshot(a.iterations)
    train_seconds = time.time() - t1

    params_np = jax.tree_util.tree_map(np.asarray, params)
    onnx_path = a.out + ".onnx"
    name = a.name or os.path.basename(a.out)
    command = "streamlens train-style " + " ".join(shlex.quote(x) for x in a.argv)
    network.export_onnx(params_np, shape, onnx_path, doc=f"StreamLens style '{name}': {command}")
    style_hash = hashlib.sha256(np.asarray(style).tobytes()).hexdigest()[:16]
    manifest = {
        "schema_version": 1,
        "name": name,
        "model": os.path.basename(onnx_path),
        "input": {"width": MANIFEST_SIZE[0], "height": MANIFEST_SIZE[1], "color_order": "RGB",
                  "value_range": [0, 1], "layout": "NCHW", "name": "input"},
        "crop": "stretch",
        "decoder": {"name": "image", "parameters": {"color_order": "RGB", "value_range": [0, 1], "layout": "NCHW"}},
        "labels": [],
        "licence": "CC0-1.0 (trained by StreamLens's own train-style from a style image drawn by code; "
                   "teacher Magenta, Apache-2.0; content photos CC0 / public domain) — see docs/training-styles.md"
                   if a.style.startswith("code:") and not a.content else
                   "trained by streamlens train-style; the licence follows the style image's and content photos'",
        "provenance": f"trained: {command}",
        "training": {
            "command": command,
            "seed": a.seed,
            "style_image": a.style,
            "style_pixels_sha256_16": style_hash,
            "strength": a.strength_value,
            "density": a.density_value,
            "iterations": a.iterations,
            "crop_size": a.size,
            "batch": a.batch,
            "teacher_pairs": a.pairs,
            "network": {"f1": shape.f1, "f2": shape.f2, "residual_blocks": shape.blocks,
                        "parameters": network.count(params_np)},
            "content": os.path.relpath(folder, ROOT) if folder.startswith(ROOT) else folder,
            "content_photos": len(photos),
            "teacher": "Magenta arbitrary-image-stylization (style_predict_quantized_256 + style_transfer_f16_384), OpenVINO f32",
            "temporal_weight": a.temporal_weight,
            "final_loss": round(float(np.mean(losses[-100:])), 5),
            "final_temporal_loss": round(float(np.mean(temporals[-100:])), 5),
            "content_weight": a.content_weight,
            **({"init": {"file": os.path.basename(a.init), "sha256": a.init_sha256, "training": a.init_training}} if a.init else {}),
            "final_content_loss": round(float(np.mean(structures[-100:])), 5),
            "teacher_seconds": round(teacher_seconds, 1),
            "training_seconds": round(train_seconds, 1),
            "trainer": "tools/train_style (JAX " + jax.__version__ + ")",
        },
    }
    with open(a.out + ".json", "w") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
        f.write("\n")
    kb = os.path.getsize(onnx_path) / 1024
    print(f"train-style: wrote {onnx_path} ({kb:.0f} KB), {a.out}.json, snapshots in {snapdir}/ "
          f"(last: {last}); final loss {manifest['training']['final_loss']}; "
          f"teacher {teacher_seconds:.0f} s + training {train_seconds:.0f} s", file=sys.stderr)
    print(f"try it: streamlens run 'videotestsrc num-buffers=60 ! videoconvert ! lensstylize model={a.out}.json ! videoconvert ! autovideosink'",
          file=sys.stderr)


def main(argv):
    a = parse_args(argv)
    a.argv = argv
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    train(a)


if __name__ == "__main__":
    main(sys.argv[1:])
