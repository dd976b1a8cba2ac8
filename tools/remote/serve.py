#!/usr/bin/env python3
"""Loopback Open Inference Protocol (KServe v2) server for StreamLens tests/benchmarks.

Serves OpenVINO models (.tflite / .onnx / .xml) through NVIDIA PyTriton's bundled
tritonserver, HTTP only, bound to 127.0.0.1.

    .deps/triton-venv/bin/python tools/remote/serve.py --port 8000 \
        --model blazeface=$(streamlens models path mediapipe-face-detection)/face_detection_short_range.tflite \
        --model mosaic=Models/mosaic.onnx [--precision f32|default] [--home DIR]

Prints "serving NAME at http://127.0.0.1:PORT/v2/models/NAME" per model once it is
ready (stdout, flushed). SIGTERM/SIGINT stop the server cleanly (exit 0).

Tensor layout on the wire: every model is bound with max_batch_size >= 1, so the v2
metadata reports the batch dimension first as -1 and clients send the full shape
including the batch dimension (e.g. [1,128,128,3]). Input/output names are the
model's own tensor names.
"""
from __future__ import annotations

import argparse
import logging
import os
import pathlib
import signal
import sys
import sysconfig
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _ensure_libpython_path() -> None:
    """Re-exec with the running Python's LIBDIR on LD_LIBRARY_PATH.

    Triton's python backend stub dlopens libpython; without our LIBDIR first it picks
    up the system libpython and fails ('_thread.RLock' has no '_recursion_count').
    """
    libdir = sysconfig.get_config_var("LIBDIR")
    if not libdir or not os.path.isdir(libdir):
        return
    current = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    if current and current[0] == libdir:
        return
    if os.environ.get("STREAMLENS_SERVE_REEXEC") == "1":
        return  # avoid loops if something strips it again
    os.environ["LD_LIBRARY_PATH"] = ":".join([libdir] + [p for p in current if p != libdir])
    os.environ["STREAMLENS_SERVE_REEXEC"] = "1"
    os.execv(sys.executable, [sys.executable] + sys.argv)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=8000, help="HTTP port on 127.0.0.1")
    p.add_argument("--model", action="append", required=True, metavar="NAME=PATH",
                   help="model to serve (repeatable)")
    p.add_argument("--precision", choices=["f32", "default"], default="f32",
                   help="f32 sets INFERENCE_PRECISION_HINT=f32 (bit-identical to local f32)")
    p.add_argument("--home", default=str(ROOT / ".deps" / "pytriton-home"),
                   help="PYTRITON_HOME (tritonserver copy + workspaces)")
    p.add_argument("--max-batch-size", type=int, default=1,
                   help="Triton max_batch_size (>=1; metadata shows batch dim as -1)")
    p.add_argument("--instances", type=int, default=1,
                   help="model instances (concurrent infer requests) per model")
    p.add_argument("--verbose", action="store_true")
    return p.parse_args(argv)


