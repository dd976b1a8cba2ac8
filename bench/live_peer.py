#!/usr/bin/env python3
"""The two ends of `make bench-live` (bench/live.sh): a live camera stand-in and an RTSP player.

  live_peer.py source SOCKET [--fps 30] [--photo PATH] [--stats FILE]
      1280x720 BGRx frames at a steady 30 fps into `appsrc is-live=true do-timestamp=true !
      shmsink socket-path=SOCKET` (shared memory: a frame crosses to the StreamLens process
      without being serialized). A photo pans slowly across the frame (something for the
      detector and the encoder to work on), and each frame carries a time code in its top-right
      corner, stamped with CLOCK_MONOTONIC just before the push. Runs until SIGINT/SIGTERM, then
      writes its own figures (JSON) to --stats.

  live_peer.py client URL --duration S [--warmup S] [--rss-pid PID] [--out FILE]
      rtspsrc latency=0 ! rtph264depay ! avdec_h264 max-threads=1 ! appsink sync=false (I420:
      the time code is read from the luma plane, no colour conversion). For every decoded frame,
      CLOCK_MONOTONIC now minus the frame's stamp is its glass-to-client latency. Measures for
      --duration seconds after --warmup seconds from the first decoded frame; samples VmRSS and
      CPU time of --rss-pid once a second. Writes JSON to --out (and a summary line on stderr).

The time code: 64 bits = sequence number (16) | CLOCK_MONOTONIC microseconds mod 2^32 (32) |
CRC-16/CCITT of those six bytes (16). Each bit is a Manchester pair of BLOCKxBLOCK squares side
by side (1: white then black, 0: black then white), 16 squares a row, 8 rows: 512x256 pixels at
the default 32-px block. The reader compares the means of each pair's inner halves, so a global
change of brightness or colour (style transfer, encoder) does not flip bits; the CRC rejects a
damaged code, which then counts as "unreadable". Both ends share CLOCK_MONOTONIC (one machine),
and the 32-bit microseconds wrap every 71 minutes: the reader unwraps against its own clock.
"""
import argparse
import json
import os
import signal
import sys
import time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstApp", "1.0")
from gi.repository import Gst, GstApp  # noqa: E402,F401

import numpy as np  # noqa: E402

W, H = 1280, 720
BITS = 64
COLS, ROWS = 16, 8          # squares: COLS x ROWS = 2 * BITS
MARGIN = 16                 # from the frame's top and right edges



def start_pipeline(description, failure):
    """Parses and plays a pipeline; exits with `failure` when it cannot start."""
    pipeline = Gst.parse_launch(description)
    if pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
        sys.exit(failure)
    return pipeline

def block_size():
    b = int(os.environ.get("LIVE_BLOCK", "32"))
    if b < 8 or b > 40:
        sys.exit("live_peer: LIVE_BLOCK must be 8..40")
    return b


def code_origin(block):
    return W - MARGIN - COLS * block, MARGIN


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def encode(seq: int, micros: int) -> np.ndarray:
    """The 64 bits, most significant first, as a uint8 array of 0/1."""
    payload = ((seq & 0xFFFF) << 32) | (micros & 0xFFFFFFFF)
    word = (payload << 16) | crc16(payload.to_bytes(6, "big"))
    return np.array([(word >> (BITS - 1 - i)) & 1 for i in range(BITS)], dtype=np.uint8)


def decode(bits: np.ndarray):
    word = 0
    for b in bits:
        word = (word << 1) | int(b)
    payload, check = word >> 16, word & 0xFFFF
    if crc16(payload.to_bytes(6, "big")) != check:
        return None
    return payload >> 32, payload & 0xFFFFFFFF


def squares(bits: np.ndarray) -> np.ndarray:
    """ROWS x COLS of 0/255: bit i -> squares 2i, 2i+1 (row-major)."""
    pairs = np.empty(2 * BITS, dtype=np.uint8)
    pairs[0::2] = bits * 255
    pairs[1::2] = (1 - bits) * 255
    return pairs.reshape(ROWS, COLS)


