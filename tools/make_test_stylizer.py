#!/usr/bin/env python3
"""A test fixture for the feed-forward stylize path: a small random-weight image-to-image ONNX
network with its StreamLens manifest, and a NumPy reference of the same network.

    make_test_stylizer.py --layout NCHW|NHWC --range 255|1 --out DIR [--seed N] [--output-type T]
        writes DIR/stylizer.onnx and DIR/stylizer.json
    make_test_stylizer.py --layout L --range R --out DIR --reference IN.rgb WIDTH HEIGHT OUT.rgb
        runs the network in DIR/stylizer.onnx on a packed RGB8 frame with NumPy and writes the
        packed RGB8 result

The network: conv 3x3 (3 -> 8) + ReLU, conv 3x3 (8 -> 3), sigmoid, times the range. Input and
output are RGB in [0, range] in the given layout, batch 1, height and width free (zero padding
keeps the size). The input is divided by the range first, so both ranges give the same image.
The weights are random (seeded), then rescaled so that on a calibration pattern the values
entering the sigmoid have mean 0 and standard deviation 1 per channel: the output follows the
picture and is not saturated. --output-type float16|uint8 casts the output to that element
type at the end (uint8 rounds, and needs --range 255), as some exported models do: StreamLens
must read it as the same picture.

Reference conventions: input value = u8 / 255 * range; output u8 = clip(floor(v * 255 / range
+ 0.5), 0, 255). Needs numpy and onnx (tools/setup.sh puts them in .deps/python).
"""

import argparse
import json
import os
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    sys.stderr.write(f"make_test_stylizer: {e}; run tools/setup.sh and put .deps/python on PYTHONPATH\n")
    sys.exit(1)

HIDDEN = 8


