#!/usr/bin/env python3
"""make bench-http: the HTTP API under load (issue "An HTTP API for run and serve").

One `streamlens serve --http` with N (16) live 640x360 30 fps sources (a testsrc2 clip played at
its own pace: identity sync=true, lenspass), all added by POST. Then, in ROUNDS interleaved
rounds of two phases each:
  quiet    nothing else talks to the server
  hostile  IDLE (1000) connections held open and 8 clients trickling a request a byte every
           0.5 s (slowloris), reconnecting when closed
and in each phase: REQUESTS (200) GET /api/sources one after another (latency of each, from
sending to the last byte, on a kept-alive connection), REQUESTS PATCH {"delay": 0} of one
source's lenspass (latency of each: the property is set on the element before the answer, and
the stage reads it before its next frame), and the frames delivered by every source meanwhile
(the sum of the sources' frame counts, before and after, over the phase's seconds).
Prints p50/p95 per phase, hostile/quiet ratios (interleaved rounds: the same machine state),
and the goals: GET /api/sources p95 <= 5 ms with 16 sources; PATCH p95 under one frame (33 ms);
the hostile phase's frames and p95 within 10 % of the quiet one's.
Usage: bench/http_api.py path/to/streamlens   (N=16 ROUNDS=3 REQUESTS=200 IDLE=1000)
"""
import http.client, json, os, resource, socket, statistics, subprocess, sys, tempfile, threading, time

BIN = sys.argv[1] if len(sys.argv) > 1 else sys.exit("usage: bench/http_api.py path/to/streamlens")
N = int(os.environ.get("N", 16)); ROUNDS = int(os.environ.get("ROUNDS", 3))
REQUESTS = int(os.environ.get("REQUESTS", 200)); IDLE = int(os.environ.get("IDLE", 1000))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))

out = os.path.join("out", "bench"); os.makedirs(out, exist_ok=True)
clip = os.path.join(out, "http-640x360.mp4")
if not os.path.exists(clip):
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-t", "120",
                    "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", clip], check=True)
tmp = tempfile.mkdtemp(prefix="bench-http-")
template = os.path.join(tmp, "t.pipeline")
with open(template, "w") as f:
    f.write("uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=BGRx ! identity sync=true ! lenspass name=pass ! fakesink\n")
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
log = open(os.path.join(tmp, "serve.log"), "w")
serve = subprocess.Popen([BIN, "serve", "-q", "--http", str(port), template], stderr=log)
import atexit
atexit.register(lambda: serve.poll() is None and serve.kill())

def conn(): return http.client.HTTPConnection("127.0.0.1", port, timeout=30)
def call(c, method, path, body=None):
    t0 = time.perf_counter()
    c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
    r = c.getresponse(); data = r.read()
    return time.perf_counter() - t0, r.status, data

for _ in range(300):
    try:
        if call(conn(), "GET", "/healthz")[1] == 200: break
    except OSError: time.sleep(0.1)
uri = "file://" + os.path.abspath(clip)
adds = []
for i in range(N):
    t, status, body = call(conn(), "POST", "/api/sources", json.dumps({"name": "cam%d" % i, "uri": uri}))
    if status != 201: sys.exit("POST cam%d: %d %s" % (i, status, body[:200]))
    adds.append(t)
time.sleep(5)

def frames(c):
    return sum(s["frames"] for s in json.loads(call(c, "GET", "/api/sources")[2]))

stop = threading.Event()
def trickle():
    while not stop.is_set():
        try:
            x = socket.create_connection(("127.0.0.1", port), timeout=5)
            for b in b"GET /api/sources HTTP/1.1\r\nX-Slow: " + b"a" * 100000:
                if stop.is_set(): break
                x.send(bytes([b])); time.sleep(0.5)
        except OSError: pass

def phase(hostile):
    idle, threads = [], []
    if hostile:
        stop.clear()
        for _ in range(IDLE):
            try: idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError: break
        threads = [threading.Thread(target=trickle) for _ in range(8)]
        for t in threads: t.start()
        time.sleep(1)
    c = conn()
    f0, t0 = frames(c), time.time()
    gets = [call(c, "GET", "/api/sources")[0] for _ in range(REQUESTS)]
    patches = []
    for _ in range(REQUESTS):
        t, status, _ = call(c, "PATCH", "/api/sources/cam0/stages/pass", '{"delay": 0}')
        if status != 200: sys.exit("PATCH: %d" % status)
        patches.append(t)
    time.sleep(max(0, 5 - (time.time() - t0)))
    fps = (frames(c) - f0) / (time.time() - t0)
    stop.set()
    for t in threads: t.join()
    for x in idle: x.close()
    return gets, patches, fps, len(idle)

def p95(xs): return sorted(xs)[int(0.95 * (len(xs) - 1))]
results = {"quiet": [], "hostile": []}
for r in range(ROUNDS):
    for name in ("quiet", "hostile"):
        print("round %d: %s" % (r + 1, name), file=sys.stderr, flush=True)
        results[name].append(phase(name == "hostile"))
serve.send_signal(2); rc = serve.wait(60)
print("bench-http: %d sources (640x360 30 fps, lenspass) in one streamlens serve --http; %d rounds, %d requests each" % (N, ROUNDS, REQUESTS))
print("  POST /api/sources (to playing): median %.0f ms, max %.0f ms" % (1000 * statistics.median(adds), 1000 * max(adds)))
summary = {}
for name, rs in results.items():
    gets = [x for r in rs for x in r[0]]; patches = [x for r in rs for x in r[1]]
    fps = statistics.median(r[2] for r in rs)
    summary[name] = (p95(gets), p95(patches), fps)
    print("  %-7s GET /api/sources p50 %.2f ms p95 %.2f ms | PATCH p50 %.2f ms p95 %.2f ms | frames %.1f/s (all sources)%s" % (
        name, 1000 * statistics.median(gets), 1000 * p95(gets), 1000 * statistics.median(patches), 1000 * p95(patches), fps,
        "" if name == "quiet" else " | idle connections held %d" % min(r[3] for r in rs)))
q, h = summary["quiet"], summary["hostile"]
print("  hostile/quiet: GET p95 %.2fx, PATCH p95 %.2fx, frames %.3fx" % (h[0] / q[0], h[1] / q[1], h[2] / q[2]))
goals = [("GET /api/sources p95 <= 5 ms with %d sources (hostile phase too)" % N, max(q[0], h[0]) <= 0.005),
         ("PATCH p95 < one frame (33 ms)", max(q[1], h[1]) < 0.0333),
         ("frames under hostile clients >= 0.9x quiet", h[2] >= 0.9 * q[2])]
for text, ok in goals: print("  goal %s: %s" % (text, "met" if ok else "MISSED"))
sys.exit(0 if rc == 0 else 1)