def load_photo(path: str) -> np.ndarray:
    """The photo as BGRx, decoded by GStreamer (no imaging library needed)."""
    p = Gst.parse_launch(f'filesrc location="{path}" ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! appsink name=s sync=false')
    p.set_state(Gst.State.PLAYING)
    sample = p.get_by_name("s").emit("pull-sample")
    if sample is None:
        sys.exit(f"live_peer: could not decode {path}")
    s = sample.get_caps().get_structure(0)
    w, h = s.get_value("width"), s.get_value("height")
    buf = sample.get_buffer()
    ok, info = buf.map(Gst.MapFlags.READ)
    stride = len(info.data) // h
    img = np.frombuffer(info.data, np.uint8).reshape(h, stride)[:, : w * 4].reshape(h, w, 4).copy()
    buf.unmap(info)
    p.set_state(Gst.State.NULL)
    return img


# --------------------------------------------------------------------------- source

def run_source(a):
    Gst.init(None)
    block = block_size()
    cx, cy = code_origin(block)
    photo = load_photo(a.photo)
    ph, pw = photo.shape[:2]
    # Background: a soft diagonal gradient (not flat, so the encoder has some texture to carry).
    yy, xx = np.mgrid[0:H, 0:W]
    base = np.zeros((H, W, 4), np.uint8)
    base[..., 0] = (60 + 80 * xx / W).astype(np.uint8)
    base[..., 1] = (70 + 60 * yy / H).astype(np.uint8)
    base[..., 2] = (90 + 50 * (xx + yy) / (W + H)).astype(np.uint8)
    base[..., 3] = 255
    # The photo pans left and right below-left of the time code, never over it.
    px_min, px_max = 32, cx - 16 - pw
    py = H - 32 - ph
    if px_max < px_min or py < 0:
        sys.exit("live_peer: the photo does not fit beside the time code")

    pipeline = start_pipeline(
        f"appsrc name=src is-live=true do-timestamp=true format=time "
        f"caps=video/x-raw,format=BGRx,width={W},height={H},framerate={a.fps}/1 "
        f"! shmsink socket-path={a.socket} wait-for-connection=false sync=false async=false shm-size={16 * W * H * 4}",
        "live_peer source: the shmsink pipeline did not start")
    src = pipeline.get_by_name("src")
    bus = pipeline.get_bus()

    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    interval = 1.0 / a.fps
    frame = base.copy()
    pushed, late, skipped, seq = 0, 0, 0, 0
    stamp_to_push = []
    t0 = time.monotonic()
    slot = 0
    print(f"live_peer source: {W}x{H} BGRx at {a.fps} fps into {a.socket}", file=sys.stderr, flush=True)
    while not stop:
        due = t0 + slot * interval
        now = time.monotonic()
        if now < due:
            time.sleep(due - now)
        elif now - due > interval:
            # More than a frame behind (the machine is busy): a camera would not deliver the
            # frames it missed either. Skip the slots, keep the cadence.
            missed = int((now - due) / interval)
            skipped += missed
            slot += missed
        elif now - due > 0.005:
            late += 1
        # Compose: background, the photo at this moment's position.
        phase = (slot * interval) % 8.0 / 8.0
        x = int(px_min + (px_max - px_min) * (0.5 - 0.5 * np.cos(2 * np.pi * phase)))
        np.copyto(frame, base)
        frame[py:py + ph, x:x + pw] = photo
        # Stamp, paint the code, push.
        t_ns = time.monotonic_ns()
        sq = squares(encode(seq, t_ns // 1000))
        frame[cy:cy + ROWS * block, cx:cx + COLS * block, :3] = np.repeat(np.repeat(sq, block, 0), block, 1)[..., None]
        buf = Gst.Buffer.new_wrapped(frame.tobytes())
        flow = src.emit("push-buffer", buf)
        stamp_to_push.append((time.monotonic_ns() - t_ns) / 1e6)
        if flow != Gst.FlowReturn.OK:
            print(f"live_peer source: push-buffer returned {flow}", file=sys.stderr, flush=True)
            break
        pushed += 1
        seq = (seq + 1) & 0xFFFF
        slot += 1
        msg = bus.pop_filtered(Gst.MessageType.ERROR)
        if msg:
            err, dbg = msg.parse_error()
            print(f"live_peer source: error: {err.message} ({dbg})", file=sys.stderr, flush=True)
            break
    elapsed = time.monotonic() - t0
    pipeline.set_state(Gst.State.NULL)
    st = sorted(stamp_to_push) or [0.0]
    stats = {"pushed": pushed, "seconds": elapsed, "fps": pushed / elapsed if elapsed > 0 else 0,
             "late": late, "skipped": skipped, "stamp_to_push_ms_p50": st[len(st) // 2],
             "stamp_to_push_ms_p95": st[min(len(st) - 1, int(0.95 * (len(st) - 1) + 0.5))]}
    print(f"live_peer source: {pushed} frames in {elapsed:.1f} s ({stats['fps']:.2f} fps), {late} late by >5 ms, "
          f"{skipped} slots skipped, stamp to push {stats['stamp_to_push_ms_p50']:.2f} ms median", file=sys.stderr, flush=True)
    if a.stats:
        with open(a.stats, "w") as f:
            json.dump(stats, f)


# --------------------------------------------------------------------------- client

def proc_sample(pid):
    """(VmRSS kB, CPU seconds, RssShmem kB) of pid, or None when it is gone. RssShmem: shared
    memory pages mapped, here mostly the source's frames (shmsrc maps the source's ring)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            status = {l.split(":")[0]: l.split()[1] for l in f if l.startswith(("VmRSS:", "RssShmem:"))}
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return int(status["VmRSS"]), cpu, int(status.get("RssShmem", 0))
    except (OSError, KeyError, IndexError, ValueError):
        return None


def machine_busy():
    """CPU seconds the whole machine spent busy so far (every core; steal included: capacity
    the hypervisor gave to someone else)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = v
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu(pids):
    """CPU seconds of these processes and of this one."""
    t = os.times()
    total = t.user + t.system
    for pid in pids:
        s = proc_sample(pid) if pid else None
        total += s[1] if s else 0
    return total


def quantile(sorted_values, q):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))]


