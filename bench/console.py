#!/usr/bin/env python3
"""make bench-console: video in the browser (WHEP) and the console page, against RTSP, on one
live 1280x720 30 fps source with face detection, on loopback; a benchmark, not a test.

Wiring (one of each for the whole run):
  source   bench/live_peer.py source: 1280x720 BGRx at a steady 30 fps into shared memory, the
           astronaut panning, a time code (sequence, CLOCK_MONOTONIC µs, CRC-16) in the top-right
           corner as Manchester pairs of 32-px squares (bench/live.sh says more).
  server   streamlens run -v --http 127.0.0.1:PORT 'shmsrc … ! lensdetect model=Models/face-full-range.json
           mode=live ! tee name=t ! queue leaky=downstream max-size-buffers=1 ! lensrtsp port=PORT+1 mount=/bench
           t. ! queue leaky=downstream max-size-buffers=1 ! fakesink sync=false async=false' (the source
           `main`). Browsers watch the API's default point, the last raw video before a sink
           (fakesink0:sink: the detected frames, boxes drawn), VP8 encoded once for all viewers;
           lensrtsp encodes H.264 only while an RTSP client watches. fakesink sync=false: a sink
           waiting on the clock would hold the frames the WebRTC tap sees at its pad.
  browser  Debian's chromium, headless (Selenium, .deps/browser-venv), one instance for the run.
           The bare viewers are bench/console/viewer.js, injected into /healthz of the server's
           origin (same-origin fetch of the WHEP routes, like the console).
Variants, interleaved in every round (the order reversed every other round), DURATION s each
after WARMUP s:
  rtsp     bench/live_peer.py client on rtsp://…/bench (rtspsrc latency=0 ! avdec_h264 ! appsink):
           glass-to-client latency of each decoded frame; the browser idles on a blank page.
  browser  1 WHEP viewer; for every frame it presents (requestVideoFrameCallback) it takes the
           frame as a VideoFrame (its timestamp must be the metadata's mediaTime, else the frame
           is skipped and counted as "mismatch"), copies the code's 512x256 corner of its luma
           plane (VideoFrame.copyTo; a canvas drawing when the frame has no planes) and reads it
           (pair means compared, CRC checked; failures counted as "unreadable").
           Glass-to-browser latency = performance.timeOrigin + metadata.expectedDisplayTime (ms
           since the epoch, the time the browser expects the frame on screen) minus the stamp,
           the stamp's CLOCK_MONOTONIC moved to the epoch by time.time() - time.monotonic() taken
           on this machine around the window, and the browser's clock checked against Python's
           time.time() (the least round-trip of 15 Selenium calls; that skew is subtracted).
           Also shown: the same with the callback's `now` instead, and with metadata.receiveTime
           (the last packet of the frame in: the network and jitter-buffer share).
  cpu0     no viewer (the reference: source, detection, fakesink; lensrtsp idle). After its window,
           the console's poll (GET /api/sources + GET /api/sources/main/stages) 500 times back to
           back: the server's CPU per poll above idle, a direct figure for the page's own cost.
  cpu1     1 bare WHEP viewer (viewer.js, no reading).
  cpu4     VIEWERS (4) bare WHEP viewers in one page: 4 RTCPeerConnections, 4 <video>.
  console  the console page / (its WHEP video of main, /api/sources and the stages polled every
           2 s, the EventSource on /api/events).
Server CPU: utime+stime of the streamlens process (/proc/PID/stat) over the window, % of one core
(200 % = both cores). Also the browser's CPU (chromium's processes) and the machine's busy time.
Before each variant the previous viewers are gone (/metrics: streamlens_web_viewers 0).
Goals (the issue's): browser p95 <= 200 ms and <= 1.5 x RTSP's p95 (the medians over rounds of
each round's p95); CPU(4 viewers) <= 1.2 x CPU(1 viewer); console - bare viewer <= 2 % of one core
(the median over rounds of the paired difference). Exits 0 when goals are missed (it says so), 1
when a run fails. Figures also go to $BENCH_RESULTS/console.tsv (bench/lib.sh's format); the
screenshots, the first unreadable code (if any) and every log to out/bench/console-*.
Usage: bench/console.py path/to/streamlens   (ROUNDS=3 DURATION=20 WARMUP=3 VIEWERS=4 PORT=18660,
VARIANTS="rtsp browser cpu0 cpu1 cpu4 console"; quick look: ROUNDS=1 DURATION=8). Runs itself with .deps/browser-venv/bin/python (Selenium).
"""
from http.client import HTTPConnection
import base64, json, os, re, shutil, signal, statistics, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROWSER_PY = os.path.join(ROOT, ".deps", "browser-venv", "bin", "python")
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
except ImportError:
    if os.path.abspath(sys.executable) != BROWSER_PY and os.access(BROWSER_PY, os.X_OK):
        os.execv(BROWSER_PY, [BROWSER_PY, os.path.abspath(__file__)] + sys.argv[1:])
    sys.exit("bench-console: no Selenium (.deps/browser-venv: run make setup)")

NAME = "bench-console"


