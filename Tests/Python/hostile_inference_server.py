"""An Open Inference Protocol (KServe v2) server on loopback that answers inference badly on
purpose, for CLITests/HostileServerTests: a broken or hostile server must cost StreamLens one
failed request per frame at most, never the run.

    python3 Tests/Python/hostile_inference_server.py MODE      prints "port N" once it listens

Metadata (GET /v2/models/face-short-range) and readiness are answered correctly — MediaPipe's
short-range face detector: input [1,128,128,3] FP32, outputs regressors [1,896,16] and
classificators [1,896,1] — and every POST …/infer as MODE says:

    neg-length     Content-Length: -1
    neg-chunk      a chunked body whose first chunk size is -1
    neg-header     Inference-Header-Content-Length: -1
    neg-binary     an output whose binary_data_size is -16
    huge-shape     an output shape whose element count overflows 64 bits
    huge-length    Content-Length: 10^14, one byte, then nothing
    endless-line   a header line that never ends (4 KB every 10 ms)
    trickle        a plausible status line and headers, one byte a second
    garbage        random bytes, then the connection closed
    hang-up        the connection closed without an answer
    wrong-shape    well framed, but outputs of another model's shapes
    huge-keypoints well framed: one confident face with a sane box and keypoints at 1e20
    metadata-huge-shape  the metadata (not an answer) says regressors is
                   [1, 3037000500, 3037000500, 16], whose element count overflows 64 bits
"""
import json
import os
import socket
import struct
import sys
import threading
import time

MODE = sys.argv[1]
MODEL = "face-short-range"
METADATA = json.dumps({
    "name": MODEL, "versions": ["1"], "platform": "openvino",
    "inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 128, 128, 3]}],
    "outputs": [{"name": "regressors", "datatype": "FP32",
                 "shape": [1, 3037000500, 3037000500, 16] if MODE == "metadata-huge-shape" else [1, 896, 16]},
                {"name": "classificators", "datatype": "FP32", "shape": [1, 896, 1]}],
}).encode()


def answer(conn, status, body, extra=b""):
    conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


def infer_header(outputs):
    return json.dumps({"model_name": MODEL, "outputs": outputs}).encode()


def binary_answer(conn, outputs, payload):
    header = infer_header(outputs)
    answer(conn, b"200 OK", header + payload, b"Inference-Header-Content-Length: " + str(len(header)).encode() + b"\r\n")


GOOD = [{"name": "regressors", "datatype": "FP32", "shape": [1, 896, 16], "parameters": {"binary_data_size": 896 * 16 * 4}},
        {"name": "classificators", "datatype": "FP32", "shape": [1, 896, 1], "parameters": {"binary_data_size": 896 * 4}}]
PAYLOAD = bytes(896 * 17 * 4)


def hostile(conn):
    """The answer to one inference request, as MODE says."""
    if MODE == "neg-length":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n{}")
    elif MODE == "neg-chunk":
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n{}\r\n0\r\n\r\n")
    elif MODE == "neg-header":
        body = infer_header(GOOD) + PAYLOAD
        answer(conn, b"200 OK", body, b"Inference-Header-Content-Length: -1\r\n")
    elif MODE == "neg-binary":
        binary_answer(conn, [dict(GOOD[0], parameters={"binary_data_size": -16}), GOOD[1]], PAYLOAD)
    elif MODE == "huge-shape":
        binary_answer(conn, [dict(GOOD[0], shape=[4611686018427387904, 4]), GOOD[1]], PAYLOAD)
    elif MODE == "huge-length":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000000\r\n\r\n{")
        time.sleep(20)
    elif MODE == "endless-line":
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Endless: ")
        for _ in range(2000):
            conn.sendall(b"a" * 4096)
            time.sleep(0.01)
    elif MODE == "trickle":
        for b in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" * 10:
            conn.sendall(bytes([b]))
            time.sleep(1)
    elif MODE == "garbage":
        conn.sendall(os.urandom(4096))
    elif MODE == "hang-up":
        pass
    elif MODE == "wrong-shape":
        outputs = [dict(GOOD[0], shape=[1, 10, 4], parameters={"binary_data_size": 160}),
                   dict(GOOD[1], shape=[1, 10, 1], parameters={"binary_data_size": 40})]
        binary_answer(conn, outputs, bytes(200))
        return True  # well framed: the connection may carry the next request
    elif MODE == "huge-keypoints":
        regressors = [0.0] * (896 * 16)
        scores = [-100.0] * 896
        face = 300
        scores[face] = 100.0
        regressors[face * 16 + 2:face * 16 + 4] = [20.0, 20.0]  # a 20x20 box at the anchor
        regressors[face * 16 + 4:face * 16 + 16] = [1e20] * 12   # six keypoints far away
        binary_answer(conn, GOOD, struct.pack("<%df" % len(regressors), *regressors) + struct.pack("<896f", *scores))
        return True
    return False


def read_request(conn, buffered):
    while b"\r\n\r\n" not in buffered:
        more = conn.recv(65536)
        if not more:
            return None, b"", b""
        buffered += more
    head, rest = buffered.split(b"\r\n\r\n", 1)
    lines = head.decode("latin1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(rest) < length:
        more = conn.recv(65536)
        if not more:
            break
        rest += more
    return lines[0], rest[:length], rest[length:]


def serve(conn):
    buffered = b""
    try:
        while True:
            request, _, buffered = read_request(conn, buffered)
            if request is None:
                return
            method, path = request.split(" ")[:2]
            if method == "GET" and path.endswith("/ready"):
                answer(conn, b"200 OK", b"")
            elif method == "GET" and path.rstrip("/").endswith("/v2/models/" + MODEL):
                answer(conn, b"200 OK", METADATA)
            elif method == "POST" and path.endswith("/infer"):
                if not hostile(conn):
                    return
            else:
                answer(conn, b"404 Not Found", b'{"error":"no such model"}')
    except OSError:
        pass
    finally:
        conn.close()


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(64)
print(f"port {listener.getsockname()[1]}", flush=True)
for _ in range(5000):
    c, _ = listener.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
