#!/usr/bin/env python3
"""make bench-remote: local vs remote (device=remote) detection and stylization on loopback.

One tritonserver (NVIDIA PyTriton's, tools/remote/serve.py, f32 OpenVINO behind it) serves the
short-range face detector and the mosaic style. Against it, in the same run:

  * the reference client (NVIDIA's tritonclient.http, binary tensors; tools/remote/reference_client.py)
    times the same requests StreamLens sends: the server's own round trip;
  * streamlens runs a 640x360 clip (300 frames, a moving face) through lensdetect and
    lensstylize, local (OpenVINO here) and remote (in-flight 1 and 4), 1 and 4 processes at once
    against the one server, lossless, into fakesink.

Printed: fps per process (median of RUNS), the stage's frame time p50/p95 (arrival to leaving,
the latency it adds), round trip p50/p95, bytes per request on the wire, and the protocol
overhead per request = StreamLens's round trip (in-flight 1) - the reference client's (goal:
<= 2 ms for the 128x128 detector input). Figures also go to out/bench/results/remote.tsv.

Usage: .deps/triton-venv/bin/python bench/remote.py path/to/streamlens
Environment: RUNS (3), PORT (18990), FRAMES (300), PROCESSES ("1 4").
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import models as model_store  # noqa: E402  (tools/models.py: where `streamlens models fetch` installs)
BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else sys.exit(__doc__)
RUNS = int(os.environ.get("RUNS", "3"))
PORT = int(os.environ.get("PORT", "18990"))
FRAMES = int(os.environ.get("FRAMES", "300"))
PROCESSES = [int(p) for p in os.environ.get("PROCESSES", "1 4").split()]
PY = os.path.join(ROOT, ".deps/triton-venv/bin/python")
SERVER = f"http://127.0.0.1:{PORT}"


def make_clip(folder):
    clip = os.path.join(folder, "face.mp4")
    seconds = FRAMES / 30
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"color=c=gray:s=640x360:r=30:d={seconds}",
                    "-loop", "1", "-i", os.path.join(ROOT, ".deps/media/astronaut.png"), "-filter_complex",
                    f"[1]crop=240:240:140:0,scale=300:300[a];[0][a]overlay=x='20+mod(t*150\\,320)':y=30:shortest=1,format=yuv420p",
                    "-frames:v", str(FRAMES), "-c:v", "libx264", "-preset", "veryfast", clip], check=True)
    return clip


def start_server(home):
    log = open(os.path.join(home, "server.log"), "w")
    p = subprocess.Popen([PY, "tools/remote/serve.py", "--port", str(PORT), "--home", home,
                          "--model", "face-short-range=" + os.path.join(model_store.store_dir(), "mediapipe-face-detection", "face_detection_short_range.tflite"),
                          "--model", "mosaic=Models/mosaic.onnx"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    ready = set()
    deadline = time.time() + 120
    while len(ready) < 2 and time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        if line.startswith("serving "):
            ready.add(line.split()[1])
    if len(ready) < 2:
        os.killpg(p.pid, signal.SIGKILL)
        sys.exit(f"bench-remote: the server did not start (see {log.name})")
    return p


def reference(model, shape, requests):
    out = subprocess.run([PY, "tools/remote/reference_client.py", "--url", f"127.0.0.1:{PORT}", "--model", model,
                          "--shape", shape, "--requests", str(requests)], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def spec(kind, clip, device, in_flight):
    common = f"precision=f32 device={device} server={SERVER} in-flight={in_flight}"
    stage = (f"lensdetect name=s {common}" if kind == "detect"
             else f"lensstylize name=s {common} inference-size=320x180")
    return f"filesrc location={clip} ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! {stage} ! fakesink"


NUMBER = r"([0-9.]+)"


def parse(stderr):
    line = next((l for l in stderr.splitlines() if l.strip().startswith("s: ") and "frames in" in l), None)
    if line is None:
        raise RuntimeError(stderr[-2000:])
    fig = {"fps": float(re.search(NUMBER + r" fps", line).group(1))}
    if m := re.search(r"frame in stage p50 " + NUMBER + r" ms p95 " + NUMBER, line):
        fig["stage_p50"], fig["stage_p95"] = float(m.group(1)), float(m.group(2))
    if m := re.search(NUMBER + r" ms a frame", line):  # lensstylize: its whole frame time (median)
        fig["stage_p50"] = float(m.group(1))
    if m := re.search(r"round trip p50 " + NUMBER + r" ms p95 " + NUMBER + r" ms, (\d+)\+(\d+) bytes", line):
        fig["rtt_p50"], fig["rtt_p95"] = float(m.group(1)), float(m.group(2))
        fig["bytes"] = int(m.group(3)) + int(m.group(4))
    return fig, line.strip()


def run_variant(kind, clip, device, in_flight, processes):
    """Median over RUNS of the per-process median of each figure."""
    rounds = []
    for _ in range(RUNS):
        procs = [subprocess.Popen([BIN, "run", spec(kind, clip, device, in_flight)], cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(processes)]
        figs = []
        for p in procs:
            _, err = p.communicate(timeout=600)
            if p.returncode != 0:
                log = os.path.join(ROOT, "out/bench/results/remote-failure.log")
                os.makedirs(os.path.dirname(log), exist_ok=True)
                with open(log, "w") as f:
                    f.write(err)
                raise RuntimeError(f"{kind} {device}: exit {p.returncode} (whole output: {log})\n{err[-1500:]}")
            figs.append(parse(err))
        rounds.append(figs)
    keys = rounds[0][0][0].keys()
    med = {k: statistics.median(statistics.median(f[0][k] for f in r) for r in rounds) for k in keys}
    med["sample"] = rounds[-1][0][1]
    return med


def main():
    folder = tempfile.mkdtemp(prefix="bench-remote-")
    clip = make_clip(folder)
    server = start_server(folder)
    rows = []
    try:
        print(f"bench-remote: {FRAMES}-frame 640x360 clip, {RUNS} runs a variant, server {SERVER} "
              f"(tritonserver from nvidia-pytriton, OpenVINO f32), load average {os.getloadavg()[0]:.2f}")
        ref_detect = reference("face-short-range", "1,128,128,3", 300)
        ref_style = reference("mosaic", "1,3,180,320", 40)
        print(f"reference client (tritonclient.http, binary): detector 128x128 p50 {ref_detect['p50_ms']:.2f} ms "
              f"p95 {ref_detect['p95_ms']:.2f} ms; mosaic 320x180 p50 {ref_style['p50_ms']:.1f} ms p95 {ref_style['p95_ms']:.1f} ms")
        header = f"{'variant':38} {'procs':>5} {'fps/proc':>9} {'frame p50':>10} {'frame p95':>10} {'rtt p50':>8} {'rtt p95':>8} {'bytes/frame':>12}"
        print(header)
        for kind in ("detect", "stylize"):
            variants = [("local (OpenVINO here)", "CPU", 1), ("remote, in-flight 1", "remote", 1), ("remote, in-flight 4", "remote", 4)]
            for label, device, in_flight in variants:
                for n in PROCESSES:
                    m = run_variant(kind, clip, device, in_flight, n)
                    name = f"{kind} {label}"
                    rows.append((name, n, m))
                    def f(k, fmt="{:.1f}"):
                        return fmt.format(m[k]) if k in m else "-"
                    print(f"{name:38} {n:5d} {m['fps']:9.1f} {f('stage_p50'):>10} {f('stage_p95'):>10} {f('rtt_p50'):>8} {f('rtt_p95'):>8} {f('bytes', '{:.0f}'):>12}", flush=True)
        one = {(r[0], r[1]): r[2] for r in rows}
        d1 = one[("detect remote, in-flight 1", 1)]
        overhead = d1["rtt_p50"] - ref_detect["p50_ms"]
        print(f"protocol overhead, detector (StreamLens round trip p50 - reference client p50, in-flight 1, 1 process): "
              f"{d1['rtt_p50']:.2f} - {ref_detect['p50_ms']:.2f} = {overhead:+.2f} ms (goal <= 2 ms)")
        s1 = one[("stylize remote, in-flight 1", 1)]
        for procs in PROCESSES:
            l, r1, r4 = (one[(f"stylize {v}", procs)] for v in ("local (OpenVINO here)", "remote, in-flight 1", "remote, in-flight 4"))
            print(f"stylize, {procs} process(es): remote/local fps {r1['fps'] / l['fps']:.2f} (in-flight 1), {r4['fps'] / l['fps']:.2f} (in-flight 4)")
        print(f"protocol overhead, mosaic 320x180: {s1['rtt_p50']:.1f} - {ref_style['p50_ms']:.1f} = {s1['rtt_p50'] - ref_style['p50_ms']:+.1f} ms")
        for procs in PROCESSES:
            l, r4 = one[("detect local (OpenVINO here)", procs)], one[("detect remote, in-flight 4", procs)]
            r1 = one[("detect remote, in-flight 1", procs)]
            print(f"detect, {procs} process(es): remote/local fps {r1['fps'] / l['fps']:.2f} (in-flight 1), {r4['fps'] / l['fps']:.2f} (in-flight 4)")
        out = os.path.join(ROOT, "out/bench/results")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "remote.tsv"), "w") as t:
            t.write("variant\tprocesses\tfps\tframe_p50_ms\tframe_p95_ms\trtt_p50_ms\trtt_p95_ms\tbytes_per_frame\n")
            for name, n, m in rows:
                t.write("\t".join([name, str(n)] + [str(m.get(k, "")) for k in ("fps", "stage_p50", "stage_p95", "rtt_p50", "rtt_p95", "bytes")]) + "\n")
            t.write(f"reference detector\t1\t\t\t\t{ref_detect['p50_ms']}\t{ref_detect['p95_ms']}\t\n")
            t.write(f"reference mosaic\t1\t\t\t\t{ref_style['p50_ms']}\t{ref_style['p95_ms']}\t\n")
        print("samples:", one[("detect remote, in-flight 4", 1)]["sample"], sep="\n  ")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