def die(msg):
    print(f"{NAME}: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def env_int(name, default, low, high):
    text = os.environ.get(name, str(default))
    if not re.fullmatch(r"[0-9]+", text) or not low <= int(text) <= high:
        die(f"{name} must be a whole number {low}..{high}")
    return int(text)


if len(sys.argv) != 2:
    die("usage: bench/console.py path/to/streamlens")
BIN = os.path.abspath(sys.argv[1])
ROUNDS = env_int("ROUNDS", 3, 1, 20)
DURATION = env_int("DURATION", 20, 5, 600)
WARMUP = env_int("WARMUP", 3, 0, 60)
VIEWERS = env_int("VIEWERS", 4, 2, 16)
PORT = env_int("PORT", 18660, 1024, 65000)
RTSP_PORT = PORT + 1
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
os.chdir(ROOT)
FPS, W, H = 30, 1280, 720
BASE = f"http://127.0.0.1:{PORT}"
ALL_VARIANTS = ["rtsp", "browser", "cpu0", "cpu1", "cpu4", "console"]
VARIANTS = os.environ.get("VARIANTS", " ".join(ALL_VARIANTS)).split()
if not VARIANTS or any(v not in ALL_VARIANTS for v in VARIANTS):
    die(f"VARIANTS: a subset of {' '.join(ALL_VARIANTS)}")

if not os.access(BIN, os.X_OK):
    die(f"{BIN} is not an executable (swift build -c release)")
for f in ("Models/face-full-range.json", ".deps/media/astronaut.png", "bench/console/viewer.js"):
    if not os.path.isfile(f):
        die(f"{f} missing (run make setup)")
if subprocess.run([BIN, "stages", "lensrtsp"], capture_output=True).returncode != 0:
    die(f"{BIN} has no lensrtsp stage")

# Debian packages and the shared bench venv (PyGObject, numpy) for live_peer.py: bench/lib.sh's own functions.
r = subprocess.run(["bash", "-c", 'set -e; ROOT=$PWD; source bench/lib.sh; '
                    f'bench_apt {NAME} python3-gi python3-venv gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 chromium chromium-driver; '
                    f'bench_venv {NAME} >&2; echo "$PY"'], stdout=subprocess.PIPE, text=True)
if r.returncode != 0 or not r.stdout.strip():
    die("could not prepare the bench venv (bench/lib.sh bench_venv)")
PEER_PY = r.stdout.strip().splitlines()[-1]
CHROMIUM, CHROMEDRIVER = CHROMIUM or shutil.which("chromium"), CHROMEDRIVER or shutil.which("chromedriver")
if not CHROMIUM or not CHROMEDRIVER:
    die("chromium and chromedriver are needed (apt-get install chromium chromium-driver)")

TMP = tempfile.mkdtemp(prefix="bench-console.")
OUT = os.path.join("out", "bench")
os.makedirs(OUT, exist_ok=True)
for f in ("console-frame.png", "console-page.png", "console-unreadable.png", "console-browser.png"):   # an earlier run's
    if os.path.exists(os.path.join(OUT, f)):
        os.remove(os.path.join(OUT, f))
CLK_TCK = os.sysconf("SC_CLK_TCK")

# --------------------------------------------------------------------------- processes

children = []   # Popen objects, each the leader of its own process group
driver = None
driver_pid = None


def spawn(args, log):
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(log, "w"), start_new_session=True)
    children.append(p)
    return p


def stop(p, sig=signal.SIGINT, secs=30):
    """Signals the process (its group for SIGTERM/SIGKILL), waits; returns its exit code."""
    if p.poll() is None:
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(secs)
        except subprocess.TimeoutExpired:
            print(f"{NAME}: process {p.pid} did not end {secs} s after signal {sig}; SIGTERM, SIGKILL", file=sys.stderr)
            for s in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, s)
                except ProcessLookupError:
                    break
                try:
                    p.wait(5)
                    break
                except subprocess.TimeoutExpired:
                    pass
    for s in (signal.SIGTERM,):   # anything left in its group (a child it started)
        try:
            os.killpg(p.pid, s)
        except (ProcessLookupError, PermissionError):
            pass
    if p in children:
        children.remove(p)
    return p.returncode


def descendants(pid):
    """PIDs below pid (from /proc's parent links)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        found += kids
        todo += kids
    return found


def cpu_of(pid):
    """utime+stime of pid, seconds; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def browser_cpu():
    """{pid: cpu seconds} of chromedriver and every process under it (chromium's)."""
    if not driver_pid:
        return {}
    out = {}
    for p in [driver_pid] + descendants(driver_pid):
        c = cpu_of(p)
        if c is not None:
            out[p] = c
    return out


def machine_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v[:3]) + sum(v[5:8])) / CLK_TCK


def cleanup():
    global driver
    if driver is not None:
        kids = descendants(driver_pid) if driver_pid else []
        try:
            driver.quit()
        except Exception:
            pass
        driver = None
        for p in kids:   # chromium's processes, if quit left any
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if driver_pid:
            try:
                os.killpg(driver_pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for p in list(children):
        stop(p, signal.SIGTERM, 10)
    shutil.rmtree(TMP, ignore_errors=True)


signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))

# --------------------------------------------------------------------------- HTTP and clocks


def http(path, timeout=10):
    with urllib.request.urlopen(BASE + path, timeout=timeout) as r:
        return r.status, r.read().decode()