def main() -> int:
    _ensure_libpython_path()
    args = parse_args()
    # PyTriton echoes tritonserver's log to sys.stdout; keep stdout for our "serving" lines only.
    out = sys.stdout
    sys.stdout = sys.stderr
    os.environ["PYTRITON_HOME"] = str(pathlib.Path(args.home).resolve())
    # PyTriton talks to each model over a Unix socket at HOME/workspace_XXXXXXXX/NAME_0_0-server.sock;
    # a longer path than sun_path's 107 bytes fails after start-up, on the first request
    # (HTTP 500 "Event loop is closed"). Refuse it now.
    for spec in args.model:
        name = spec.split("=", 1)[0]
        sock = os.path.join(os.environ["PYTRITON_HOME"], "workspace_XXXXXXXX", f"{name}_0_0-server.sock")
        if len(sock) > 107:
            print(f"serve.py: --home {os.environ['PYTRITON_HOME']} is too long for model {name}'s socket "
                  f"({len(sock)} > 107 bytes): use a shorter folder", file=sys.stderr)
            return 2
    pathlib.Path(os.environ["PYTRITON_HOME"]).mkdir(parents=True, exist_ok=True)

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s", stream=sys.stderr)

    # Imports after PYTRITON_HOME is set (pytriton reads it at import time).
    import numpy as np
    import openvino as ov
    from pytriton.decorators import batch
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
    from pytriton.triton import Triton, TritonConfig

    stop = threading.Event()
    parent = os.getppid()
    # A process group of our own (tritonserver and its Python stubs join it), so whoever
    # started us can kill the whole server at once: kill(-pid, SIGKILL), a crash as tests stage it.
    try:
        os.setpgid(0, 0)
    except OSError:
        pass

    def on_signal(signum, _frame):
        stop.set()

    # A parent (a test runner) may hand its blocked signal mask down: take SIGTERM/SIGINT back.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    core = ov.Core()
    compile_cfg = {"INFERENCE_PRECISION_HINT": "f32"} if args.precision == "f32" else {}

    def np_dtype(port):
        return np.dtype(port.get_element_type().to_dtype())

    def dims_wo_batch(pshape):
        return tuple(-1 if d.is_dynamic else d.get_length() for d in list(pshape)[1:])

    specs = []
    for spec in args.model:
        if "=" not in spec:
            print(f"serve.py: --model expects NAME=PATH, got {spec!r}", file=sys.stderr)
            return 2
        name, path = spec.split("=", 1)
        path = pathlib.Path(path)
        if not path.is_absolute() and not path.exists():
            path = ROOT / path
        if not path.exists():
            print(f"serve.py: model file not found: {path}", file=sys.stderr)
            return 2
        model = core.read_model(str(path))
        # Dynamic batch -> 1 (other dynamic dims stay dynamic).
        new_shapes = {}
        for port in model.inputs:
            ps = port.get_partial_shape()
            if ps.rank.is_static and len(ps) > 0 and ps[0].is_dynamic:
                dims = list(ps)
                dims[0] = ov.Dimension(1)
                new_shapes[port.get_any_name()] = ov.PartialShape(dims)
        if new_shapes:
            model.reshape(new_shapes)
        for port in list(model.inputs) + list(model.outputs):
            ps = port.get_partial_shape()
            if ps.rank.is_dynamic or len(ps) == 0 or ps[0].is_dynamic or ps[0].get_length() != 1:
                print(f"serve.py: {name}: tensor {port.get_any_name()} shape {ps} has no batch-1 leading dim",
                      file=sys.stderr)
                return 2
        compiled = core.compile_model(model, "CPU", compile_cfg)
        in_names = [p.get_any_name() for p in compiled.inputs]
        out_names = [p.get_any_name() for p in compiled.outputs]
        inputs = [Tensor(name=p.get_any_name(), dtype=np_dtype(p), shape=dims_wo_batch(p.get_partial_shape()))
                  for p in compiled.inputs]
        outputs = [Tensor(name=p.get_any_name(), dtype=np_dtype(p), shape=dims_wo_batch(p.get_partial_shape()))
                   for p in compiled.outputs]
        out_dtypes = {p.get_any_name(): np_dtype(p) for p in compiled.outputs}

        def make_infer(compiled=compiled, in_names=in_names, out_names=out_names, out_dtypes=out_dtypes):
            req = compiled.create_infer_request()
            lock = threading.Lock()

            @batch
            def infer(**kw):
                n = next(iter(kw.values())).shape[0]
                parts = {o: [] for o in out_names}
                with lock:
                    for i in range(n):
                        res = req.infer({k: np.ascontiguousarray(kw[k][i:i + 1]) for k in in_names})
                        for o in out_names:
                            parts[o].append(np.array(res[o], dtype=out_dtypes[o], copy=True))
                return {o: np.concatenate(parts[o], axis=0) for o in out_names}

            return infer

        infer_funcs = [make_infer() for _ in range(max(1, args.instances))]
        specs.append((name, infer_funcs, inputs, outputs))
        logging.info("%s: %s inputs=%s outputs=%s", name, path, inputs, outputs)

    config = TritonConfig(
        http_address="127.0.0.1",
        http_port=args.port,
        allow_grpc=False,
        grpc_address="127.0.0.1",
        allow_metrics=False,
        allow_gpu_metrics=False,
        allow_cpu_metrics=False,
        metrics_address="127.0.0.1",
        allow_sagemaker=False,
        allow_vertex_ai=False,
        exit_timeout_secs=5,
        log_verbose=1 if args.verbose else 0,
    )
    triton = Triton(config=config)
    try:
        for name, funcs, inputs, outputs in specs:
            triton.bind(
                model_name=name,
                infer_func=funcs if len(funcs) > 1 else funcs[0],
                inputs=inputs,
                outputs=outputs,
                config=ModelConfig(batching=True, max_batch_size=max(1, args.max_batch_size),
                                   batcher=DynamicBatcher()),
                strict=False,
            )
        triton.run()
        for name, *_ in specs:
            url = f"http://127.0.0.1:{args.port}/v2/models/{name}"
            deadline = time.monotonic() + 60
            while not stop.is_set():
                try:
                    with urllib.request.urlopen(url + "/ready", timeout=2) as r:
                        if r.status == 200:
                            break
                except Exception:
                    pass
                if time.monotonic() > deadline:
                    print(f"serve.py: {name} not ready after 60 s", file=sys.stderr)
                    return 1
                time.sleep(0.1)
            print(f"serving {name} at {url}", file=out, flush=True)
        while not stop.wait(1.0):
            if os.getppid() != parent:
                return 0  # whoever started us (a test) is gone: do not outlive it
            if not triton.is_alive():
                print("serve.py: triton server died", file=sys.stderr)
                return 1
        return 0
    finally:
        triton.stop()


if __name__ == "__main__":
    sys.exit(main())