def run_client(a):
    Gst.init(None)
    block = block_size()
    cx, cy = code_origin(block)
    lo, hi = block // 4, block - block // 4   # the inner half of each square: away from blur and ringing
    pipeline = start_pipeline(
        f"rtspsrc location={a.url} latency=0 protocols={a.protocols} ! rtph264depay ! avdec_h264 max-threads=1 "
        f"! video/x-raw,format=I420 ! appsink name=sink sync=false max-buffers=4 drop=false",
        "live_peer client: the player pipeline did not start")
    sink = pipeline.get_by_name("sink")
    bus = pipeline.get_bus()

    first = None          # monotonic ns of the first decoded frame
    start = None          # start of the measured window
    latencies, seqs, arrivals = [], [], []
    unreadable = decoded_in_window = 0
    rss, last_sample, cpu0 = [], 0.0, None
    error = None
    snapped = False
    deadline_connect = time.monotonic() + a.connect_timeout
    while True:
        msg = bus.pop_filtered(Gst.MessageType.ERROR | Gst.MessageType.EOS)
        if msg:
            if msg.type == Gst.MessageType.ERROR:
                err, dbg = msg.parse_error()
                error = f"{err.message} ({dbg})"
            else:
                error = "end of stream from the server"
            break
        sample = sink.try_pull_sample(100 * Gst.MSECOND)
        now_ns = time.monotonic_ns()
        if sample is None:
            if first is None and time.monotonic() > deadline_connect:
                error = f"no frame within {a.connect_timeout} s"
                break
        else:
            if first is None:
                first = now_ns
            if start is None and now_ns - first >= a.warmup * 1e9:
                start = now_ns
                busy0, own0 = machine_busy(), own_cpu([a.rss_pid, a.source_pid])
                if a.rss_pid:
                    s = proc_sample(a.rss_pid)
                    cpu0 = s[1] if s else None
            if start is not None:
                decoded_in_window += 1
                buf = sample.get_buffer()
                ok, info = buf.map(Gst.MapFlags.READ)
                if ok:
                    if a.snapshot and not snapped and now_ns - start >= a.duration * 0.5e9:
                        with open(a.snapshot, "wb") as f:   # I420, tightly packed at 1280x720
                            f.write(bytes(info.data[: W * H * 3 // 2]))
                        snapped = True
                    y = np.frombuffer(info.data, np.uint8, count=W * H).reshape(H, W)
                    region = y[cy:cy + ROWS * block, cx:cx + COLS * block].reshape(ROWS, block, COLS, block)
                    means = region[:, lo:hi, :, lo:hi].mean(axis=(1, 3)).reshape(-1)
                    buf.unmap(info)
                    got = decode((means[0::2] > means[1::2]).astype(np.uint8))
                else:
                    got = None
                if got is None:
                    unreadable += 1
                else:
                    seq, micros = got
                    now_us = now_ns // 1000
                    lat_us = (now_us - micros) % (1 << 32)   # unwrap against our own clock
                    if lat_us < 10_000_000:
                        latencies.append(lat_us / 1000)
                        seqs.append(seq)
                        arrivals.append((now_ns - start) / 1e9)
                    else:
                        unreadable += 1
        t = time.monotonic()
        if start is not None:
            el = (time.monotonic_ns() - start) / 1e9
            if a.rss_pid and t - last_sample >= 1.0:
                last_sample = t
                s = proc_sample(a.rss_pid)
                if s:
                    rss.append([round(el, 2), s[0], s[1], s[2]])
            if el >= a.duration:
                break
    end_ns = time.monotonic_ns()
    other_cpu_s = (machine_busy() - busy0) - (own_cpu([a.rss_pid, a.source_pid]) - own0) if start is not None else None
    if a.rss_pid and start is not None:
        s = proc_sample(a.rss_pid)
        if s:
            rss.append([round((end_ns - start) / 1e9, 2), s[0], s[1], s[2]])
    pipeline.set_state(Gst.State.NULL)

    window = (end_ns - start) / 1e9 if start is not None else 0.0
    # Sequence numbers: unwrap (16 bits), then count what the source sent between the first and
    # the last frame seen and what never arrived.
    unwrapped, base, prev = [], 0, None
    for s in seqs:
        if prev is not None and s < prev and prev - s > 0x8000:
            base += 0x10000
        unwrapped.append(base + s)
        prev = s
    distinct = len(set(unwrapped))
    sent = (max(unwrapped) - min(unwrapped) + 1) if unwrapped else 0
    gaps = [b - a_ - 1 for a_, b in zip(unwrapped, unwrapped[1:]) if b - a_ > 1]
    intervals = sorted(b - a_ for a_, b in zip(arrivals, arrivals[1:]))
    lat = sorted(latencies)
    out = {
        "error": error, "window_s": window, "decoded": decoded_in_window, "readable": len(latencies),
        "unreadable": unreadable, "distinct": distinct, "duplicates": len(unwrapped) - distinct,
        "sent_in_span": sent, "missing": sent - distinct, "gaps": len(gaps), "longest_gap": max(gaps) if gaps else 0,
        "fps": distinct / window if window > 0 else 0,
        "p50": quantile(lat, 0.5), "p95": quantile(lat, 0.95), "p99": quantile(lat, 0.99),
        "min": lat[0] if lat else None, "max": lat[-1] if lat else None,
        "mean": sum(lat) / len(lat) if lat else None,
        "interval_p95_ms": quantile(intervals, 0.95) * 1000 if intervals else None,
        "interval_max_ms": intervals[-1] * 1000 if intervals else None,
        "rss": rss,
        "cpu_s": (rss[-1][2] - cpu0) if rss and cpu0 is not None else None,
        "other_cpu_s": other_cpu_s,
        "latencies": [round(v, 2) for v in latencies],
    }
    fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    print(f"live_peer client: {window:.1f} s, {distinct} frames ({out['fps']:.2f} fps), {out['missing']} missing, "
          f"{unreadable} unreadable, latency p50 {fmt(out['p50'])} p95 {fmt(out['p95'])} max {fmt(out['max'])} ms"
          + (f"; error: {error}" if error else ""), file=sys.stderr, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f)
    return 0 if error is None and latencies else 1

# --------------------------------------------------------------------------- report

def stage_figures(line):
    """Figures from a stage's end-of-stream summary line (lensdetect0: / lensstylize0: / lenspass0:)."""
    import re
    f = {"line": line}
    if not line:
        return f
    m = re.search(r"(\d+) frames in, (\d+) out, (\d+) dropped", line)
    if m:
        f["in"], f["out"], f["dropped"] = (int(v) for v in m.groups())
    m = re.search(r"frame age p50 ([0-9.]+) ms p95 ([0-9.]+) ms", line)
    if m:
        f["age_p50"], f["age_p95"] = (float(v) for v in m.groups())
    m = re.search(r"inference ([0-9.]+) ms median", line) or re.search(r"inference ([0-9.]+) at ", line)
    if m:
        f["inference"] = float(m.group(1))
    m = re.search(r"([0-9.]+) ms a frame", line)
    if m:
        f["per_frame"] = float(m.group(1))
    return f


RSS_GROWTH_GOAL_PCT = 5.0   # the goal: the server's RSS grows at most this much over the window


def run_report(a):
    interval = 1000.0 / a.fps
    rows, info = [], {}
    for v in a.variants.split(","):
        d = os.path.join(a.dir, v)
        def load(name):
            try:
                with open(os.path.join(d, name)) as fh:
                    return json.load(fh) if name.endswith(".json") else fh.read().strip()
            except (OSError, ValueError):
                return None
        c, src = load("client.json") or {}, load("source.json") or {}
        st, rt = stage_figures(load("stage.txt") or ""), load("rtsp.txt") or ""
        rss = c.get("rss") or []
        at10 = next((r for r in rss if r[0] >= a.rss_at), None)
        end = rss[-1] if rss else None
        growth = (end[1] - at10[1]) / at10[1] * 100 if at10 and end and end is not at10 else None
        cpu = c["cpu_s"] / c["window_s"] * 100 if c.get("cpu_s") is not None and c.get("window_s") else None
        other = c["other_cpu_s"] / c["window_s"] * 100 if c.get("other_cpu_s") is not None and c.get("window_s") else None
        info[v] = dict(c=c, src=src, st=st, rt=rt, at10=at10, end=end, growth=growth, cpu=cpu, other=other, note=load("note.txt"))

    def f1(x, w=7):
        return f"{'-' if x is None else f'{x:.1f}':>{w}}"

    def fi(x, w=7):
        return f"{'-' if x is None else str(x):>{w}}"

    print(f"{'variant':<8} {'frames':>7} {'fps':>6} {'missing':>7} {'unread':>6} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} "
          f"{'max ms':>7} {'infer ms':>8} {'st.drop':>7} {'age p95':>7} {'RSS@' + str(int(a.rss_at)) + 's':>8} "
          f"{'RSS@end':>8} {'growth':>7} {'CPU %':>6} {'other %':>7}")
    for v, i in info.items():
        c, st = i["c"], i["st"]
        growth = f"{i['growth']:+.1f}%" if i["growth"] is not None else "-"
        if not c:
            print(f"{v:<8} failed: {i['note'] or 'no client figures'}")
            continue
        print(f"{v:<8} {fi(c.get('distinct'))} {f1(c.get('fps'), 6)} {fi(c.get('missing'))} {fi(c.get('unreadable'), 6)} "
              f"{f1(c.get('p50'))} {f1(c.get('p95'))} {f1(c.get('p99'))} {f1(c.get('max'))} {f1(st.get('inference'), 8)} "
              f"{fi(st.get('dropped'))} {f1(st.get('age_p95'))} "
              f"{f1(i['at10'][1] / 1024 if i['at10'] else None, 8)} {f1(i['end'][1] / 1024 if i['end'] else None, 8)} "
              f"{growth:>7} {f1(i['cpu'], 6)} {f1(i['other'])}")
    print()
    for v, i in info.items():
        c, src = i["c"], i["src"]
        if c:
            print(f"{v}: measured {c.get('window_s', 0):.1f} s; {c.get('decoded')} frames decoded, {c.get('readable')} time codes read, "
                  f"{c.get('sent_in_span')} sent in that span, {c.get('gaps')} gaps (longest {c.get('longest_gap')} frames), "
                  f"{c.get('duplicates')} duplicates; frame interval at the client p95 {f1(c.get('interval_p95_ms'), 0)} ms, "
                  f"max {f1(c.get('interval_max_ms'), 0)} ms" + (f"; client error: {c['error']}" if c.get("error") else ""))
        if i["at10"] and i["end"] and len(i["end"]) > 3:
            a10, e = i["at10"][1] - i["at10"][3], i["end"][1] - i["end"][3]
            print(f"  RSS without shared memory (the source's frames, mapped by shmsrc): {a10 / 1024:.1f} MB at {i['at10'][0]:.0f} s -> "
                  f"{e / 1024:.1f} MB at {i['end'][0]:.0f} s ({(e - a10) / a10 * 100:+.1f}%); shared {i['at10'][3] / 1024:.1f} -> "
                  f"{i['end'][3] / 1024:.1f} MB")
        if src:
            print(f"  source: {src.get('pushed')} frames in {src.get('seconds', 0):.1f} s ({src.get('fps', 0):.2f} fps), "
                  f"{src.get('late')} late by >5 ms, {src.get('skipped')} slots skipped, stamp to push "
                  f"{src.get('stamp_to_push_ms_p50', 0):.2f} ms median (in the latency)")
        if i["st"].get("line"):
            print(f"  {i['st']['line']}")
        if i["rt"]:
            print(f"  {i['rt']}")
        if i["note"]:
            print(f"  note: {i['note']}")
    print()
    base = info.get("pass", {}).get("c", {}).get("p50") if "pass" in info else None
    bounds = {}   # variant -> the p95 goal's bound (ms), from this run's figures
    verdicts = []
    for v, i in info.items():
        if v == "pass" or not i["c"]:
            continue
        c, st = i["c"], i["st"]
        inf = st.get("inference")
        if base is None or inf is None or c.get("p95") is None:
            why = "no lenspass baseline in this run" if base is None else "no inference time in the stage's summary" if inf is None else "no latency read"
            verdicts.append(f"{v}: latency goal n/a ({why})")
        else:
            bound = 1.5 * (inf + interval) + base
            bounds[v] = bound
            ok = c["p95"] <= bound
            verdicts.append(f"{v}: p95 {c['p95']:.1f} ms <= 1.5 x ({inf:.1f} inference + {interval:.1f} frame) + {base:.1f} "
                            f"encoder (lenspass p50) = {bound:.1f} ms: goal {'met' if ok else 'missed'}")
    for v, i in info.items():
        if not i["c"]:
            continue
        g = i["growth"]
        if g is None:
            verdicts.append(f"{v}: RSS growth n/a")
        else:
            verdicts.append(f"{v}: RSS {i['at10'][1] / 1024:.1f} MB at {i['at10'][0]:.0f} s -> {i['end'][1] / 1024:.1f} MB at "
                            f"{i['end'][0]:.0f} s, {g:+.1f}% (<= {RSS_GROWTH_GOAL_PCT:g}%): goal {'met' if g <= RSS_GROWTH_GOAL_PCT else 'missed'}")
    print("\n".join(verdicts))
    if a.results:
        write_results(a.results, info, bounds, base)
    return 0


def write_results(path, info, bounds, base):
    """Appends the figures as "key<TAB>value" lines to bench/lib.sh's results file (for
    bench/report.py): per variant, the client's latencies and fps, the stage's summary, RSS and CPU."""
    def num(x):
        return "" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)
    lines = [("latency_base_p50", num(base)), ("goal.rss_growth_pct", num(RSS_GROWTH_GOAL_PCT))]
    for v, i in info.items():
        c, st = i["c"], i["st"]
        lines.append((f"{v}.note", (i["note"] or "").replace("\n", " ")))
        if not c:
            lines.append((f"{v}.failed", "no client figures"))
            continue
        for key in ("window_s", "distinct", "fps", "missing", "unreadable", "p50", "p95", "p99", "max", "mean", "error"):
            lines.append((f"{v}.{key}", num(c.get(key)) if key != "error" else (c.get("error") or "")))
        for key in ("inference", "dropped", "age_p95", "line"):
            lines.append((f"{v}.stage.{key}", num(st.get(key)) if key != "line" else st.get("line", "")))
        lines += [(f"{v}.p95_bound", num(bounds.get(v))),
                  (f"{v}.rss_at_s", num(i["at10"][0] if i["at10"] else None)),
                  (f"{v}.rss_at_mb", num(i["at10"][1] / 1024 if i["at10"] else None)),
                  (f"{v}.rss_end_s", num(i["end"][0] if i["end"] else None)),
                  (f"{v}.rss_end_mb", num(i["end"][1] / 1024 if i["end"] else None)),
                  (f"{v}.rss_growth_pct", num(i["growth"])),
                  (f"{v}.cpu_pct", num(i["cpu"])), (f"{v}.other_pct", num(i["other"]))]
    with open(path, "a") as fh:
        for key, value in lines:
            fh.write(f"{key}\t{' '.join(str(value).split())}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="role", required=True)
    s = sub.add_parser("source")
    s.add_argument("socket")
    s.add_argument("--fps", type=int, default=30)
    s.add_argument("--photo", default=".deps/media/astronaut.png")
    s.add_argument("--stats")
    c = sub.add_parser("client")
    c.add_argument("url")
    c.add_argument("--duration", type=float, required=True)
    c.add_argument("--warmup", type=float, default=3.0)
    c.add_argument("--rss-pid", type=int)
    c.add_argument("--source-pid", type=int, help="the source's process (its CPU time is not counted as the machine's other load)")
    c.add_argument("--protocols", default="udp")
    c.add_argument("--connect-timeout", type=float, default=20.0)
    c.add_argument("--out")
    c.add_argument("--snapshot", help="write one decoded frame (raw I420) from mid-window here")
    r = sub.add_parser("report")
    r.add_argument("dir")
    r.add_argument("--variants", default="pass,detect,stylize")
    r.add_argument("--fps", type=float, default=30)
    r.add_argument("--rss-at", type=float, default=10)
    r.add_argument("--results", help="append the figures as key<TAB>value lines to this file (bench/lib.sh results_open)")
    a = ap.parse_args()
    if a.role == "report":
        return run_report(a)
    if a.role == "source":
        run_source(a)
        return 0
    return run_client(a)


if __name__ == "__main__":
    sys.exit(main())