def web_metrics():
    """streamlens_web_* lines of /metrics: {(name, point, kind/codec): value}."""
    out = {}
    for line in http("/metrics")[1].splitlines():
        m = re.match(r'(streamlens_web_\w+)\{([^}]*)\} (\S+)', line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out[(m.group(1), labels.get("point", ""), labels.get("kind") or labels.get("codec", ""))] = float(m.group(3))
    return out


def viewers_now(m=None):
    m = m if m is not None else web_metrics()
    return int(sum(v for (n, _, k), v in m.items() if n == "streamlens_web_viewers" and k == "webrtc"))


def encoded(m):
    """VP8 frames encoded so far, over every point; and the points."""
    e = {p: v for (n, p, k), v in m.items() if n == "streamlens_web_frames_encoded_total" and k == "vp8"}
    return sum(e.values()), sorted(e)


def mono_to_epoch():
    """time.time() - time.monotonic(), from the tightest of a few bracketed samples (s)."""
    best = None
    for _ in range(20):
        a = time.monotonic(); w = time.time(); b = time.monotonic()
        if best is None or b - a < best[0]:
            best = (b - a, w - (a + b) / 2)
    return best[1]


def browser_skew():
    """The browser's (performance.timeOrigin + performance.now()) minus Python's time.time(), ms,
    from the Selenium call with the least round trip; and that round trip (ms)."""
    best = None
    for _ in range(15):
        a = time.time(); v = driver.execute_script("return performance.timeOrigin + performance.now()"); b = time.time()
        if best is None or b - a < best[0]:
            best = (b - a, v - (a + b) / 2 * 1000)
    return best[1], best[0] * 1000


def quantile(sorted_values, q):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))]


def wait_for(what, predicate, timeout):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = predicate()
        if v:
            return v
        time.sleep(0.25)
    raise RunError(f"timed out ({timeout} s) waiting for {what}")


class RunError(Exception):
    pass


# --------------------------------------------------------------------------- the run

SPEC = (f"shmsrc socket-path={{sock}} is-live=true do-timestamp=true ! video/x-raw,format=BGRx,width={W},height={H},framerate={FPS}/1 "
        f"! lensdetect model=Models/face-full-range.json mode=live ! tee name=t "
        f"! queue leaky=downstream max-size-buffers=1 ! lensrtsp port={RTSP_PORT} mount=/bench "
        f"t. ! queue leaky=downstream max-size-buffers=1 ! fakesink sync=false async=false")
VIEWER_JS = open("bench/console/viewer.js").read()
TILE_VIDEO = "document.querySelector('section.tile[data-source=\"main\"] video')"
server = source = None


def blank():
    """The server origin's /healthz with viewer.js (no viewer): where the browser waits."""
    driver.get(BASE + "/healthz")
    driver.execute_script(VIEWER_JS)


def no_viewers():
    """Ends the page's viewers (the page left: the console DELETEs its session on pagehide),
    then waits until the server has no WebRTC viewer left, and lets its tap pipeline go."""
    try:   # viewer.js's viewers: DELETE their sessions (a page left without it: reaped after 8 s)
        driver.execute_script("return window.benchViewers ? window.benchViewers.stop() : null")
    except Exception:
        pass
    blank()
    wait_for("the server to count no WebRTC viewer", lambda: viewers_now() == 0, 20)
    time.sleep(2)


def server_alive():
    if server.poll() is not None:
        raise RunError(f"streamlens ended (exit {server.returncode}): {tail(os.path.join(TMP, 'server.err'))}")
    if source.poll() is not None:
        raise RunError(f"the source ended (exit {source.returncode}): {tail(os.path.join(TMP, 'source.err'))}")


def tail(path, n=5):
    try:
        with open(path) as f:
            lines = [l.strip() for l in f if ": video/x-raw" not in l]
        return " | ".join(lines[-n:])
    except OSError:
        return ""


def source_frames():
    """Frames the source `main` has taken in so far (/api/sources)."""
    return next((x.get("frames") for x in json.loads(http("/api/sources")[1]) if x.get("name") == "main"), None)


def own_cpu():
    t = os.times()
    return t.user + t.system


def window(seconds):
    """Figures over `seconds`: server CPU (% of one core, and ms a source frame), browser CPU,
    the machine's busy time and what of it is none of ours (other), VP8 frames encoded."""
    m0, n0 = web_metrics(), source_frames()
    c0, b0, s0, o0, busy0, t0 = cpu_of(server.pid), browser_cpu(), cpu_of(source.pid), own_cpu(), machine_busy(), time.monotonic()
    time.sleep(seconds)
    c1, b1, s1, o1, busy1, t1 = cpu_of(server.pid), browser_cpu(), cpu_of(source.pid), own_cpu(), machine_busy(), time.monotonic()
    m1, n1 = web_metrics(), source_frames()
    span = t1 - t0
    if None in (c0, c1, s0, s1):
        raise RunError("streamlens or the source ended during the window")
    bcpu = sum(v - b0.get(p, 0.0) for p, v in b1.items())
    e0, _ = encoded(m0)
    e1, points = encoded(m1)
    frames = (n1 - n0) if n0 is not None and n1 is not None else None
    return {"seconds": span, "server_cpu": (c1 - c0) / span * 100, "browser_cpu": bcpu / span * 100,
            "busy": (busy1 - busy0) / span * 100, "other": (busy1 - busy0 - (c1 - c0) - bcpu - (s1 - s0) - (o1 - o0)) / span * 100,
            "source_fps": frames / span if frames is not None else None,
            "ms_per_frame": (c1 - c0) * 1000 / frames if frames else None,
            "encoded_fps": (e1 - e0) / span, "points": points, "viewers": viewers_now(m1)}


