#!/usr/bin/env python3
"""The benchmark report of one `make bench` run (bench/all.sh runs it in .deps/bench-venv).

Usage: report.py RESULTS_DIR --markdown bench/REPORT.md --chart bench/report.png

Reads what the benchmarks measured, RESULTS_DIR/{run,bridge,detect,stylize,live,multi,precision}.tsv
(bench/lib.sh results_open: "key<TAB>value" lines, one figure per run in space-separated lists),
and writes a Markdown report (the machine, the settings, a table of medians and ratios, each
benchmark's details and its own printed output) and a PNG chart (fps per pipeline against the
baselines; the live latencies against the lenspass baseline and the goal bound).

Design choices:
- Every median and ratio is computed here from the per-run figures in the files, the baselines'
  included: nothing is copied from a benchmark's printed table, nothing is typed in. The goals
  are the ones each benchmark wrote into its file (goal.*) or, for the live latency, the bound
  bench/live_peer.py computed from the same run's figures.
- A file from another run (its run_id differs from run.tsv's) is not used: the report says so.
  A file without a "status" line is a benchmark that stopped part-way; a non-zero status is one
  where a run failed. Both are reported, with whatever figures the file holds.
- The ratios here use the unrounded medians; the benchmarks' printed ratios use fps rounded to
  0.1, so the two may differ in the last digit.
"""
import argparse
import os
import statistics
import sys

BENCHES = ("bridge", "detect", "stylize", "live", "multi", "precision")
# The scripts' own defaults, for the header: a setting below its largest default makes a short run.
DEFAULTS = {"RUNS": (7, "7 for bridge, 3 for detect and stylize"), "DURATION": (60, "60 s per live variant"),
            "FRAMES": (2000, "2000 bridge frames"), "HAAR_FRAMES": (300, "300 frames for Haar")}


def read_tsv(path):
    figures = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            key, _, value = line.rstrip("\n").partition("\t")
            if key:
                figures[key] = value
    return figures


def nums(text):
    """A space-separated list of numbers ("" for none)."""
    out = []
    for word in (text or "").split():
        try:
            out.append(float(word))
        except ValueError:
            pass
    return out


def med(text):
    values = nums(text)
    return statistics.median(values) if values else None


def num(text):
    values = nums(text)
    return values[0] if values else None


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def f(x, digits=1, unit=""):
    return "–" if x is None else f"{x:.{digits}f}{unit}"


def signed(x, digits=1, unit=""):
    return "–" if x is None else f"{x:+.{digits}f}{unit}"


def verdict(value, goal, at_least=True):
    if goal is None:
        return ""
    if value is None:
        return "n/a"
    ok = value >= goal if at_least else value <= goal
    return "met" if ok else "**missed**"


