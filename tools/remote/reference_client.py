#!/usr/bin/env python3
"""Reference KServe v2 client (tritonclient.http, binary tensors) for latency baselines.

    .deps/triton-venv/bin/python tools/remote/reference_client.py --url 127.0.0.1:8000 \
        --model blazeface --shape 1,128,128,3 --input input --requests 200 [--binary]

Sends the same seeded random FP32 tensor N times (after 10 warm-up requests) and prints
one JSON line with p50/p95/mean latency and binary payload sizes.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import tritonclient.http as httpclient


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="127.0.0.1:8000", help="host:port (no scheme)")
    p.add_argument("--model", required=True)
    p.add_argument("--shape", required=True, help="full shape incl. batch, e.g. 1,128,128,3")
    p.add_argument("--input", default=None, help="input name (default: first input from metadata)")
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--binary", action="store_true", default=True,
                   help="binary tensor data for inputs and outputs (always on; kept for CLI compatibility)")
    args = p.parse_args()

    url = args.url.split("://", 1)[-1]
    client = httpclient.InferenceServerClient(url=url, connection_timeout=10, network_timeout=60)
    meta = client.get_model_metadata(args.model)
    in_name = args.input or meta["inputs"][0]["name"]
    out_names = [o["name"] for o in meta["outputs"]]
    shape = [int(x) for x in args.shape.split(",")]

    data = np.random.default_rng(args.seed).random(shape, dtype=np.float32)
    inp = httpclient.InferInput(in_name, shape, "FP32")
    inp.set_data_from_numpy(data, binary_data=True)
    outs = [httpclient.InferRequestedOutput(n, binary_data=True) for n in out_names]

    def one():
        return client.infer(args.model, inputs=[inp], outputs=outs)

    res = None
    for _ in range(args.warmup):
        res = one()
    times = []
    for _ in range(args.requests):
        t0 = time.perf_counter()
        res = one()
        times.append((time.perf_counter() - t0) * 1000.0)
    resp_bytes = sum(res.as_numpy(n).nbytes for n in out_names)
    t = np.array(times)
    print(json.dumps({
        "client": "tritonclient.http",
        "model": args.model,
        "requests": args.requests,
        "p50_ms": round(float(np.percentile(t, 50)), 3),
        "p95_ms": round(float(np.percentile(t, 95)), 3),
        "mean_ms": round(float(t.mean()), 3),
        "request_bytes": int(data.nbytes),
        "response_bytes": int(resp_bytes),
        "outputs": {n: list(res.as_numpy(n).shape) for n in out_names},
    }), flush=True)
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