def start_viewers(n, measure=False):
    blank()
    status = driver.execute_script("return window.benchViewers.start(arguments[0], {measure: arguments[1]})", n, measure)
    errors = [s["error"] for s in status if s.get("error")]
    if errors:
        raise RunError(f"WHEP: {errors[0]}")

    def playing():
        st = driver.execute_script("return window.benchViewers.status()")
        return len(st) == n and all(s["state"] == "connected" and s["frames"] >= 15 and s["width"] > 0 for s in st)
    wait_for(f"{n} viewer(s) to connect and play", playing, 30)
    wait_for(f"the server to count {n} WebRTC viewer(s)", lambda: viewers_now() == n, 10)


def frames_of_viewers():
    return [s["frames"] for s in driver.execute_script("return window.benchViewers.status()")]


POLLS = 500


def poll_cost(idle_rate):
    """Server CPU (ms) per console poll: GET /api/sources and GET /api/sources/main/stages (what the
    page asks every 2 s) on one kept-alive connection, POLLS times back to back, minus the idle
    rate (CPU s per s) measured just before."""
    conn = HTTPConnection("127.0.0.1", PORT, timeout=10)
    headers = {"Accept": "application/json"}
    c0, t0 = cpu_of(server.pid), time.monotonic()
    for _ in range(POLLS):
        for path in ("/api/sources", "/api/sources/main/stages"):
            conn.request("GET", path, headers=headers)
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                raise RunError(f"GET {path}: {r.status}")
    c1, t1 = cpu_of(server.pid), time.monotonic()
    conn.close()
    return ((c1 - c0) - idle_rate * (t1 - t0)) / POLLS * 1000, (t1 - t0) / POLLS * 1000


def run_cpu(v):
    """cpu0, cpu1, cpu4, console: the server's CPU with that many viewers (or the console page)."""
    n = {"cpu0": 0, "cpu1": 1, "cpu4": VIEWERS}.get(v)
    if v == "console":
        driver.get(BASE + "/")
        def tile_plays():
            return driver.execute_script(
                f"const v = {TILE_VIDEO}; return !!v && !v.hidden && v.videoWidth > 0 && !document.querySelector('img.mjpeg') "
                "&& v.getVideoPlaybackQuality().totalVideoFrames >= 15")
        wait_for("the console's tile to play the video over WebRTC", tile_plays, 30)
        wait_for("the server to count 1 WebRTC viewer", lambda: viewers_now() == 1, 10)
        frames = lambda: [driver.execute_script(f"return {TILE_VIDEO}.getVideoPlaybackQuality().totalVideoFrames")]  # noqa: E731
    elif n:
        start_viewers(n)
        frames = frames_of_viewers
    else:
        frames = lambda: []  # noqa: E731
    time.sleep(WARMUP)
    f0 = frames()
    if v == "console":
        driver.execute_script("performance.clearResourceTimings(); performance.setResourceTimingBufferSize(10000)")
    w = window(DURATION)
    f1 = frames()
    w["viewer_fps"] = [(b - a) / w["seconds"] for a, b in zip(f0, f1)]
    if v == "console":
        w["requests"] = driver.execute_script("return performance.getEntriesByType('resource').length")
        w["status_line"] = driver.execute_script("return document.querySelector('#status').textContent")
        w["visibility"] = driver.execute_script("return document.visibilityState")
    if v == "cpu0":
        w["poll_ms"], w["poll_wall_ms"] = poll_cost(w["server_cpu"] / 100)
    if n == 0 and w["viewers"] != 0:
        raise RunError(f"{w['viewers']} WebRTC viewers counted with none open")
    if v == "console" and not os.path.exists(os.path.join(OUT, "console-page.png")):
        driver.save_screenshot(os.path.join(OUT, "console-page.png"))
    return w


