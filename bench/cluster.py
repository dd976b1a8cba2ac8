#!/usr/bin/env python3
"""make bench-cluster: three `streamlens serve --config` instances with `cluster:` and one etcd
(Debian's, on loopback, data in a temporary folder), six cameras (a 160x120 10 fps clip each,
lensmetadata into a file per instance).

1. Failover: KILLS times (10), kill -9 of the busiest instance; the time until every one of its
   cameras writes on another instance (files sampled every 0.1 s); the victim is started again
   and the cluster left to settle before the next kill. Median and p95.
2. Release: SIGTERM of the busiest, the same measure (3 times).
3. The cost of coordination, over MINUTE seconds (60) of steady state: requests etcd handled (its
   own counters, /metrics: grpc_server_handled_total), and the CPU the three instances used,
   with the six cameras and with none (the loop alone), per camera per minute.

Usage: bench/cluster.py STREAMLENS_BIN (environment: KILLS, MINUTE).
"""
import json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time, urllib.request

BIN = sys.argv[1] if len(sys.argv) > 1 else ".build/release/streamlens"
KILLS = int(os.environ.get("KILLS", "10"))
MINUTE = float(os.environ.get("MINUTE", "60"))
CAMS = [f"cam{i}" for i in range(1, 7)]
INST = ["a", "b", "c"]


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def wait_port(port, timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close(); return True
        except OSError:
            time.sleep(0.05)
    return False


work = tempfile.mkdtemp(prefix="streamlens-bench-cluster-")
procs = {}
try:
    clip = f"{work}/clip.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10", "-t", "3600",
                    "-c:v", "libx264", "-preset", "ultrafast", "-g", "10", clip], check=True)
    eport, pport = free_port(), free_port()
    etcd = subprocess.Popen(["etcd", "--name", "bench", "--data-dir", f"{work}/etcd", "--listen-client-urls", f"http://127.0.0.1:{eport}",
                             "--advertise-client-urls", f"http://127.0.0.1:{eport}", "--listen-peer-urls", f"http://127.0.0.1:{pport}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{pport}", "--initial-cluster", f"bench=http://127.0.0.1:{pport}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_port(eport, 30), "etcd did not start"
    ports = {i: free_port() for i in INST}

    def start(i):
        os.makedirs(f"{work}/out-{i}", exist_ok=True)
        with open(f"{work}/{i}.yaml", "w") as f:
            f.write(f"""http:
  listen: 127.0.0.1:{ports[i]}
pipeline: >-
  uridecodebin uri=${{URI}} ! videoconvert ! video/x-raw,format=BGRx
  ! lensmetadata location={work}/out-{i}/${{NAME}}.jsonl ! fakesink sync=true
cluster:
  etcd: http://127.0.0.1:{eport}
  instance: {i}
""")
        procs[i] = subprocess.Popen([BIN, "serve", "--config", f"{work}/{i}.yaml"], stdout=subprocess.DEVNULL,
                                    stderr=open(f"{work}/{i}.log", "a"))
        assert wait_port(ports[i], 30), f"instance {i} did not answer"

    sizes = {}

    def sample():
        who = {}
        for c in CAMS:
            who[c] = ""
            for i in INST:
                try:
                    s = os.path.getsize(f"{work}/out-{i}/{c}.jsonl")
                except OSError:
                    s = 0
                if s != sizes.get(i + c, 0):
                    who[c] += i
                sizes[i + c] = s
        return who

    def placement(settle=3, timeout=60, interval=1.0):
        """Every camera on exactly one instance for `settle` samples in a row."""
        sample(); ok = 0; end = time.time() + timeout
        while time.time() < end:
            time.sleep(interval); w = sample()
            ok = ok + 1 if all(len(v) == 1 for v in w.values()) else 0
            if ok >= settle:
                return w
        raise SystemExit(f"not settled: {sample()}")

    def cpu(pid):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def etcd_requests():
        text = urllib.request.urlopen(f"http://127.0.0.1:{eport}/metrics", timeout=5).read().decode()
        # Every request the gateway passed on: unary ones (range, put, txn, grant) and the lease
        # renewals (a keep-alive stream each through the gateway).
        return sum(float(m.group(1)) for m in re.finditer(r'^grpc_server_handled_total\{[^}]*\} (\S+)', text, re.M))

    for i in INST:
        start(i)
    # The loop alone: no camera.
    time.sleep(3)
    c0 = {i: cpu(procs[i].pid) for i in INST}; e0 = etcd_requests(); t0 = time.time()
    time.sleep(MINUTE)
    idle_cpu = sum(cpu(procs[i].pid) - c0[i] for i in INST) / (time.time() - t0) * 60
    idle_requests = (etcd_requests() - e0) / (time.time() - t0) * 60
    for c in CAMS:
        req = urllib.request.Request(f"http://127.0.0.1:{ports['a']}/api/sources", method="POST",
                                     data=json.dumps({"name": c, "uri": f"file://{clip}"}).encode(), headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()
    w = placement()
    time.sleep(2)
    c0 = {i: cpu(procs[i].pid) for i in INST}; e0 = etcd_requests(); t0 = time.time()
    time.sleep(MINUTE)
    busy_cpu = sum(cpu(procs[i].pid) - c0[i] for i in INST) / (time.time() - t0) * 60
    busy_requests = (etcd_requests() - e0) / (time.time() - t0) * 60
    w = placement()

    def move(sig, label):
        counts = {i: sum(1 for v in w.values() if v == i) for i in INST}
        victim = max(INST, key=lambda i: (counts[i], i))
        theirs = [c for c, v in w.items() if v == victim]
        sample()
        procs[victim].send_signal(sig); t = time.time()
        moved = set()
        while time.time() - t < 60 and len(moved) < len(theirs):
            time.sleep(0.1)
            now = sample()
            moved |= {c for c in theirs if now[c] and victim not in now[c]}
        took = time.time() - t
        procs[victim].wait()
        start(victim)
        return took

    failovers = []
    for k in range(KILLS):
        failovers.append(move(signal.SIGKILL, "kill -9"))
        w = placement(timeout=90)
        print(f"kill -9 {k + 1}: cameras back in {failovers[-1]:.1f} s", flush=True)
    releases = []
    for k in range(3):
        releases.append(move(signal.SIGTERM, "SIGTERM"))
        w = placement(timeout=90)
        print(f"SIGTERM {k + 1}: cameras moved in {releases[-1]:.1f} s", flush=True)

    def p95(v):
        v = sorted(v); return v[min(len(v) - 1, int(round(0.95 * (len(v) - 1))))]

    print()
    print(f"bench-cluster: 3 instances, 6 cameras, etcd {subprocess.run(['etcd', '--version'], capture_output=True, text=True).stdout.split()[2]}, lease 5 s")
    print(f"  failover after kill -9 ({KILLS}): median {statistics.median(failovers):.1f} s, p95 {p95(failovers):.1f} s (goal <= 10 s)")
    print(f"  move after SIGTERM (3): median {statistics.median(releases):.1f} s")
    print(f"  etcd requests: {idle_requests:.0f}/min for the 3 instances with no camera, {busy_requests:.0f}/min with 6 "
          f"({(busy_requests - idle_requests) / 6:.1f} per camera per minute beyond the loop's)")
    print(f"  instances' CPU: {idle_cpu:.2f} CPU-s/min with no camera (the loop alone, {idle_cpu / 3:.2f} each); "
          f"{busy_cpu:.2f} CPU-s/min with 6 cameras ({busy_cpu / 6:.2f} per camera, pipelines included)")
finally:
    for p in procs.values():
        if p.poll() is None:
            p.kill()
    try:
        etcd.kill()
    except Exception:
        pass
    shutil.rmtree(work, ignore_errors=True)