def calibration_frame(width=64, height=48):
    """RGB in [0, 1]: colour ramps, a diagonal wave and a few hard edges."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = x / (width - 1)
    g = y / (height - 1)
    b = 0.5 + 0.5 * np.sin((x + y) / 5.0)
    img = np.stack([r, g, b])
    img[:, height // 3:height // 2, width // 4:width // 2] = [[[0.9]], [[0.1]], [[0.4]]]
    return img


def conv3x3(x, w, b):
    """Zero-padded 3x3 convolution of (C, H, W) by (O, C, 3, 3)."""
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    h, wd = x.shape[1:]
    y = np.zeros((w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            y += np.einsum("oc,chw->ohw", w[:, :, i, j], xp[:, i:i + h, j:j + wd])
    return y + b[:, None, None]


def forward(params, x):
    """The network on (3, H, W) values in [0, 1] (already divided by the range): its output,
    also in [0, 1], and the values entering the sigmoid."""
    h = np.maximum(conv3x3(x, params["w1"], params["b1"]), 0)
    z = conv3x3(h, params["w2"], params["b2"])
    return 1 / (1 + np.exp(-z)), z


def make_weights(seed):
    rng = np.random.default_rng(seed)
    p = {
        "w1": rng.standard_normal((HIDDEN, 3, 3, 3)) * np.sqrt(2 / 27),
        "b1": rng.standard_normal(HIDDEN) * 0.1,
        "w2": rng.standard_normal((3, HIDDEN, 3, 3)) * np.sqrt(1 / (9 * HIDDEN)),
        "b2": np.zeros(3),
    }
    # Calibrate the second layer: pre-sigmoid values with mean 0 and std 1 per output channel.
    _, z = forward(p, calibration_frame())
    std = z.std(axis=(1, 2))
    std[std < 1e-6] = 1.0
    p["w2"] = p["w2"] / std[:, None, None, None]
    _, z = forward(p, calibration_frame())
    p["b2"] = -z.mean(axis=(1, 2))
    return {k: v.astype(np.float32) for k, v in p.items()}


def build_onnx(params, layout, value_range, output_type="float"):
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    if layout == "NCHW":
        shape = [1, 3, "height", "width"]
        x = "input"
    else:
        shape = [1, "height", "width", 3]
        nodes.append(helper.make_node("Transpose", ["input"], ["input_nchw"], perm=[0, 3, 1, 2]))
        x = "input_nchw"
    nodes += [
        helper.make_node("Mul", [x, const("inverse_range", 1.0 / value_range)], ["unit"]),
        helper.make_node("Conv", ["unit", const("w1", params["w1"]), const("b1", params["b1"])], ["conv1"],
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"]),
        helper.make_node("Conv", ["relu1", const("w2", params["w2"]), const("b2", params["b2"])], ["conv2"],
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["conv2"], ["sigmoid"]),
    ]
    last = "output" if output_type == "float" else "scaled"
    if layout == "NCHW":
        nodes.append(helper.make_node("Mul", ["sigmoid", const("range", value_range)], [last]))
    else:
        nodes.append(helper.make_node("Mul", ["sigmoid", const("range", value_range)], ["output_nchw"]))
        nodes.append(helper.make_node("Transpose", ["output_nchw"], [last], perm=[0, 2, 3, 1]))
    element = {"float": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "uint8": TensorProto.UINT8}[output_type]
    if output_type == "uint8":  # Cast truncates: + 0.5 makes it round, as the reference does
        nodes.append(helper.make_node("Add", [last, const("half", 0.5)], ["rounded"]))
        nodes.append(helper.make_node("Cast", ["rounded"], ["output"], to=element))
    elif output_type == "float16":
        nodes.append(helper.make_node("Cast", [last], ["output"], to=element))
    graph = helper.make_graph(nodes, "streamlens-test-stylizer",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("output", element, shape)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                              producer_name="tools/make_test_stylizer.py")
    onnx.checker.check_model(model, full_check=True)
    return model


def manifest(layout, value_range, seed, width, height):
    vr = [0, int(value_range)]
    return {
        "schema_version": 1,
        "name": "test-stylizer",
        "model": "stylizer.onnx",
        "input": {"width": width, "height": height, "color_order": "RGB", "value_range": vr, "layout": layout,
                  "name": "input"},
        "crop": "stretch",
        "decoder": {"name": "image", "parameters": {"color_order": "RGB", "value_range": vr, "layout": layout}},
        "labels": [],
        "licence": "CC0-1.0 (random weights made by tools/make_test_stylizer.py)",
        "provenance": f"generated by tools/make_test_stylizer.py --layout {layout} --range {int(value_range)} --seed {seed}",
    }


def load_params(onnx_path):
    model = onnx.load(onnx_path)
    found = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    missing = [k for k in ("w1", "b1", "w2", "b2") if k not in found]
    if missing:
        raise SystemExit(f"make_test_stylizer: {onnx_path} is not one of ours (no {', '.join(missing)})")
    return found


def reference(directory, layout, value_range, in_path, width, height, out_path):
    with open(os.path.join(directory, "stylizer.json")) as f:
        m = json.load(f)
    if m["input"]["layout"] != layout or m["input"]["value_range"][1] != value_range:
        raise SystemExit(f"make_test_stylizer: {directory} holds a {m['input']['layout']} range "
                         f"{m['input']['value_range'][1]} stylizer, not {layout} range {value_range:g}")
    params = load_params(os.path.join(directory, "stylizer.onnx"))
    with open(in_path, "rb") as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    if data.size != width * height * 3:
        raise SystemExit(f"make_test_stylizer: {in_path} has {data.size} bytes, {width}x{height} RGB8 needs "
                         f"{width * height * 3}")
    # u8 -> v / 255 * range at the model input; the network divides by the range again.
    values = data.reshape(height, width, 3).transpose(2, 0, 1).astype(np.float64) / 255.0 * value_range
    out, _ = forward(params, values / value_range)
    out = out * value_range
    u8 = np.clip(np.floor(out * 255.0 / value_range + 0.5), 0, 255).astype(np.uint8)
    with open(out_path, "wb") as f:
        f.write(u8.transpose(1, 2, 0).tobytes())


def main(argv=None):
    ap = argparse.ArgumentParser(prog="make_test_stylizer.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--layout", choices=["NCHW", "NHWC"], required=True)
    ap.add_argument("--range", choices=["255", "1"], required=True, dest="value_range")
    ap.add_argument("--out", required=True, help="the directory for stylizer.onnx and stylizer.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--output-type", choices=["float", "float16", "uint8"], default="float",
                    help="the output's element type (default float)")
    ap.add_argument("--width", type=int, default=64, help="the manifest's input width (default 64)")
    ap.add_argument("--height", type=int, default=48, help="the manifest's input height (default 48)")
    ap.add_argument("--reference", nargs=4, metavar=("IN.rgb", "WIDTH", "HEIGHT", "OUT.rgb"),
                    help="run the NumPy reference of DIR/stylizer.onnx on a packed RGB8 frame")
    args = ap.parse_args(argv)
    value_range = float(args.value_range)
    if args.reference:
        in_path, w, h, out_path = args.reference
        reference(args.out, args.layout, value_range, in_path, int(w), int(h), out_path)
        return 0
    if args.output_type == "uint8" and value_range != 255:
        ap.error("--output-type uint8 needs --range 255")
    os.makedirs(args.out, exist_ok=True)
    model = build_onnx(make_weights(args.seed), args.layout, value_range, args.output_type)
    onnx.save(model, os.path.join(args.out, "stylizer.onnx"))
    with open(os.path.join(args.out, "stylizer.json"), "w") as f:
        json.dump(manifest(args.layout, value_range, args.seed, args.width, args.height), f, indent=2)
        f.write("\n")
    print(f"wrote {os.path.join(args.out, 'stylizer.onnx')} and stylizer.json ({args.layout}, range [0, {args.value_range}])")
    return 0


if __name__ == "__main__":
    sys.exit(main())