def run_browser():
    """One viewer that reads every presented frame's code: glass-to-browser latency."""
    start_viewers(1, measure=True)
    time.sleep(WARMUP)
    skew0, rtt0 = browser_skew()
    off0 = mono_to_epoch()
    driver.execute_script("window.benchViewers.begin()")
    w = window(DURATION)
    rec = driver.execute_script("return window.benchViewers.collect()")
    skew1, rtt1 = browser_skew()
    off1 = mono_to_epoch()
    if not os.path.exists(os.path.join(OUT, "console-frame.png")):   # a decoded frame, full size, after the window
        pic = driver.execute_script("return window.benchViewers.picture()")
        if pic:
            with open(os.path.join(OUT, "console-frame.png"), "wb") as f:
                f.write(base64.b64decode(pic.split(",", 1)[1]))
    if rec.get("bad") and not os.path.exists(os.path.join(OUT, "console-unreadable.png")):
        with open(os.path.join(OUT, "console-unreadable.png"), "wb") as f:
            f.write(base64.b64decode(rec["bad"].split(",", 1)[1]))
    skew, off = (skew0 + skew1) / 2, (off0 + off1) / 2

    def lat(ms_epoch):   # a browser time (ms since the epoch) -> ms after the frame's stamp
        out = []
        for t, micros in zip(ms_epoch, rec["micros"]):
            if t is None:
                out.append(None)
                continue
            mono_us = int(round(((t - skew) / 1000 - off) * 1e6))
            d = (mono_us - micros) % (1 << 32)
            out.append(d / 1000 if d < 10_000_000 else None)
        return out
    display, now, receive = lat(rec["display"]), lat(rec["now"]), lat(rec["receive"])
    bad = sum(1 for x in display if x is None)   # read, but no sane latency: counted as unreadable
    keep = [i for i, x in enumerate(display) if x is not None]
    seqs = unwrap([rec["seq"][i] for i in keep])
    distinct = len(set(seqs))
    sent = max(seqs) - min(seqs) + 1 if seqs else 0
    d = sorted(display[i] for i in keep)
    n_ = sorted(now[i] for i in keep if now[i] is not None)
    rv = sorted(receive[i] for i in keep if receive[i] is not None)
    presented = (rec["presentedLast"] - rec["presentedFirst"] + 1) if rec.get("presentedFirst") is not None else 0
    w.update({"readable": len(keep), "unreadable": rec["unreadable"] + bad, "mismatch": rec["mismatch"], "no_frame": rec["noFrame"],
              "callbacks": rec["callbacks"], "presented": presented, "canvas": rec["canvas"], "luma_error": rec["lumaError"], "distinct": distinct, "missing": sent - distinct,
              "fps": distinct / w["seconds"], "p50": quantile(d, .5), "p95": quantile(d, .95), "p99": quantile(d, .99),
              "max": d[-1] if d else None, "now_p50": quantile(n_, .5), "now_p95": quantile(n_, .95),
              "recv_p50": quantile(rv, .5), "recv_p95": quantile(rv, .95), "skew_ms": skew, "skew_drift_ms": skew1 - skew0,
              "skew_rtt_ms": max(rtt0, rtt1), "read_ms_p50": quantile(sorted(rec["work"]), .5),
              "read_ms_p95": quantile(sorted(rec["work"]), .95), "clock_offset_drift_ms": (off1 - off0) * 1000, "size": f"{rec['width']}x{rec['height']}"})
    if not keep:
        raise RunError(f"the browser read no time code ({rec['callbacks']} frames presented, {rec['unreadable']} unreadable, "
                       f"{rec['mismatch']} mismatched)")
    return w


def unwrap(seqs):
    out, base, prev = [], 0, None
    for s in seqs:
        if prev is not None and s < prev and prev - s > 0x8000:
            base += 0x10000
        out.append(base + s)
        prev = s
    return out


