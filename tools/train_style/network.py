"""The student: a small feed-forward style network in the spirit of Create ML's "video" styles
(few filters, no normalisation layers, so a frame's look does not depend on the statistics of
the whole frame and a still scene does not shimmer), written in JAX for training and exported to
ONNX with free height and width for lensstylize.

    input  [1, 3, H, W] RGB in [0, 1]   (H, W multiples of 4; lensstylize rounds sizes to 8)
    enc1   conv 3x3, 3 -> F1, ReLU                      (full size)
    enc2   conv 3x3 stride 2, F1 -> F2, ReLU            (1/2)
    enc3   conv 3x3 stride 2, F2 -> F2, ReLU            (1/4)
    res    R residual blocks: conv 3x3, ReLU, conv 3x3, + input   (1/4)
    up1    nearest x2, conv 3x3, F2 -> F1, ReLU, + enc2 projected by a 1x1 conv (1/2)
    up2    nearest x2, conv 3x3, F1 -> F1, ReLU         (full size)
    out    conv 3x3, F1 -> 3, sigmoid                   RGB in [0, 1]

The default shape, F1=32, F2=64, R=4, has ~380k parameters (1.5 MB of float32) and costs
~2.3 GMAC at 320x180: ~10 ms a frame on one core here through OpenVINO (bf16), ~20 ms in f32 —
inside the 25 ms budget. 16,32,3 is a quarter of that and visibly flatter. The skip at half size carries edges past the bottleneck: content stays sharp.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Shape:
    f1: int = 32
    f2: int = 64
    blocks: int = 4

    def layers(self):
        """(name, out, in, k, stride) of every convolution, in order."""
        f1, f2 = self.f1, self.f2
        ls = [("enc1", f1, 3, 3, 1), ("enc2", f2, f1, 3, 2), ("enc3", f2, f2, 3, 2)]
        for i in range(self.blocks):
            ls += [(f"res{i}a", f2, f2, 3, 1), (f"res{i}b", f2, f2, 3, 1)]
        ls += [("up1", f1, f2, 3, 1), ("skip", f1, f2, 1, 1), ("up2", f1, f1, 3, 1), ("out", 3, f1, 3, 1)]
        return ls


def init(shape: Shape, seed: int):
    """He-initialised weights (OIHW) and zero biases; residual branches start near zero so the
    untrained network is a plain encoder-decoder."""
    rng = np.random.default_rng(seed)
    params = {}
    for name, o, i, k, _ in shape.layers():
        std = np.sqrt(2.0 / (i * k * k))
        if name.endswith("b") and name.startswith("res"):
            std *= 0.1
        if name == "out":
            std = np.sqrt(1.0 / (i * k * k))
        params[name] = {"w": (rng.standard_normal((o, i, k, k)) * std).astype(np.float32),
                        "b": np.zeros(o, np.float32)}
    return params


def count(params):
    return sum(int(np.prod(p["w"].shape)) + int(np.prod(p["b"].shape)) for p in params.values())


def forward(params, x, shape: Shape):
    """x: [N, H, W, 3] in [0, 1] (NHWC: XLA's fast layout on CPU); returns [N, H, W, 3]."""
    import jax
    import jax.numpy as jnp

    def conv(name, h, stride=1):
        w = jnp.transpose(params[name]["w"], (2, 3, 1, 0))  # OIHW -> HWIO
        k = w.shape[0]
        pad = k // 2
        y = jax.lax.conv_general_dilated(h, w, (stride, stride), [(pad, pad), (pad, pad)],
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return y + params[name]["b"]

    def up(h):
        return jnp.repeat(jnp.repeat(h, 2, axis=1), 2, axis=2)

    relu = jax.nn.relu
    e1 = relu(conv("enc1", x))
    e2 = relu(conv("enc2", e1, 2))
    h = relu(conv("enc3", e2, 2))
    for i in range(shape.blocks):
        h = h + conv(f"res{i}b", relu(conv(f"res{i}a", h)))
    h = relu(conv("up1", up(h))) + conv("skip", e2)
    h = relu(conv("up2", up(h)))
    return jax.nn.sigmoid(conv("out", h))


def export_onnx(params, shape: Shape, path: str, doc: str = ""):
    """The same network as an ONNX graph (opset 13, NCHW, height and width free)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []

    def conv(name, src, dst, stride=1):
        w = np.asarray(params[name]["w"], np.float32)
        b = np.asarray(params[name]["b"], np.float32)
        inits.append(numpy_helper.from_array(w, f"{name}.w"))
        inits.append(numpy_helper.from_array(b, f"{name}.b"))
        k = w.shape[2]
        p = k // 2
        nodes.append(helper.make_node("Conv", [src, f"{name}.w", f"{name}.b"], [dst], name=name,
                                      kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p]))

    def relu(src, dst):
        nodes.append(helper.make_node("Relu", [src], [dst]))

    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up.scales")
    inits.append(scales)

    def up(src, dst):
        nodes.append(helper.make_node("Resize", [src, "", "up.scales"], [dst], mode="nearest",
                                      coordinate_transformation_mode="asymmetric", nearest_mode="floor"))

    conv("enc1", "input", "enc1.c"); relu("enc1.c", "e1")
    conv("enc2", "e1", "enc2.c", 2); relu("enc2.c", "e2")
    conv("enc3", "e2", "enc3.c", 2); relu("enc3.c", "h0")
    h = "h0"
    for i in range(shape.blocks):
        conv(f"res{i}a", h, f"res{i}a.c"); relu(f"res{i}a.c", f"res{i}a.r")
        conv(f"res{i}b", f"res{i}a.r", f"res{i}b.c")
        nodes.append(helper.make_node("Add", [h, f"res{i}b.c"], [f"h{i + 1}"]))
        h = f"h{i + 1}"
    up(h, "u1"); conv("up1", "u1", "up1.c"); relu("up1.c", "up1.r")
    conv("skip", "e2", "skip.c")
    nodes.append(helper.make_node("Add", ["up1.r", "skip.c"], ["m1"]))
    up("m1", "u2"); conv("up2", "u2", "up2.c"); relu("up2.c", "up2.r")
    conv("out", "up2.r", "out.c")
    nodes.append(helper.make_node("Sigmoid", ["out.c"], ["output"]))

    graph = helper.make_graph(
        nodes, "streamlens-style",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, "height", "width"])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, "height", "width"])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="streamlens train-style")
    model.doc_string = doc
    onnx.checker.check_model(model)
    onnx.save(model, path)


def load_onnx(path: str):
    """The weights and shape of a network export_onnx wrote (to go on training it: --init)."""
    import onnx
    from onnx import numpy_helper

    weights = {t.name: numpy_helper.to_array(t).astype(np.float32) for t in onnx.load(path).graph.initializer}
    try:
        blocks = len([n for n in weights if n.startswith("res") and n.endswith("a.w")])
        shape = Shape(weights["enc1.w"].shape[0], weights["enc2.w"].shape[0], blocks)
        params = {name: {"w": weights[f"{name}.w"], "b": weights[f"{name}.b"]} for name, *_ in shape.layers()}
    except KeyError as e:
        raise ValueError(f"{path} is not a network train-style wrote (no weight {e})") from None
    for name, o, i, k, _ in shape.layers():
        if params[name]["w"].shape != (o, i, k, k):
            raise ValueError(f"{path}: weight {name} is {params[name]['w'].shape}, not {(o, i, k, k)}")
    return shape, params
