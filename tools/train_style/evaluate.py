#!/usr/bin/env python3
"""Measures trained style networks against their Magenta teacher on the same photos.

    evaluate.py MANIFEST.json… [--photos DIR] [--before REV] [--out docs/training-styles-quality.md]

--before REV also measures each style as it was at git revision REV (its manifest and network read
with git show), beside the one measured now: what a retraining changed.

For each style (student = the shipped ONNX through OpenVINO, teacher = Magenta with the style
image, strength and density the manifest's training record names, at 384² and scaled back):
- style distance: Gram matrices of a fixed feature extractor on the output versus on the style
  image, as ||G_out - G_style||_F / ||G_style||_F averaged over three layers. The extractor is a
  shallow random-filter network (seeded; 3x3, 7x7 and 15x15 filters, 96 each, ReLU), which
  Ustyuzhaninov et al. (ICLR 2017) showed carries texture statistics well; it belongs to neither
  network, so it favours neither. Lower is closer to the style. The input photo's own distance
  is the reference for "no style at all".
- content: SSIM of the Sobel edge magnitude of output and input (grey levels; 1 = the same
  edges). Higher keeps more structure.
- flicker: a still scene as a camera sees it: the photo with fresh sensor noise (sigma 2/255)
  on each of 24 frames; the mean absolute change between consecutive outputs (0..255). The
  noisy input's own change is given for reference.
- time: median of 30 runs of one 320x180 frame, OpenVINO CPU, default precision.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import content  # noqa: E402
import styles  # noqa: E402
import teacher as teacher_mod  # noqa: E402
from train_style import load_style  # noqa: E402

EVAL_PHOTOS = ["chelsea.png", "coffee.png", "astronaut.png"]
SHORT_SIDE = 256


class Features:
    """The fixed random-filter extractor (JAX convolutions: this runs in the training
    environment)."""

    def __init__(self, seed=1234):
        rng = np.random.default_rng(seed)
        self.filters = []
        for k in (3, 7, 15):
            w = rng.standard_normal((96, 3, k, k)).astype(np.float32)
            w -= w.mean(axis=(1, 2, 3), keepdims=True)  # zero-mean filters: texture, not brightness
            w /= np.sqrt((w ** 2).sum(axis=(1, 2, 3), keepdims=True))
            self.filters.append(w)

    def grams(self, image: np.ndarray):
        import jax
        import jax.numpy as jnp
        x = jnp.asarray(image[None].astype(np.float32) / 255.0)
        x = x - jnp.asarray([0.485, 0.456, 0.406])
        out = []
        for w in self.filters:
            k = w.shape[-1]
            f = jax.lax.conv_general_dilated(x, jnp.transpose(jnp.asarray(w), (2, 3, 1, 0)), (1, 1), "VALID",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
            f = jax.nn.relu(f)[0].reshape(-1, w.shape[0])
            out.append(np.asarray(f.T @ f / f.shape[0]))
        return out


def style_distance(feats, out, style_grams):
    g = feats.grams(out)
    return float(np.mean([np.linalg.norm(a - b) / np.linalg.norm(b) for a, b in zip(g, style_grams)]))


def sobel(gray):
    from scipy import ndimage
    return np.hypot(ndimage.sobel(gray, 0), ndimage.sobel(gray, 1))


def ssim(a, b):
    from scipy import ndimage
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    L = max(a.max(), b.max(), 1e-6)
    c1, c2 = (0.01 * L) ** 2, (0.03 * L) ** 2
    g = lambda z: ndimage.gaussian_filter(z, 1.5)  # noqa: E731
    ma, mb = g(a), g(b)
    va, vb, cov = g(a * a) - ma * ma, g(b * b) - mb * mb, g(a * b) - ma * mb
    s = ((2 * ma * mb + c1) * (2 * cov + c2)) / ((ma * ma + mb * mb + c1) * (va + vb + c2))
    return float(s.mean())


def grey(img):
    return img.astype(np.float64) @ np.array([0.299, 0.587, 0.114])


def edge_ssim(inp, out):
    return ssim(sobel(grey(inp)), sobel(grey(out)))


def sized(img: Image.Image):
    w, h = img.size
    s = SHORT_SIDE / min(w, h)
    return img.resize((int(round(w * s / 4)) * 4, int(round(h * s / 4)) * 4), Image.BILINEAR)


class Student:
    def __init__(self, manifest_path):
        import openvino as ov
        m = json.load(open(manifest_path))
        path = os.path.join(os.path.dirname(manifest_path), m["model"])
        self.core = ov.Core()
        self.model = self.core.read_model(path)
        self.compiled = {}

    def run(self, img: np.ndarray) -> np.ndarray:
        h, w = img.shape[:2]
        if (h, w) not in self.compiled:
            model = self.model.clone()
            model.reshape([1, 3, h, w])
            self.compiled[(h, w)] = self.core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        x = (img.astype(np.float32) / 255.0).transpose(2, 0, 1)[None]
        y = list(self.compiled[(h, w)]([x]).values())[0][0].transpose(1, 2, 0)
        return np.clip(np.round(y * 255), 0, 255).astype(np.uint8)


def teacher_run(teach, img: np.ndarray) -> np.ndarray:
    h, w = img.shape[:2]
    x = np.asarray(Image.fromarray(img).resize((384, 384), Image.BILINEAR), np.float32) / 255.0
    y = (teach(x) * 255).round().astype(np.uint8)
    return np.asarray(Image.fromarray(y).resize((w, h), Image.BILINEAR))


def flicker(fn, img, frames=24, seed=7):
    rng = np.random.default_rng(seed)
    outs, ins = [], []
    for _ in range(frames):
        noisy = np.clip(img.astype(np.float32) + rng.normal(0, 2, img.shape), 0, 255).round().astype(np.uint8)
        ins.append(noisy)
        outs.append(fn(noisy).astype(np.float32))
    d = [np.abs(a - b).mean() for a, b in zip(outs[1:], outs[:-1])]
    di = [np.abs(a.astype(np.float32) - b).mean() for a, b in zip(ins[1:], ins[:-1])]
    return float(np.mean(d)), float(np.mean(di))


def timing(manifest_path, precision=None, runs=30):
    import openvino as ov
    m = json.load(open(manifest_path))
    core = ov.Core()
    model = core.read_model(os.path.join(os.path.dirname(manifest_path), m["model"]))
    model.reshape([1, 3, 180, 320])
    cfg = {"INFERENCE_NUM_THREADS": "1"}
    if precision:
        cfg["INFERENCE_PRECISION_HINT"] = precision
    c = core.compile_model(model, "CPU", cfg)
    x = np.random.default_rng(0).random((1, 3, 180, 320), np.float32)
    for _ in range(3):
        c([x])
    t = []
    for _ in range(runs):
        s = time.perf_counter()
        c([x])
        t.append((time.perf_counter() - s) * 1000)
    return float(np.median(t))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("manifests", nargs="+")
    p.add_argument("--photos", default="")
    p.add_argument("--teacher", default=teacher_mod.default_folder(ROOT))
    p.add_argument("--out", default="")
    p.add_argument("--before", default="", help="git revision: each style as it was there, measured beside")
    a = p.parse_args(argv)
    folder = a.photos or content.default_folder(ROOT)
    photos = {n: np.asarray(sized(Image.open(os.path.join(folder, n)).convert("RGB"))) for n in EVAL_PHOTOS}
    feats = Features()
    rows = []
    for mpath in a.manifests:
        m = json.load(open(mpath))
        tr = m["training"]
        style_img = load_style(tr["style_image"])
        style_grams = feats.grams(np.asarray(sized(style_img)))
        teach = teacher_mod.Teacher(a.teacher, style_img, tr["strength"], tr["density"])
        student = Student(mpath)
        before = Student(manifest_at(a.before, mpath)) if a.before else None
        for name, img in photos.items():
            s_out, t_out = student.run(img), teacher_run(teach, img)
            row = {
                "style": m["name"], "photo": name,
                "style_distance": {"input": style_distance(feats, img, style_grams),
                                   "student": style_distance(feats, s_out, style_grams),
                                   "teacher": style_distance(feats, t_out, style_grams)},
                "edge_ssim": {"student": edge_ssim(img, s_out), "teacher": edge_ssim(img, t_out)},
            }
            if before:
                b_out = before.run(img)
                row["style_distance"]["before"] = style_distance(feats, b_out, style_grams)
                row["edge_ssim"]["before"] = edge_ssim(img, b_out)
            if name == EVAL_PHOTOS[0]:
                row["flicker"] = {"student": flicker(student.run, img)[0], "teacher": flicker(lambda z: teacher_run(teach, z), img)[0],
                                  "input": flicker(lambda z: z, img)[1]}
                if before:
                    row["flicker"]["before"] = flicker(before.run, img)[0]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
        rows.append({"style": m["name"], "ms_320x180": {"student_default": timing(mpath), "student_f32": timing(mpath, "f32")},
                     "size_kb": os.path.getsize(os.path.join(os.path.dirname(mpath), m["model"])) / 1024})
        print(json.dumps(rows[-1]), file=sys.stderr)
    if a.out:
        write_report(rows, a.out, a.manifests, a.before)
    return rows


def manifest_at(rev, manifest_path):
    """A style's manifest and network as they were at git revision `rev`, in a temporary folder."""
    import subprocess
    import tempfile
    rel = os.path.relpath(os.path.abspath(manifest_path), ROOT)
    folder = tempfile.mkdtemp(prefix="style-before-")

    def show(path):
        r = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{path}"], capture_output=True)
        if r.returncode != 0:
            raise SystemExit(f"evaluate.py: --before {rev}: git show {rev}:{path}: {r.stderr.decode().strip()}")
        return r.stdout

    text = show(rel)
    model = json.loads(text)["model"]
    with open(os.path.join(folder, os.path.basename(rel)), "wb") as f:
        f.write(text)
    with open(os.path.join(folder, model), "wb") as f:
        f.write(show(os.path.join(os.path.dirname(rel), model)))
    return os.path.join(folder, os.path.basename(rel))