def run_rtsp(r):
    blank()
    out = os.path.join(TMP, f"rtsp-{r}.json")
    log = os.path.join(TMP, f"client-{r}.err")
    p = spawn(["timeout", "-k", "10", str(DURATION + WARMUP + 60), PEER_PY, "bench/live_peer.py", "client",
               f"rtsp://127.0.0.1:{RTSP_PORT}/bench", "--duration", str(DURATION), "--warmup", str(WARMUP),
               "--rss-pid", str(server.pid), "--source-pid", str(source.pid), "--out", out], log)
    b0, t0 = browser_cpu(), time.monotonic()
    rc = p.wait()
    children.remove(p)
    b1, span = browser_cpu(), time.monotonic() - t0
    if rc != 0 or not os.path.exists(out):
        raise RunError(f"the RTSP client failed (exit {rc}): {tail(log, 3)}")
    with open(out) as f:
        c = json.load(f)
    c.pop("latencies", None)
    c.update({"seconds": c["window_s"], "server_cpu": c["cpu_s"] / c["window_s"] * 100 if c.get("cpu_s") is not None else None,
              "browser_cpu": sum(v - b0.get(p_, 0.0) for p_, v in b1.items()) / span * 100,
              "busy": None, "encoded_fps": None, "viewers": None})
    if c.get("other_cpu_s") is not None:
        c["other"] = c["other_cpu_s"] / c["window_s"] * 100
    return c


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    global driver, driver_pid, server, source
    started, load_start = time.strftime("%Y-%m-%dT%H:%M:%S%z"), open("/proc/loadavg").read().split()[:3]
    model = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                  if l.startswith("Model name")), "?")
    machine = f"{model}, {os.cpu_count()} CPUs, Linux {os.uname().release}"
    chromium_version = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{NAME}: {machine}; {chromium_version}; {ROUNDS} rounds of {len(VARIANTS)} variants, {DURATION} s each after "
          f"{WARMUP} s; load average {' '.join(load_start)}", file=sys.stderr, flush=True)
    results = {v: [] for v in ALL_VARIANTS}
    notes, failed = [], False
    try:
        sock = os.path.join(TMP, "source.sock")
        source = spawn([PEER_PY, "bench/live_peer.py", "source", sock, "--stats", os.path.join(TMP, "source.json")],
                       os.path.join(TMP, "source.err"))
        t0 = time.time()
        while not os.path.exists(sock):
            if source.poll() is not None or time.time() - t0 > 20:
                raise RunError(f"the source did not create its socket: {tail(os.path.join(TMP, 'source.err'))}")
            time.sleep(0.1)
        server = spawn([BIN, "run", "-v", "--http", f"127.0.0.1:{PORT}", SPEC.format(sock=sock)], os.path.join(TMP, "server.err"))

        def serving():
            server_alive()
            with open(os.path.join(TMP, "server.err")) as f:
                if "lensrtsp0: serving rtsp://" not in f.read():
                    return False
            try:
                srcs = json.loads(http("/api/sources")[1])
            except OSError:
                return False
            return any(s.get("name") == "main" and s.get("state") == "playing" and (s.get("fps") or 0) > 0 for s in srcs)
        wait_for("streamlens to play and serve", serving, 90)

        o = webdriver.ChromeOptions()
        o.binary_location = CHROMIUM
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required",
                  "--window-size=1400,900", "--disable-dev-shm-usage", f"--user-data-dir={os.path.join(TMP, 'chromium')}"):
            o.add_argument(a)
        service = Service(executable_path=CHROMEDRIVER, log_output=os.path.join(TMP, "chromedriver.log"),
                          popen_kw={"start_new_session": True})
        driver = webdriver.Chrome(service=service, options=o)
        driver_pid = service.process.pid
        driver.set_script_timeout(60)
        blank()
        time.sleep(3)   # the detector's first frames, the page's first load

        for r in range(ROUNDS):
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            for v in order:
                print(f"{NAME}: round {r + 1}/{ROUNDS}: {v}", file=sys.stderr, flush=True)
                try:
                    server_alive()
                    w = run_rtsp(r) if v == "rtsp" else run_browser() if v == "browser" else run_cpu(v)
                    w["round"] = r + 1
                    results[v].append(w)
                except Exception as e:   # RunError, and Selenium's (the browser's) or urllib's failures
                    e = e if isinstance(e, RunError) else f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                    notes.append(f"round {r + 1} {v}: {e}")
                    failed = True
                    print(f"{NAME}: round {r + 1} {v}: {e}", file=sys.stderr, flush=True)
                finally:
                    if server.poll() is None and driver is not None:
                        try:
                            no_viewers()
                        except Exception as e:
                            notes.append(f"round {r + 1} {v}: after it: {type(e).__name__}: {e}")
                            failed = True
                if server.poll() is not None:
                    raise RunError(f"streamlens ended (exit {server.returncode}): {tail(os.path.join(TMP, 'server.err'))}")
    except Exception as e:   # the server or the browser did not start, or the server ended
        e = e if isinstance(e, RunError) else f"{type(e).__name__}: {e}"
        notes.append(str(e))
        failed = True
        print(f"{NAME}: {e}", file=sys.stderr, flush=True)
    finally:
        if driver is not None:
            kids = descendants(driver_pid)
            try:
                driver.quit()
            except Exception:
                pass
            driver = None
            for p in kids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if server is not None:
            rc = stop(server, signal.SIGINT, 30)
            if rc != 0:
                notes.append(f"streamlens exited {rc} after SIGINT: {tail(os.path.join(TMP, 'server.err'))}")
                failed = True
        if source is not None:
            stop(source, signal.SIGTERM, 10)
        with open(os.path.join(OUT, "console.log"), "w") as log:
            for f in sorted(os.listdir(TMP)):
                if f.endswith((".err", ".log")):
                    log.write(f"== {f}\n")
                    with open(os.path.join(TMP, f), errors="replace") as fh:   # without chromium's D-Bus complaints
                        log.writelines(l for l in fh if "dbus" not in l)

    # ----------------------------------------------------------------------- the report
    stage = ""
    try:
        with open(os.path.join(TMP, "server.err")) as f:
            stage = ([l.strip() for l in f if re.match(r"lensdetect0: \d+ frames in", l)] or [""])[-1]
    except OSError:
        pass
    src = {}
    try:
        with open(os.path.join(TMP, "source.json")) as f:
            src = json.load(f)
    except (OSError, ValueError):
        pass
    report(results, notes, failed, machine, chromium_version, stage, src, started, load_start)
    return 1 if failed else 0


def fmt(x, w=7, d=1):
    return f"{'-' if x is None else f'{x:.{d}f}':>{w}}"