class Report:
    def __init__(self, results_dir):
        self.dir = results_dir
        run_path = os.path.join(results_dir, "run.tsv")
        if not os.path.exists(run_path):
            sys.exit(f"report: {run_path} missing (bench/all.sh writes it)")
        self.run = read_tsv(run_path)
        self.data, self.problems = {}, {}
        for b in self.run.get("benches", " ".join(BENCHES)).split():
            path = os.path.join(results_dir, f"{b}.tsv")
            if not os.path.exists(path):
                self.problems[b] = "no figures: it stopped before writing any"
                continue
            d = read_tsv(path)
            if d.get("run_id") != self.run.get("run_id"):
                self.problems[b] = f"figures from another run ({d.get('run_id')}), not used"
                continue
            self.data[b] = d
            if "status" not in d:
                self.problems[b] = "stopped part-way (its figures are incomplete)"
            elif d["status"] != "0":
                self.problems[b] = f"a run failed (exit {d['status']}); see its output below"
        self.rows = []      # the summary table
        self.fps_groups = []  # the chart's left panel: (label, [(name, fps, kind)])
        self.live_rows = []  # the chart's right panel: (variant, p50, p95, p99, bound, fps)

    # --- one function per benchmark: details (Markdown lines), summary rows, chart data ---

    def bridge(self):
        d = self.data.get("bridge")
        if not d:
            return []
        frames = num(d.get("setting.FRAMES"))
        out = ["| pattern | gst-launch-1.0 s | streamlens (lenspass) s | time ratio | added µs/frame | each run, gst-launch / streamlens (s) |",
               "|---|---:|---:|---:|---:|---|"]
        goal_ratio, goal_us = num(d.get("goal.ratio_smpte")), num(d.get("goal.added_us_black"))
        group = []
        for pattern in ("smpte", "black"):
            g, s = med(d.get(f"{pattern}.gst_launch.secs")), med(d.get(f"{pattern}.streamlens.secs"))
            r = ratio(s, g)
            # Start-up taken out when the 1-frame runs are there (bench/bridge.sh since issue 34).
            s1, g1 = med(d.get(f"{pattern}.streamlens.one_frame_secs")), med(d.get(f"{pattern}.gst_launch.one_frame_secs"))
            if s1 is not None and g1 is not None and s is not None and g is not None and frames and frames > 1:
                added = ((s - s1) - (g - g1)) / (frames - 1) * 1e6
            else:
                added = (s - g) / frames * 1e6 if s is not None and g is not None and frames else None
            out.append(f"| {pattern} | {f(g, 3)} | {f(s, 3)} | {f(r, 3, '×')} | {f(added, 1)} | "
                       f"{d.get(f'{pattern}.gst_launch.secs', '')} / {d.get(f'{pattern}.streamlens.secs', '')} |")
            fps_s, fps_g = ratio(frames, s), ratio(frames, g)
            what = f"videotestsrc pattern={pattern} → fakesink"
            if pattern == "smpte":
                self.rows.append(("bridge", what, f"{f(s, 3)} s ({f(fps_s, 0)} fps)", "gst-launch-1.0, no bridge",
                                  f"{f(g, 3)} s ({f(fps_g, 0)} fps)", f"{f(r, 3, '×')} wall time",
                                  f"≤ {f(goal_ratio, 2, '×')}", verdict(r, goal_ratio, at_least=False)))
            else:
                self.rows.append(("bridge", what, f"{f(s, 3)} s ({f(fps_s, 0)} fps)", "gst-launch-1.0, no bridge",
                                  f"{f(g, 3)} s ({f(fps_g, 0)} fps)", f"{signed(added)} µs/frame",
                                  f"≤ {f(goal_us, 0)} µs", verdict(added, goal_us, at_least=False)))
            group.append((f"bridge {pattern}", [("streamlens lenspass", fps_s, "streamlens"), ("gst-launch-1.0", fps_g, "baseline")]))
        self.fps_groups += group
        out.append("")
        out.append(f"{f(frames, 0)} frames of 1280×720 RGB per run; time ratio = streamlens / gst-launch-1.0 (median wall seconds, "
                   "process start-up in both); added µs/frame = their difference / frames.")
        return out

    def detect(self):
        d = self.data.get("detect")
        if not d:
            return []
        names = {"floor": "lenspass (floor)", "streamlens": "lensdetect", "python": "Python peer", "haar": "Haar facedetect (OpenCV)"}
        goals = {v: num(d.get(f"goal.{v}")) for v in ("floor", "python", "haar")}
        out = []
        for ending, tail in (("encode", "x264enc ! mp4mux"), ("fakesink", "fakesink")):
            out += [f"**decode → X → {tail}**", "",
                    "| X | frames | median s | fps | streamlens / X | goal | peak RSS MB | detect ms/frame | each run (s) |",
                    "|---|---:|---:|---:|---:|---|---:|---:|---|"]
            fps = {}
            for v in ("floor", "streamlens", "python", "haar"):
                secs = med(d.get(f"{ending}.{v}.secs"))
                fps[v] = ratio(num(d.get(f"{ending}.{v}.frames")), secs)
            group = []
            for v in ("streamlens", "floor", "python", "haar"):
                secs, rss, ms = med(d.get(f"{ending}.{v}.secs")), med(d.get(f"{ending}.{v}.rss_kb")), med(d.get(f"{ending}.{v}.ms"))
                r = ratio(fps["streamlens"], fps[v]) if v != "streamlens" else None
                goal = goals.get(v)
                out.append(f"| {names[v]} | {d.get(f'{ending}.{v}.frames', '')} | {f(secs, 3)} | {f(fps[v])} | "
                           f"{f(r, 2, '×') if v != 'streamlens' else ''} | {('≥ ' + f(goal, 2, '×') + ' ' + verdict(r, goal)) if goal else ''} | "
                           f"{f(rss / 1024 if rss else None, 0)} | {f(ms)} | {d.get(f'{ending}.{v}.secs', '') or 'failed'} |")
                if v != "streamlens":
                    self.rows.append(("detect", f"decode → lensdetect → {tail}", f"{f(fps['streamlens'])} fps", names[v],
                                      f"{f(fps[v])} fps", f(r, 2, "×"), f"≥ {f(goal, 2, '×')}" if goal else "–", verdict(r, goal)))
                group.append(({"streamlens": "lensdetect"}.get(v, names[v]), fps[v],
                              {"streamlens": "streamlens", "floor": "floor", "python": "python", "haar": "other"}[v]))
            self.fps_groups.append((f"detect → {ending}", group))
            if d.get(f"{ending}.streamlens.summary"):
                out += ["", f"lensdetect's own summary (one more run without -q): `{d[f'{ending}.streamlens.summary']}`"]
            # CenterFace (Models/centerface.json, 640×384): its cost beside BlazeFace's, no goal.
            if d.get(f"{ending}.centerface.secs") is not None:
                cf = ratio(num(d.get(f"{ending}.centerface.frames")), med(d.get(f"{ending}.centerface.secs")))
                out += ["", f"CenterFace 640×384 (lensdetect model=Models/centerface.json): {f(cf)} fps, "
                            f"{f(med(d.get(f'{ending}.centerface.ms')))} ms per frame (inference median), "
                            f"each run (s) {d.get(f'{ending}.centerface.secs') or 'failed'}"]
            # Detection plus MediaPipe's face mesh on every face (lensclassify), 1 and 2 faces, no goal.
            if d.get(f"{ending}.landmarks.secs") is not None:
                l1 = ratio(num(d.get(f"{ending}.landmarks.frames")), med(d.get(f"{ending}.landmarks.secs")))
                l2 = ratio(num(d.get(f"{ending}.landmarks2.frames")), med(d.get(f"{ending}.landmarks2.secs")))
                out += ["", f"lensdetect ! lensclassify model=Models/face-mesh.json (468 landmarks a face): {f(l1)} fps with one face, "
                            f"{f(l2)} fps with two"]
            out.append("")
        out.append("1280×720 30 fps H.264 clip of a face (300 frames; Haar on HAAR_FRAMES of them), decoded to BGRx. "
                   "fps = frames / median wall seconds, each run a whole process (start-up and model loading included). "
                   "In the fakesink ending the floor is decoding alone.")
        return out

    def stylize(self):
        d = self.data.get("stylize")
        if not d:
            return []
        if d.get("skipped"):
            self.rows.append(("stylize", "skipped", d["skipped"], "", "", "", "", ""))
            return [f"Skipped: {d['skipped']}"]
        frames = num(d.get("frames"))
        raw_ms = med(d.get("raw.ms"))
        raw_fps = ratio(1000.0, raw_ms)
        goals = {"raw": num(d.get("goal.raw")), "python": num(d.get("goal.python"))}
        names = {"floor": "lenspass (floor)", "streamlens": "lensstylize", "python": "Python peer", "small": "lensstylize at 640×480"}
        out = []
        fps = {}
        for ending, tail in (("encode", "x264enc ! mp4mux"), ("fakesink", "fakesink")):
            out += [f"**decode → X → {tail}**", "",
                    "| X | frame | median s | fps | streamlens / X | goal | own ms/frame (shrink, inference, output, scale+blend) | peak RSS MB | each run (s) |",
                    "|---|---|---:|---:|---:|---|---|---:|---|"]
            variants = ["floor", "streamlens", "python"] + (["small"] if ending == "fakesink" else [])
            for v in variants:
                fps[(ending, v)] = ratio(frames, med(d.get(f"{ending}.{v}.secs")))
            s = fps[(ending, "streamlens")]
            r_raw = ratio(s, raw_fps)
            out.append(f"| OpenVINO benchmark_app (raw inference, {d.get('raw.precision', '?')}) | {d.get('setting.SIZE', '')} | – | "
                       f"{f(raw_fps)} | {f(r_raw, 2, '×')} | ≥ {f(goals['raw'], 2, '×')} {verdict(r_raw, goals['raw'])} | "
                       f"{f(raw_ms)} (median latency) | – | {d.get('raw.ms', '')} ms |")
            for v in variants:
                r = ratio(s, fps[(ending, v)]) if v not in ("streamlens", "small") else None
                goal = goals.get(v)
                parts = [med(d.get(f"{ending}.{v}.{k}")) for k in ("shrink", "infer", "output", "blend")]
                own = med(d.get(f"{ending}.{v}.ms"))
                own_text = "–" if own is None else f"{f(own)} ({', '.join(f(p) for p in parts if p is not None)})"
                rss = med(d.get(f"{ending}.{v}.rss_kb"))
                out.append(f"| {names[v]} | {'640×480' if v == 'small' else '1280×720'} | {f(med(d.get(f'{ending}.{v}.secs')), 3)} | "
                           f"{f(fps[(ending, v)])} | {f(r, 2, '×') if r is not None else ''} | "
                           f"{('≥ ' + f(goal, 2, '×') + ' ' + verdict(r, goal)) if goal else ''} | {own_text} | "
                           f"{f(rss / 1024 if rss else None, 0)} | {d.get(f'{ending}.{v}.secs', '') or 'failed'} |")
            self.rows.append(("stylize", f"decode → lensstylize 320×180 → {tail}", f"{f(s)} fps", "raw inference (benchmark_app)",
                              f"{f(raw_fps)} fps", f(r_raw, 2, "×"), f"≥ {f(goals['raw'], 2, '×')}", verdict(r_raw, goals["raw"])))
            for v in ("python", "floor"):
                r = ratio(s, fps[(ending, v)])
                goal = goals.get(v)
                self.rows.append(("stylize", f"decode → lensstylize 320×180 → {tail}", f"{f(s)} fps", names[v],
                                  f"{f(fps[(ending, v)])} fps", f(r, 2, "×"), f"≥ {f(goal, 2, '×')}" if goal else "–", verdict(r, goal)))
            group = [("lensstylize", s, "streamlens"), ("lenspass (floor)", fps[(ending, "floor")], "floor"),
                     ("Python peer", fps[(ending, "python")], "python"), ("raw inference", raw_fps, "raw")]
            if ending == "fakesink":
                group.insert(1, ("lensstylize 640×480", fps[(ending, "small")], "streamlens2"))
                self.rows.append(("stylize", "640×480 clip → fakesink", f"{f(fps[(ending, 'small')])} fps", "the 1280×720 clip",
                                  f"{f(s)} fps", f(ratio(fps[(ending, 'small')], s), 2, "×"), "–", ""))
            self.fps_groups.append((f"stylize → {ending}", group))
            out.append("")
        fl = {k: num(d.get(f"flicker.{k}.change")) for k in ("input", "smoothing0", "smoothing0.8")}
        red = ratio(fl["smoothing0"], fl["smoothing0.8"])
        self.rows.append(("stylize", "flicker, noisy still (mean abs change between frames)", f"{f(fl['smoothing0.8'], 2)} (smoothing=0.8)",
                          "smoothing=0", f(fl["smoothing0"], 2), f"{f(red, 2, '×')} less", "–", ""))
        out += [f"Output check (frame 150 vs the input, mean abs difference 0..255, > 20 = stylized): floor {d.get('check.floor.changed') or '?'}, "
                f"lensstylize {d.get('check.streamlens.changed') or '?'}, Python peer {d.get('check.python.changed') or '?'}.",
                "",
                f"Flicker ({d.get('setting.FLICKER_FRAMES', '?')} frames of a still 640×360 photo with temporal noise; mean abs change between "
                f"consecutive frames, 0..255): input {f(fl['input'], 2)}, smoothing=0 {f(fl['smoothing0'], 2)}, smoothing=0.8 "
                f"{f(fl['smoothing0.8'], 2)}: smoothing reduces it {f(red, 2, '×')}.",
                "",
                "Magenta style transfer (Munch) at 320×180 on a 1280×720 clip of photos (300 frames). fps = frames / median wall "
                "seconds, whole processes (start-up, style prediction, compile or cache load included); raw fps = 1000 / "
                "benchmark_app's median latency (random inputs, no pre- or post-processing)."]
        return out

    def live(self):
        d = self.data.get("live")
        if not d:
            return []
        variants = d.get("setting.VARIANTS", "").split()
        names = {"pass": "lenspass", "detect": "lensdetect", "stylize": "lensstylize 320×180"}
        out = ["| X | fps | missing | p50 ms | p95 ms | p99 ms | max ms | p50 − lenspass p50 | p95 bound | p95 goal | inference ms | stage drops | "
               f"RSS MB at {d.get('setting.RSS_AT', '?')} s → end | growth | CPU % | other load % |",
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|"]
        base = num(d.get("latency_base_p50"))
        rss_goal = num(d.get("goal.rss_growth_pct"))
        for v in variants:
            if d.get(f"{v}.failed"):
                out.append(f"| {names.get(v, v)} | failed: {d.get(f'{v}.note') or d[f'{v}.failed']} |" + " |" * 14)
                self.rows.append(("live", f"{names.get(v, v)} → lensrtsp → RTSP client", "failed", "", "", "", "", "**failed**"))
                continue
            p50, p95, p99, mx = (num(d.get(f"{v}.{k}")) for k in ("p50", "p95", "p99", "max"))
            fps, bound, growth = num(d.get(f"{v}.fps")), num(d.get(f"{v}.p95_bound")), num(d.get(f"{v}.rss_growth_pct"))
            added = p50 - base if p50 is not None and base is not None and v != "pass" else None
            rss_a, rss_e = num(d.get(f"{v}.rss_at_mb")), num(d.get(f"{v}.rss_end_mb"))
            out.append(f"| {names.get(v, v)} | {f(fps)} | {d.get(f'{v}.missing', '')} | {f(p50)} | {f(p95)} | {f(p99)} | {f(mx)} | "
                       f"{signed(added) if v != 'pass' else ''} | {f(bound) if bound else ''} | "
                       f"{verdict(p95, bound, at_least=False) if bound else ''} | {f(num(d.get(f'{v}.stage.inference')))} | "
                       f"{d.get(f'{v}.stage.dropped', '')} | {f(rss_a)} → {f(rss_e)} | {signed(growth, 1, '%')} | {f(num(d.get(f'{v}.cpu_pct')), 0)} | {f(num(d.get(f'{v}.other_pct')), 0)} |")
            pipe = f"live 30 fps → {names.get(v, v)} → lensrtsp → RTSP client"
            if v == "pass":
                self.rows.append(("live", pipe, f"p50 {f(p50)} ms, p95 {f(p95)} ms, {f(fps)} fps", "(the latency baseline)", "", "", "–", ""))
            else:
                self.rows.append(("live", pipe, f"p95 {f(p95)} ms", "1.5 × (inference + 33.3 ms) + lenspass p50",
                                  f"{f(bound)} ms", f(ratio(p95, bound), 2, "×"), "≤ 1×", verdict(p95, bound, at_least=False)))
                self.rows.append(("live", pipe, f"p50 {f(p50)} ms", "lenspass p50", f"{f(base)} ms",
                                  f"{signed(added)} ms", "–", ""))
            self.rows.append(("live", f"{names.get(v, v)}: server RSS", f"{f(rss_e)} MB at {f(num(d.get(f'{v}.rss_end_s')), 0)} s (the end)",
                              f"its RSS at {f(num(d.get(f'{v}.rss_at_s')), 0)} s", f"{f(rss_a)} MB",
                              signed(growth, 1, "%"), f"≤ +{f(rss_goal, 0, '%')}",
                              verdict(growth, rss_goal, at_least=False)))
            self.live_rows.append((names.get(v, v), p50, p95, p99, bound, fps))
        for line in [d[k] for k in d if k == "skipped"]:
            out += ["", line]
        out += ["", f"A live 30 fps 1280×720 source stamps a time code into the pixels; glass-to-client latency is read back by an RTSP "
                f"player on loopback; {d.get('setting.DURATION', '?')} s measured per variant after {d.get('setting.WARMUP', '?')} s warm-up, "
                "one run per variant. p95 bound = 1.5 × (the stage's inference median + 33.3 ms) + lenspass p50 of this run "
                "(bench/live_peer.py). RSS growth from the sample at RSS_AT s to the last (RSS_AT is 10 s, DURATION/3 in "
                "a window under 15 s); CPU % of streamlens (200 % = both cores); other load %: the machine's busy time minus "
                "streamlens, the source and the client over the window, i.e. other work disturbing the run."]
        return out

    # --- the chart ---

    def chart(self, path):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        colors = {"streamlens": "#1f5fbf", "streamlens2": "#6f9be0", "floor": "#9a9a9a", "baseline": "#9a9a9a",
                  "python": "#e08a1e", "other": "#c0392b", "raw": "#2e9e4f"}
        fig, (left, right) = plt.subplots(1, 2, figsize=(15, 7.5), gridspec_kw={"width_ratios": [1.35, 1]})
        # Left: fps, log scale (the bridge runs at hundreds of fps, the Haar detector at a few).
        y, ticks, labels = 0.0, [], []
        for label, bars in reversed(self.fps_groups):
            bars = [b for b in bars if b[1] is not None]
            n = len(bars)
            for i, (name, value, kind) in enumerate(reversed(bars)):
                yy = y + i * 0.8 / max(n, 1)
                left.barh(yy, value, height=0.8 / max(n, 1) * 0.9, color=colors[kind])
                left.text(value * 1.04, yy, f"{name} {value:.1f}", va="center", fontsize=7)
            ticks.append(y + 0.4 - 0.4 / max(n, 1))
            labels.append(label)
            y += 1.15
        left.set_xscale("log")
        left.set_yticks(ticks, labels)
        lo = min([b[1] for _, bars in self.fps_groups for b in bars if b[1]] or [1])
        hi = max([b[1] for _, bars in self.fps_groups for b in bars if b[1]] or [10])
        left.set_xlim(lo / 2, hi * 8)
        left.set_xlabel("frames per second (log scale; median of the runs, whole processes)")
        left.set_title("Throughput: StreamLens (blue) vs baselines measured in the same run")
        left.grid(axis="x", which="both", alpha=0.25)
        # Right: live glass-to-client latency per variant.
        if self.live_rows:
            xs = range(len(self.live_rows))
            width = 0.25
            for j, (name, color) in enumerate((("p50", "#6f9be0"), ("p95", "#1f5fbf"), ("p99", "#0b2f6b"))):
                vals = [row[1 + j] or 0 for row in self.live_rows]
                bars = right.bar([x + (j - 1) * width for x in xs], vals, width, color=color, label=name)
                right.bar_label(bars, fmt="%.0f", fontsize=7)
            goal_label = "p95 goal (bound from this run)"
            for x, row in zip(xs, self.live_rows):
                if row[4]:
                    right.hlines(row[4], x - 1.6 * width, x + 1.6 * width, colors="#c0392b", linestyles="--", label=goal_label)
                    goal_label = None
            right.set_xticks(list(xs), [row[0] + (f"\n{row[5]:.1f} fps delivered" if row[5] is not None else "")
                                        + (f"\np95 goal ≤ {row[4]:.0f} ms" if row[4] else "") for row in self.live_rows])
            right.set_ylabel("glass-to-client latency, ms")
            right.set_title("Live glass-to-client latency via lensrtsp (lenspass = baseline)")
            right.legend(loc="upper left", fontsize=8)
            right.grid(axis="y", alpha=0.25)
        else:
            right.text(0.5, 0.5, "no live figures in this run", ha="center", va="center")
            right.set_axis_off()
        fig.suptitle(f"StreamLens benchmarks, {self.run.get('started', '')[:16].replace('T', ' ')}, "
                     f"commit {self.run.get('git.commit', '?')[:10]}, {self.run.get('machine.cpu', '?')}"
                     + (f"  [SHORT RUN: {self.overrides()}]" if self.short_run() else
                        f"  [{self.overrides()}]" if self.overrides() else ""), fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)

    def overrides(self):
        """The settings given to `make bench` (none: every benchmark's defaults)."""
        return " ".join(f"{k[len('setting.'):]}={v}" for k, v in self.run.items() if k.startswith("setting."))

    def short_run(self):
        """Is any setting below a benchmark's default (fewer runs, shorter windows, fewer frames)?"""
        for name, (default, _) in DEFAULTS.items():
            value = num(self.run.get(f"setting.{name}"))
            if value is not None and value < default:
                return True
        return False

    # --- the Markdown ---

    def multi(self):
        d = self.data.get("multi")
        if not d:
            return []
        frames = num(d.get("frames"))
        names = {"demo": "the demo", "base": f"the demo of {d.get('base_commit', 'the base')}", "floor": "floor (model stages → identity)",
                 "decode": "decode alone", "detect": "lensdetect alone", "mosaic": "lensstylize mosaic alone",
                 "waves": "lensstylize waves alone", "embers": "lensstylize embers alone"}
        out = ["| pipeline | median s | fps | CPU s (user+sys) | each run (s) |", "|---|---:|---:|---:|---|"]
        fps = {}
        for v in names:
            secs = med(d.get(f"{v}.secs"))
            if secs is None:
                continue
            fps[v] = ratio(frames, secs)
            out.append(f"| {names[v]} | {f(secs, 2)} | {f(fps[v])} | {f(med(d.get(f'{v}.cpu')), 1)} | {d.get(f'{v}.secs', '')} |")
        ideal = num(d.get("ideal_fps"))
        of_ideal = ratio(fps.get("demo"), ideal)
        out += ["", f"Ideal from the solo costs: ({f(med(d.get('floor.cpu')), 1)} s floor CPU + {d.get('own_cpu', '?')} s the branches' own) / "
                f"{d.get('cores', '?')} cores = {d.get('ideal_secs', '?')} s = {f(ideal)} fps; demo / ideal {f(of_ideal, 2)}.", ""]
        self.rows.append(("multi", "the demo (4 models)", f"{f(fps.get('demo'))} fps", "ideal from solo costs", f"{f(ideal)} fps",
                          f(of_ideal, 2, "×"), "≥ 0.85×", verdict(of_ideal, 0.85)))
        if "base" in fps:
            r = ratio(fps["demo"], fps["base"])
            self.rows.append(("multi", "the demo (4 models)", f"{f(fps['demo'])} fps", names["base"], f"{f(fps['base'])} fps",
                              f(r, 2, "×"), "≥ 1.60×", verdict(r, 1.6)))
        else:
            out += ["No baseline: the base commit could not be built here (see its messages).", ""]
        self.fps_groups.append(("several models", [(names[v], fps[v], {"demo": "streamlens", "floor": "floor"}.get(v, "other"))
                                                   for v in ("demo", "base", "floor") if v in fps]))
        if d.get("summaries"):
            out += ["The demo's stage summaries (one more run):", ""] + [f"- `{line}`" for line in d["summaries"].split("|") if line.strip()]
        return out

    def precision(self):
        d = self.data.get("precision")
        if not d:
            return []
        out = ["| model | f32 ms | bf16 ms | f16 ms | fastest fixed | precision=auto chose (rounds) | auto / fastest (worst round) |",
               "|---|---:|---:|---:|---|---|---:|"]
        worst = None
        for m in (d.get("models") or "").split():
            r = num(d.get(f"{m}.auto_over_best"))
            worst = r if worst is None or (r is not None and r > worst) else worst
            # "=bf16": the hint compiles to that precision on this CPU (not a precision of its own).
            cell = lambda v: v if v and v.startswith("=") else f(num(v), 2)
            out.append(f"| {m} | " + " | ".join(cell(d.get(f"{m}.{p}")) for p in ("f32", "bf16", "f16"))
                       + f" | {d.get(f'{m}.best', '?')} | {d.get(f'{m}.chose', '?')} | {f(r, 3)} |")
        out += ["", "Times: OpenVINO's benchmark_app, median latency of a synchronous inference of the network alone at the "
                "stage's input size (a thread per core, one stream, not pinned), median of the rounds, the precisions' order "
                "turned each round; \"=bf16\": that hint runs as bf16 on this CPU (its times count as bf16's). Auto: the stage "
                "started in a fresh cache folder each round; its cost is the reference's time for the precision it chose.", ""]
        self.rows.append(("precision", "precision=auto, the model furthest from its fastest fixed precision", f(worst, 3, "×"),
                          "the fastest fixed precision", "1.000×", f(worst, 3, "×"), "≤ 1.05×", verdict(worst, 1.05, at_least=False)))
        return out

    def markdown(self, chart_name):
        sections = [("Bridge overhead (`make bench-bridge`)", "bridge", self.bridge()),
                    ("Face detection (`make bench-detect`)", "detect", self.detect()),
                    ("Style transfer (`make bench-stylize`)", "stylize", self.stylize()),
                    ("Live latency over RTSP (`make bench-live`)", "live", self.live()),
                    ("Several models in one process (`make bench-multi`)", "multi", self.multi()),
                    ("precision=auto against fixed precisions (`make bench-precision`)", "precision", self.precision())]
        r = self.run
        ram = num(r.get("machine.ram_kb"))
        short = self.overrides()
        lines = ["# StreamLens benchmark report", "",
                 "Written by `make bench` (bench/all.sh → bench/report.py) from the figures the benchmarks measured in one run; "
                 "every median and ratio below is computed from those figures, the baselines measured in the same run.", ""]
        defaults = "; ".join(f"{name}: {text}" for name, (_, text) in DEFAULTS.items())
        if self.short_run():
            lines += [f"> **Short-run settings: {short}.** Fewer runs, shorter windows or fewer frames than the benchmarks' "
                      f"defaults ({defaults}): a quick look, noisier than a full `make bench`.", ""]
        elif short:
            lines += [f"> Settings given: {short} (defaults: {defaults}).", ""]
        lines += ["| | |", "|---|---|",
                  f"| Date | {r.get('started', '?')} → {r.get('ended', '?')} ({f(num(r.get('seconds')), 0)} s) |",
                  f"| CPU | {r.get('machine.cpu', '?')} |",
                  f"| vCPUs | {r.get('machine.vcpus', '?')} |",
                  f"| RAM | {f(ram / 1024 / 1024 if ram else None, 1)} GiB |",
                  f"| OS, kernel | {r.get('machine.os', '?')}, {r.get('machine.kernel', '?')} |",
                  f"| GStreamer | {r.get('machine.gstreamer', '?')} |",
                  f"| OpenVINO | {r.get('machine.openvino', '?')} |",
                  f"| Swift | {r.get('machine.swift', '?')} |",
                  f"| Commit | {r.get('git.commit', '?')} ({r.get('git.subject', '')})"
                  + (f"; tracked files changed since: {r['git.changed']}" if r.get("git.changed") else "") + " |",
                  f"| Binary | {r.get('binary', '?')} |",
                  f"| Load average (1, 5, 15 min) | {r.get('load_start', '?')} at the start, {r.get('load_end', '?')} at the end (a shared machine) |",
                  f"| Settings | {short or 'the benchmarks’ defaults'} |", ""]
        lines += ["| benchmark | wall time | load average start → end | settings used | status |", "|---|---:|---|---|---|"]
        for b in r.get("benches", "").split():
            d = self.data.get(b, {})
            settings = " ".join(f"{k[len('setting.'):]}={v}" for k, v in d.items() if k.startswith("setting."))
            status = self.problems.get(b, "ok")
            lines.append(f"| {b} | {r.get(f'{b}.seconds', '?')} s | {r.get(f'{b}.load_start', '?')} → {r.get(f'{b}.load_end', '?')} | "
                         f"{settings} | {status if status == 'ok' else '**' + status + '**'} |")
        body = []
        for title, name, detail in sections:
            body += [f"## {title}", ""]
            problem = self.problems.get(name, "not run (not in BENCHES)")
            body += detail if detail else [f"{problem[0].upper()}{problem[1:]}."]
            body.append("")
            err = os.path.join(self.dir, f"{name}.err")
            if name in self.problems and os.path.exists(err):
                tail = open(err, encoding="utf-8", errors="replace").read().rstrip().splitlines()[-15:]
                body += [f"Its last messages (bench/{name}.sh, stderr):", "", "```", *tail, "```", ""]
        lines += ["", "## Summary: medians and ratios against the same run's baselines", "",
                  f"![fps per pipeline against the baselines; live latency against lenspass and the goal bound]({chart_name})", "",
                  "| benchmark | pipeline | StreamLens | baseline | baseline figure | ratio | goal | verdict |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {' | '.join(row)} |" for row in self.rows]
        lines += ["", "Ratios of fps are StreamLens / baseline (higher is better); the bridge's is wall time (lower is better). "
                  "Medians of the runs (RUNS interleaved rounds; the live figures are one run per variant).", ""]
        lines += body
        lines += ["## Each benchmark's own output", ""]
        for b in r.get("benches", "").split():
            path = os.path.join(self.dir, f"{b}.out")
            text = open(path, encoding="utf-8").read().rstrip() if os.path.exists(path) else "(none)"
            lines += [f"<details><summary>bench/{b}.sh</summary>", "", "```", text, "```", "", "</details>", ""]
        return "\n".join(lines).rstrip() + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--markdown", required=True)
    ap.add_argument("--chart", required=True)
    a = ap.parse_args()
    report = Report(a.results)
    text = report.markdown(os.path.relpath(a.chart, os.path.dirname(os.path.abspath(a.markdown))))
    report.chart(a.chart)
    with open(a.markdown, "w", encoding="utf-8") as fh:
        fh.write(text)
    for b, problem in report.problems.items():
        print(f"report: {b}: {problem}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