def write_report(rows, out, manifests, before=""):
    b = f"before ({before}) / " if before else ""
    lines = ["# Trained styles: quality against the teacher", "",
             "Made by `make style-report` (tools/train_style/evaluate.py; see its docstring for each measure).",
             "Photos at short side 256. Style distance: lower is closer to the style image (the photo's own",
             "distance is the no-style reference). Edge SSIM: 1 keeps every edge. Flicker: mean absolute",
             "change between consecutive outputs (0–255) on a still, noisy scene."
             + (f" Before: the same style as it was at {before}." if before else ""), "",
             f"| style | photo | style distance: photo / {b}student / teacher | edge SSIM: {b}student / teacher | flicker: input / {b}student / teacher |",
             "|---|---|---|---|---|"]

    def figures(d, *keys):
        return " / ".join(f"{d[k]:.3f}" for k in keys if k in d)

    for r in rows:
        if "photo" not in r:
            continue
        sd, es = r["style_distance"], r["edge_ssim"]
        fl = r.get("flicker")
        fls = " / ".join(f"{fl[k]:.2f}" for k in ("input", "before", "student", "teacher") if k in fl) if fl else ""
        lines.append(f"| {r['style']} | {r['photo']} | {figures(sd, 'input', 'before', 'student', 'teacher')} | "
                     f"{figures(es, 'before', 'student', 'teacher')} | {fls} |")
    lines += ["", "| style | model size | 320x180 frame, 1 thread: default precision / f32 (median of 30) |", "|---|---|---|"]
    for r in rows:
        if "ms_320x180" in r:
            lines.append(f"| {r['style']} | {r['size_kb']:.0f} KB | {r['ms_320x180']['student_default']:.1f} ms / {r['ms_320x180']['student_f32']:.1f} ms |")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