def report(results, notes, failed, machine, chromium_version, stage, src, started, load_start):
    R = results
    print()
    print(f"== console: live 1280x720 30 fps (shared memory) -> lensdetect face-full-range -> tee: lensrtsp (H.264) | fakesink,")
    print(f"   the browser's video (WHEP, VP8 once per point) at the point before fakesink; loopback; {machine}; {chromium_version}")
    print(f"   {ROUNDS} rounds, variants interleaved (order reversed every other round), {DURATION} s measured after {WARMUP} s; "
          f"latencies in ms, glass (the source's stamp) to client")
    print()
    print("latency   round  frames    fps missing unread  p50 ms  p95 ms  p99 ms  max ms | now p50 now p95 | recv p50 recv p95 | server CPU % other %")
    blank_extra = f" | {'':>7} {'':>7} | {'':>8} {'':>8}"
    for v in ("rtsp", "browser"):
        for w in R[v]:
            extra = (f" | {fmt(w.get('now_p50'))} {fmt(w.get('now_p95'))} | {fmt(w.get('recv_p50'), 8)} {fmt(w.get('recv_p95'), 8)}"
                     if v == "browser" else blank_extra)
            print(f"{v:<9} {w['round']:>5} {w.get('distinct', 0):>7} {fmt(w.get('fps'), 6)} {w.get('missing', 0):>7} "
                  f"{w.get('unreadable', 0):>6} {fmt(w.get('p50'))} {fmt(w.get('p95'))} {fmt(w.get('p99'))} {fmt(w.get('max'))}"
                  f"{extra} | {fmt(w.get('server_cpu'), 12)} {fmt(w.get('other'))}")
        if R[v]:
            m = lambda k: med(x.get(k) for x in R[v])  # noqa: E731
            extra = (f" | {fmt(m('now_p50'))} {fmt(m('now_p95'))} | {fmt(m('recv_p50'), 8)} {fmt(m('recv_p95'), 8)}"
                     if v == "browser" else blank_extra)
            print(f"{v:<9} {'med':>5} {fmt(m('distinct'), 7, 0)} {fmt(m('fps'), 6)} {fmt(m('missing'), 7, 0)} {fmt(m('unreadable'), 6, 0)} "
                  f"{fmt(m('p50'))} {fmt(m('p95'))} {fmt(m('p99'))} {fmt(m('max'))}{extra} | {fmt(m('server_cpu'), 12)} {fmt(m('other'))}")
    print()
    print("CPU       round  server CPU %  ms/frame  browser CPU %  busy %  other %  source fps  VP8 fps  viewers  fps at each viewer")
    for v in ("cpu0", "cpu1", "cpu4", "console", "browser"):
        for w in R[v]:
            print(f"{v:<9} {w['round']:>5} {fmt(w['server_cpu'], 13)} {fmt(w['ms_per_frame'], 9, 2)} {fmt(w['browser_cpu'], 14)} "
                  f"{fmt(w['busy'])} {fmt(w['other'], 8)} {fmt(w['source_fps'], 11)} {fmt(w['encoded_fps'], 8)} {w['viewers']:>8}  "
                  f"{' '.join(f'{x:.1f}' for x in w.get('viewer_fps', [])) or '-'}")
        if R[v]:
            m = lambda k: med(x.get(k) for x in R[v])  # noqa: E731
            spread = [x["server_cpu"] for x in R[v]]
            print(f"{v:<9} {'med':>5} {fmt(m('server_cpu'), 13)} {fmt(m('ms_per_frame'), 9, 2)} {fmt(m('browser_cpu'), 14)} "
                  f"{fmt(m('busy'))} {fmt(m('other'), 8)} {fmt(m('source_fps'), 11)} {fmt(m('encoded_fps'), 8)}{'':>9}  "
                  f"(server CPU {min(spread):.1f}..{max(spread):.1f})")
    print()
    for w in R["browser"]:
        print(f"browser round {w['round']}: {w['callbacks']} frame callbacks, {w['presented']} frames presented (rVFC presentedFrames), "
              f"{w['readable']} codes read ({w['distinct']} distinct), {w['unreadable']} unreadable, {w['mismatch']} VideoFrame/metadata "
              f"mismatches, {w['missing']} missing of the source's frames in the span; {w['size']}; browser clock - time.time() "
              f"{w['skew_ms']:+.2f} ms (drift {w['skew_drift_ms']:+.2f} ms, round trip {w['skew_rtt_ms']:.1f} ms), monotonic->epoch offset "
              f"drift {w['clock_offset_drift_ms']:+.3f} ms; reading a code took {fmt(w['read_ms_p50'], 0, 2)} ms median, "
              f"{fmt(w['read_ms_p95'], 0, 2)} ms p95 (the browser's main thread), {w['canvas']} read from a canvas"
              + (f" (copyTo failed: {w['luma_error']})" if w["luma_error"] else ""))
    for w in R["rtsp"]:
        print(f"rtsp round {w['round']}: {w.get('decoded')} decoded, {w.get('readable')} codes read, {w.get('unreadable')} unreadable, "
              f"{w.get('missing')} missing" + (f"; error {w['error']}" if w.get("error") else ""))
    for w in R["cpu0"]:
        print(f"cpu0 round {w['round']}: one console poll (GET /api/sources + GET …/main/stages, {POLLS} back to back after the window): "
              f"{w['poll_ms']:.2f} ms of server CPU above idle, {w['poll_wall_ms']:.2f} ms wall")
    for w in R["console"]:
        print(f"console round {w['round']}: {w.get('requests')} requests by the page in the window, status line \"{w.get('status_line')}\", "
              f"page {w.get('visibility')}")
    points = sorted({p for v in ALL_VARIANTS for w in R[v] for p in w.get("points", []) or []})
    print(f"WebRTC points seen: {', '.join(points) or '-'}")
    if stage:
        print(stage)
    if src:
        print(f"source: {src.get('pushed')} frames in {src.get('seconds', 0):.1f} s ({src.get('fps', 0):.2f} fps), {src.get('late')} late "
              f"by >5 ms, {src.get('skipped')} slots skipped")
    for n in notes:
        print(f"note: {n}")
    print()

    # Goals
    rtsp95, br95 = med(w.get("p95") for w in R["rtsp"]), med(w.get("p95") for w in R["browser"])
    c1, c4, c0 = (med(w["server_cpu"] for w in R[v]) for v in ("cpu1", "cpu4", "cpu0"))
    cons = med(w["server_cpu"] for w in R["console"])
    by_round = {v: {w["round"]: w["server_cpu"] for w in R[v]} for v in ALL_VARIANTS if v != "rtsp"}
    paired = [by_round["console"][r] - by_round["cpu1"][r] for r in by_round["console"] if r in by_round["cpu1"]]
    diff = med(paired)
    # The same per frame the server took in (a phase whose source lost frames to a busy machine did
    # less work), as % of a core at 30 frames/s.
    mspf = {v: {w["round"]: w.get("ms_per_frame") for w in R[v]} for v in ("console", "cpu1")}
    paired_f = [(mspf["console"][r] - mspf["cpu1"][r]) * FPS / 10 for r in mspf["console"]
                if mspf["cpu1"].get(r) is not None and mspf["console"][r] is not None]
    goals = []
    if br95 is not None:
        goals.append((f"browser p95 {br95:.1f} ms <= 200 ms", br95 <= 200))
    if br95 is not None and rtsp95 is not None:
        goals.append((f"browser p95 {br95:.1f} ms <= 1.5 x RTSP p95 {rtsp95:.1f} ms = {1.5 * rtsp95:.1f} ms", br95 <= 1.5 * rtsp95))
    if c1 is not None and c4 is not None:
        goals.append((f"server CPU with {VIEWERS} viewers {c4:.1f} % <= 1.2 x 1 viewer {c1:.1f} % = {1.2 * c1:.1f} %"
                      + (f" (above no viewer, {c0:.1f} %: {c4 - c0:.1f} vs {c1 - c0:.1f})" if c0 is not None else ""), c4 <= 1.2 * c1))
    if diff is not None:
        goals.append((f"console page's own cost {diff:+.1f} % of a core (console {cons:.1f} % - bare viewer {c1:.1f} %; paired per round: "
                      f"{', '.join(f'{x:+.1f}' for x in paired)}; per frame taken in, at 30 fps: {fmt(med(paired_f), 0)} %) <= 2 %", diff <= 2))
    recv95 = med(w.get("recv_p95") for w in R["browser"])
    if recv95 is not None and rtsp95:
        print(f"browser: the frame's last packet in at p95 {recv95:.1f} ms ({recv95 / rtsp95:.2f} x RTSP's decoded p95 {rtsp95:.1f} ms); "
              f"decoding, the renderer and the display's 60 Hz cadence add the rest up to its p95 {br95:.1f} ms on screen "
              f"(the RTSP client decodes and shows nothing)")
    poll = med(w.get("poll_ms") for w in R["cpu0"])
    if poll is not None:
        print(f"console page's polling measured directly: {poll:.2f} ms of server CPU a poll (median over rounds), one poll every "
              f"2 s = {poll / 20:.3f} % of a core (the EventSource idle, the video not included)")
    for text, ok in goals:
        print(f"goal {text}: {'met' if ok else 'MISSED'}")
    if len(goals) < 4:
        print("goal(s) not judged: a variant has no figures (see the notes)")
    pics = [f"{OUT}/{f} ({what})" for f, what in (("console-frame.png", "a frame as the browser decoded it, full size"),
            ("console-page.png", "the console"), ("console-unreadable.png", "the first unreadable code")) if os.path.exists(os.path.join(OUT, f))]
    print(f"Pictures: {', '.join(pics) or 'none'}; every process's stderr: {OUT}/console.log. Load average {' '.join(load_start)} at the "
          f"start, {' '.join(open('/proc/loadavg').read().split()[:3])} at the end.")
    write_results(R, goals, failed, started, load_start, machine, chromium_version, stage)


def write_results(R, goals, failed, started, load_start, machine, chromium_version, stage):
    """$BENCH_RESULTS/console.tsv in bench/lib.sh's format: key<TAB>value, lists one figure per round."""
    d = os.environ.get("BENCH_RESULTS", "out/bench/results")
    d = d if os.path.isabs(d) else os.path.join(ROOT, d)
    os.makedirs(d, exist_ok=True)

    def num(x):
        return "" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)
    lines = [("bench", "console"), ("run_id", os.environ.get("BENCH_RUN_ID", "standalone")), ("started", started),
             ("load_start", " ".join(load_start)), ("setting.ROUNDS", ROUNDS), ("setting.DURATION", DURATION),
             ("setting.WARMUP", WARMUP), ("setting.VIEWERS", VIEWERS), ("setting.VARIANTS", " ".join(VARIANTS)), ("machine", machine), ("browser", chromium_version)]
    CPU_KEYS = ("server_cpu", "ms_per_frame", "browser_cpu", "busy", "other", "source_fps", "encoded_fps")
    keys = {"rtsp": ("fps", "missing", "unreadable", "p50", "p95", "p99", "max", "server_cpu", "other"),
            "browser": ("fps", "missing", "unreadable", "mismatch", "p50", "p95", "p99", "max", "now_p50", "now_p95",
                        "recv_p50", "recv_p95", "skew_ms", "read_ms_p50", "server_cpu", "browser_cpu", "other"),
            "cpu0": CPU_KEYS + ("poll_ms",), "cpu1": CPU_KEYS, "cpu4": CPU_KEYS, "console": CPU_KEYS + ("requests",)}
    for v, ks in keys.items():
        for k in ks:
            lines.append((f"{v}.{k}", " ".join(num(w.get(k)) for w in R[v])))
    lines.append(("stage", stage))
    for i, (text, ok) in enumerate(goals):
        lines.append((f"goal.{i + 1}", f"{'met' if ok else 'missed'}: {text}"))
    lines += [("ended", time.strftime("%Y-%m-%dT%H:%M:%S%z")), ("load_end", " ".join(open("/proc/loadavg").read().split()[:3])),
              ("status", 1 if failed else 0)]
    with open(os.path.join(d, "console.tsv"), "w") as f:
        for k, v in lines:
            f.write(f"{k}\t{' '.join(str(v).split())}\n")


if __name__ == "__main__":
    rc = 1
    try:
        rc = main()
    finally:
        cleanup()
    sys.exit(rc)
