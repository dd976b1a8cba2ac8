#!/usr/bin/env python3
"""streamlens import: a Core ML NeuralNetwork image-to-image model (.mlmodel, e.g. a Create ML
style-transfer model) to ONNX plus a StreamLens model manifest.

    python3 tools/coreml_import.py MODEL.mlmodel [-o OUT.onnx] [--name NAME]

Writes OUT.onnx (NCHW, batch 1, height and width symbolic, opset 17, checked with onnx.checker)
and OUT.json (schema_version 1, decoder "image"). The .mlmodel's spec is read with coremltools'
protobuf classes only: no Core ML runtime is needed, so this runs on Linux. Every layer is mapped
here, with onnx.helper; a layer type not in LAYERS stops the import with a message naming the
layer and its type.

Semantics follow the comments in Core ML's NeuralNetwork.proto. Tensors are rank 4 (N, C, H, W)
throughout, which is what image-to-image networks built from the layers below use.

Needs coremltools, onnx and numpy: tools/setup.sh installs them into .deps/python; the
`streamlens import` command runs this script with PYTHONPATH pointing there.
"""

import argparse
import hashlib
import json
import logging
import math
import os
import sys

# coremltools logs "Failed to load _MLModelProxy" warnings on import wherever there is no Core ML
# runtime (everywhere but macOS); reading a spec needs none.
logging.getLogger("coremltools").setLevel(logging.ERROR)

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from coremltools.proto import FeatureTypes_pb2, Model_pb2, NeuralNetwork_pb2
except ImportError as e:  # pragma: no cover - depends on the environment
    sys.stderr.write(
        f"streamlens import: {e}\n"
        "streamlens import needs coremltools, onnx and numpy from .deps/python: run tools/setup.sh "
        "(make setup) and put .deps/python on PYTHONPATH (the `streamlens import` command does).\n"
    )
    sys.exit(1)

OPSET = 17
# Opset 17 belongs to IR version 8; pinning it keeps older ONNX runtimes able to load the file.
IR_VERSION = 8


class ImportFailure(Exception):
    """A model this importer cannot convert; the message says why, for a person."""


# --- weights ----------------------------------------------------------------------------------

def has_values(w):
    return bool(len(w.floatValue) or len(w.float16Value) or len(w.rawValue) or len(w.int8RawValue))


def weights(w, what, layer, count=None):
    """A WeightParams as a float32 vector: float32, float16, or 8-bit quantized (linear or
    look-up table) values."""
    if len(w.floatValue):
        a = np.asarray(w.floatValue, dtype=np.float32)
    elif len(w.float16Value):
        a = np.frombuffer(w.float16Value, dtype="<f2").astype(np.float32)
    elif len(w.rawValue) or len(w.int8RawValue):
        q = w.quantization
        kind = q.WhichOneof("QuantizationType")
        if kind is None:
            raise ImportFailure(f"layer '{layer.name}': {what} holds raw bytes with no quantization parameters")
        if q.numberOfBits != 8:
            raise ImportFailure(f"layer '{layer.name}': {what} is quantized to {q.numberOfBits} bits; "
                                "streamlens import reads 8-bit quantized weights only")
        # rawValue holds unsigned codes; int8RawValue signed ones (linear quantization, no bias).
        codes = np.frombuffer(w.rawValue, dtype=np.uint8) if len(w.rawValue) else np.frombuffer(w.int8RawValue, dtype=np.int8)
        if kind == "lookupTableQuantization":
            table = np.asarray(q.lookupTableQuantization.floatValue, dtype=np.float32)
            a = table[codes]
        else:
            scale = np.asarray(q.linearQuantization.scale, dtype=np.float32)
            bias = np.asarray(q.linearQuantization.bias, dtype=np.float32)
            if len(scale) > 1 or len(bias) > 1:
                # One scale/bias per output channel, the leading axis of the weights (not so for
                # a deconvolution's [in, out, kh, kw]).
                if layer.WhichOneof("layer") == "convolution" and layer.convolution.isDeconvolution:
                    raise ImportFailure(f"layer '{layer.name}': per-channel quantized deconvolution weights "
                                        "are not supported")
                n = max(len(scale), len(bias))
                # Each is one value, or one per channel, or absent (1 and 0): a count in between
                # failed to broadcast (ValueError; found by fuzzing).
                if len(scale) not in (0, 1, n) or len(bias) not in (0, 1, n):
                    raise ImportFailure(f"layer '{layer.name}': {what} has {len(scale)} quantization scales and "
                                        f"{len(bias)} biases; expected one, or one per channel, of each")
                scale = scale if len(scale) else np.ones(1, np.float32)
                bias = bias if len(bias) else np.zeros(1, np.float32)
                if codes.size % n:
                    raise ImportFailure(f"layer '{layer.name}': {what} has {codes.size} values for {n} channels")
                c = codes.astype(np.float32).reshape(n, -1)
                a = (c * scale.reshape(-1, 1) + bias.reshape(-1, 1)).reshape(-1)
            else:
                a = codes.astype(np.float32) * (scale[0] if len(scale) else 1) + (bias[0] if len(bias) else 0)
    else:
        a = np.zeros(0, dtype=np.float32)
    if count is not None and a.size != count:
        raise ImportFailure(f"layer '{layer.name}': {what} has {a.size} values, expected {count}")
    return a


def pair(values, default, what, layer, at_least=None):
    """A layer's (height, width) field: its two values, or the default when it is empty. Any
    other count is refused here rather than failing to unpack later, and so are values below
    `at_least` (a zero stride kills the process: ONNX's shape inference divides by it)."""
    v = list(values) or list(default)
    if len(v) != 2:
        raise ImportFailure(f"layer '{layer.name}': {what} has {len(v)} values, expected 2 (height, width)")
    if at_least is not None and not all(x >= at_least for x in v):
        raise ImportFailure(f"layer '{layer.name}': {what} is {v}; each value must be at least {at_least}")
    return v


def defined(enum, value, what, layer):
    """An enum field's value, checked: proto3 keeps values it has no name for (a damaged file, a
    newer spec), which would otherwise fall through to some default branch or a KeyError."""
    if value not in enum.values():
        raise ImportFailure(f"layer '{layer.name}': {what} is {value}, which Core ML does not define")
    return value


def per_channel(values):
    """A vector of 1 or C values as a (1, C, 1, 1) constant that broadcasts over NCHW."""
    return values.reshape(1, -1, 1, 1)


# --- the graph being built --------------------------------------------------------------------

class Graph:
    def __init__(self):
        self.nodes = []
        self.initializers = []
        self.names = set()
        self.deconv_checks = []  # (onnx value, (H, W) from outputShape, layer name)

    def fresh(self, hint):
        # Helper values are named after their layer; a layer without a name must not make a value
        # named "" (onnx.checker refuses it; found by fuzzing).
        hint = hint or "unnamed"
        name, i = hint, 1
        while name in self.names:
            i += 1
            name = f"{hint}_{i}"
        self.names.add(name)
        return name

    def const(self, hint, array, dtype=np.float32):
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array, dtype=dtype), name))
        return name

    def op(self, op_type, inputs, output=None, hint="t", **attrs):
        out = output if output is not None else self.fresh(hint)
        self.names.add(out)
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=self.fresh(f"{hint}/{op_type}"), **attrs))
        return out


# --- layers -----------------------------------------------------------------------------------
# Each function maps one Core ML layer: (graph, layer, its input values, the ONNX value to write).

def one_input(layer, ins):
    if len(ins) != 1:
        raise ImportFailure(f"layer '{layer.name}' ({layer.WhichOneof('layer')}) has {len(ins)} inputs, expected 1")
    return ins[0]


def border(amounts):
    """BorderAmounts -> (top, left, bottom, right)."""
    b = list(amounts.borderAmounts)
    if not b:
        return 0, 0, 0, 0
    if len(b) != 2:
        raise ImportFailure(f"border amounts must be [H, W], got {len(b)} entries")
    return b[0].startEdgeSize, b[1].startEdgeSize, b[0].endEdgeSize, b[1].endEdgeSize


def same_padding(g, layer, x, kernel, stride, top_left_heavy):
    """SamePadding for a strided convolution, as a Pad node: out = ceil(in / s),
    total = max(0, (out - 1) * s + k - in), split by the asymmetry mode."""
    n = layer.name
    i64 = np.int64
    hw = g.op("Slice", [g.op("Shape", [x], hint=n), g.const(f"{n}.from", [2], i64), g.const(f"{n}.to", [4], i64)], hint=n)
    s = g.const(f"{n}.stride", list(stride), i64)
    out = g.op("Div", [g.op("Add", [hw, g.const(f"{n}.stride_1", [v - 1 for v in stride], i64)], hint=n), s], hint=n)
    span = g.op("Add", [g.op("Mul", [g.op("Sub", [out, g.const(f"{n}.one", [1, 1], i64)], hint=n), s], hint=n),
                        g.const(f"{n}.kernel", list(kernel), i64)], hint=n)
    total = g.op("Max", [g.op("Sub", [span, hw], hint=n), g.const(f"{n}.zero", [0, 0], i64)], hint=n)
    half = g.op("Div", [total, g.const(f"{n}.two", [2, 2], i64)], hint=n)
    rest = g.op("Sub", [total, half], hint=n)
    begin, end = (rest, half) if top_left_heavy else (half, rest)
    zeros = g.const(f"{n}.nc", [0, 0], i64)
    pads = g.op("Concat", [zeros, begin, zeros, end], hint=n, axis=0)
    return g.op("Pad", [x, pads], hint=n, mode="constant")


def convolution(g, layer, ins, out):
    p = layer.convolution
    x = one_input(layer, ins)
    kh, kw = pair(p.kernelSize, [3, 3], "kernelSize", layer, at_least=1)
    sh, sw = pair(p.stride, [1, 1], "stride", layer, at_least=1)
    dh, dw = pair(p.dilationFactor, [1, 1], "dilationFactor", layer, at_least=1)
    groups = p.nGroups or 1
    out_c, k_c = p.outputChannels, p.kernelChannels
    if p.isDeconvolution:
        shape = (k_c, out_c // groups, kh, kw)
    else:
        shape = (out_c, k_c, kh, kw)
    w = weights(p.weights, "weights", layer, int(np.prod(shape))).reshape(shape)
    inputs = [x, g.const(f"{layer.name}.weight", w)]
    if p.hasBias:
        inputs.append(g.const(f"{layer.name}.bias", weights(p.bias, "bias", layer, out_c)))
    attrs = dict(kernel_shape=[kh, kw], strides=[sh, sw], group=groups)
    padding = p.WhichOneof("ConvolutionPaddingType")
    asymmetry = NeuralNetwork_pb2.SamePadding.SamePaddingMode
    top_left_heavy = padding == "same" and defined(asymmetry, p.same.asymmetryMode, "asymmetryMode", layer) \
        == NeuralNetwork_pb2.SamePadding.TOP_LEFT_HEAVY
    if not p.isDeconvolution:
        attrs["dilations"] = [dh, dw]
        if padding == "same":
            eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
            if sh == 1 and sw == 1:
                # The total padding does not depend on the input size: explicit pads.
                th, tw = eh - 1, ew - 1
                if top_left_heavy:
                    attrs["pads"] = [th - th // 2, tw - tw // 2, th // 2, tw // 2]
                else:
                    attrs["pads"] = [th // 2, tw // 2, th - th // 2, tw - tw // 2]
            else:
                # With a stride the padding depends on the input size: computed in the graph.
                # (auto_pad would say it in one attribute, but onnx's reference evaluator pads
                # strided convolutions differently from OpenVINO and from Core ML's formula.)
                x = same_padding(g, layer, x, (eh, ew), (sh, sw), top_left_heavy)
                inputs[0] = x
                attrs["pads"] = [0, 0, 0, 0]
        else:
            t, l, b, r = border(p.valid.paddingAmounts)
            attrs["pads"] = [t, l, b, r]
        g.op("Conv", inputs, out, hint=layer.name, **attrs)
        return
    # Deconvolution: dilation is ignored (NeuralNetwork.proto).
    if padding == "same":
        # H_out = H_in * stride: the transposed convolution's overhang, k - s, is cropped
        # (split as SamePadding's asymmetry mode says); when k < s the output is extended.
        pads, out_pad = [0, 0, 0, 0], [0, 0]
        for i, (k, s) in enumerate(((kh, sh), (kw, sw))):
            total = k - s
            if total >= 0:
                small, big = total // 2, total - total // 2
                pads[i], pads[i + 2] = (big, small) if top_left_heavy else (small, big)
            else:
                out_pad[i] = -total
        attrs["pads"] = pads
        if any(out_pad):
            attrs["output_padding"] = out_pad
    else:
        t, l, b, r = border(p.valid.paddingAmounts)
        attrs["pads"] = [t, l, b, r]
    g.op("ConvTranspose", inputs, out, hint=layer.name, **attrs)
    if len(p.outputShape):
        # A fixed output size cannot follow a dynamic input; accept it only where it is what
        # the padding gives anyway at the model's own input size (checked after the build).
        g.deconv_checks.append((out, tuple(pair(p.outputShape, [], "outputShape", layer)), layer.name))


# The most channels a batchnorm layer without gamma or beta may declare (style-transfer networks
# use at most a few hundred; the defaults for more would be made from nothing but the count).
MAX_DEFAULT_CHANNELS = 1 << 16


def batchnorm(g, layer, ins, out):
    p = layer.batchnorm
    x = one_input(layer, ins)
    c = p.channels
    eps = p.epsilon or 1e-5
    gamma = weights(p.gamma, "gamma", layer) if has_values(p.gamma) else None
    beta = weights(p.beta, "beta", layer) if has_values(p.beta) else None
    for what, v in (("gamma", gamma), ("beta", beta)):
        if v is not None and v.size != c:
            raise ImportFailure(f"layer '{layer.name}': {what} has {v.size} values for {c} channels")
    # Defaults are made here, so their size is the file's word only: a channel count of 2e12
    # asked for terabytes (MemoryError; found by fuzzing).
    if (gamma is None or beta is None) and c > MAX_DEFAULT_CHANNELS:
        raise ImportFailure(f"layer '{layer.name}': batchnorm over {c} channels without gamma or beta; "
                            f"streamlens import takes at most {MAX_DEFAULT_CHANNELS} channels there")
    gamma = np.ones(c, np.float32) if gamma is None else gamma
    beta = np.zeros(c, np.float32) if beta is None else beta
    inputs = [x, g.const(f"{layer.name}.gamma", gamma), g.const(f"{layer.name}.beta", beta)]
    if p.computeMeanVar:
        # Mean and variance from the input itself. instanceNormalization picks per instance or
        # over the batch; the exported model has batch 1, where the two are the same thing:
        # instance normalization (how Create ML's style-transfer models normalize).
        g.op("InstanceNormalization", inputs, out, hint=layer.name, epsilon=float(eps))
        return
    inputs += [g.const(f"{layer.name}.mean", weights(p.mean, "mean", layer, c)),
               g.const(f"{layer.name}.variance", weights(p.variance, "variance", layer, c))]
    g.op("BatchNormalization", inputs, out, hint=layer.name, epsilon=float(eps))


def mvn(g, layer, ins, out):
    """Mean-variance normalization over each channel's pixels (acrossChannels false: instance
    normalization without gamma and beta) or over the whole image: y = (x - mean) / sqrt(var +
    epsilon), the formula of MIL's layer_norm, which coremltools writes as this layer."""
    p = layer.mvn
    x = one_input(layer, ins)
    n = layer.name
    axes = [1, 2, 3] if p.acrossChannels else [2, 3]
    mean = g.op("ReduceMean", [x], hint=n, axes=axes, keepdims=1)
    if not p.normalizeVariance:
        g.op("Sub", [x, mean], out, hint=n)
        return
    centred = g.op("Sub", [x, mean], hint=n)
    var = g.op("ReduceMean", [g.op("Mul", [centred, centred], hint=n)], hint=n, axes=axes, keepdims=1)
    std = g.op("Sqrt", [g.op("Add", [var, g.const(f"{n}.epsilon", p.epsilon or 1e-6)], hint=n)], hint=n)
    g.op("Div", [centred, std], out, hint=n)


def activation(g, layer, ins, out):
    a = layer.activation
    x = one_input(layer, ins)
    kind = a.WhichOneof("NonlinearityType")
    n = layer.name
    if kind == "ReLU":
        g.op("Relu", [x], out, hint=n)
    elif kind == "leakyReLU":
        g.op("LeakyRelu", [x], out, hint=n, alpha=float(a.leakyReLU.alpha))
    elif kind == "PReLU":
        slope = weights(a.PReLU.alpha, "alpha", layer)
        g.op("PRelu", [x, g.const(f"{n}.alpha", per_channel(slope))], out, hint=n)
    elif kind == "ELU":
        g.op("Elu", [x], out, hint=n, alpha=float(a.ELU.alpha))
    elif kind == "thresholdedReLU":
        g.op("ThresholdedRelu", [x], out, hint=n, alpha=float(a.thresholdedReLU.alpha))
    elif kind == "sigmoid":
        g.op("Sigmoid", [x], out, hint=n)
    elif kind == "sigmoidHard":
        g.op("HardSigmoid", [x], out, hint=n, alpha=float(a.sigmoidHard.alpha), beta=float(a.sigmoidHard.beta))
    elif kind == "tanh":
        g.op("Tanh", [x], out, hint=n)
    elif kind == "scaledTanh":
        t = g.op("Mul", [x, g.const(f"{n}.beta", a.scaledTanh.beta)], hint=n)
        t = g.op("Tanh", [t], hint=n)
        g.op("Mul", [t, g.const(f"{n}.alpha", a.scaledTanh.alpha)], out, hint=n)
    elif kind == "linear":
        t = g.op("Mul", [x, g.const(f"{n}.alpha", a.linear.alpha)], hint=n)
        g.op("Add", [t, g.const(f"{n}.beta", a.linear.beta)], out, hint=n)
    elif kind == "softsign":
        g.op("Softsign", [x], out, hint=n)
    elif kind == "softplus":
        g.op("Softplus", [x], out, hint=n)
    else:
        raise ImportFailure(f"layer '{n}' is an activation of kind '{kind}', which streamlens import does not "
                            f"support (supported activations: {', '.join(ACTIVATIONS)})")


ACTIVATIONS = ["ELU", "PReLU", "ReLU", "leakyReLU", "linear", "scaledTanh", "sigmoid", "sigmoidHard",
               "softplus", "softsign", "tanh", "thresholdedReLU"]


def elementwise(onnx_op, field):
    def convert(g, layer, ins, out):
        if not ins:
            raise ImportFailure(f"layer '{layer.name}' ({field}) has no inputs")
        if len(ins) == 1:
            # One input: x + alpha / alpha * x (NeuralNetwork.proto).
            alpha = getattr(layer, field).alpha
            g.op(onnx_op, [ins[0], g.const(f"{layer.name}.alpha", alpha)], out, hint=layer.name)
            return
        acc = ins[0]
        for i, other in enumerate(ins[1:]):
            last = i == len(ins) - 2
            acc = g.op(onnx_op, [acc, other], out if last else None, hint=layer.name)
    return convert


def broadcastable(onnx_op):
    def convert(g, layer, ins, out):
        if len(ins) != 2:
            raise ImportFailure(f"layer '{layer.name}' ({layer.WhichOneof('layer')}) has {len(ins)} inputs, expected 2")
        g.op(onnx_op, ins, out, hint=layer.name)
    return convert


def variadic(onnx_op):
    def convert(g, layer, ins, out):
        g.op(onnx_op, ins, out, hint=layer.name)
    return convert


def channel_constant(values, shape, what, layer):
    """Scale/bias constants: shape [1] or [C] broadcast over an NCHW tensor. [1, H, W] and
    [C, H, W] would fix the image size, which the exported model leaves free."""
    shape = list(shape) or [values.size]
    if len(shape) != 1:
        raise ImportFailure(f"layer '{layer.name}': {what} of shape {shape} fixes the image size; "
                            "streamlens import supports per-channel or scalar values only")
    return values.reshape(1, -1, 1, 1)


def scale(g, layer, ins, out):
    p = layer.scale
    x = one_input(layer, ins)
    s = channel_constant(weights(p.scale, "scale", layer), p.shapeScale, "scale", layer)
    if not p.hasBias:
        g.op("Mul", [x, g.const(f"{layer.name}.scale", s)], out, hint=layer.name)
        return
    t = g.op("Mul", [x, g.const(f"{layer.name}.scale", s)], hint=layer.name)
    b = channel_constant(weights(p.bias, "bias", layer), p.shapeBias, "bias", layer)
    g.op("Add", [t, g.const(f"{layer.name}.bias", b)], out, hint=layer.name)


def bias(g, layer, ins, out):
    p = layer.bias
    b = channel_constant(weights(p.bias, "bias", layer), p.shape, "bias", layer)
    g.op("Add", [one_input(layer, ins), g.const(f"{layer.name}.bias", b)], out, hint=layer.name)


def padding(g, layer, ins, out):
    p = layer.padding
    t, l, b, r = border(p.paddingAmounts)
    pads = g.const(f"{layer.name}.pads", [0, 0, t, l, 0, 0, b, r], np.int64)
    kind = p.WhichOneof("PaddingType")
    x = one_input(layer, ins)
    if kind == "reflection":
        g.op("Pad", [x, pads], out, hint=layer.name, mode="reflect")
    elif kind == "replication":
        g.op("Pad", [x, pads], out, hint=layer.name, mode="edge")
    else:
        value = g.const(f"{layer.name}.value", p.constant.value if kind == "constant" else 0.0)
        g.op("Pad", [x, pads, value], out, hint=layer.name, mode="constant")


def upsample(g, layer, ins, out):
    p = layer.upsample
    x = one_input(layer, ins)
    U = NeuralNetwork_pb2.UpsampleLayerParams
    # Unknown values (a KeyError below; found by fuzzing) are refused.
    defined(U.InterpolationMode, p.mode, "mode", layer)
    defined(U.LinearUpsampleMode, p.linearUpsampleMode, "linearUpsampleMode", layer)
    if p.mode == U.NN:
        attrs = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    else:
        # LinearUpsampleMode's grids (NeuralNetwork.proto): DEFAULT samples at i * in/out,
        # ALIGN_CORNERS_TRUE at i * (in-1)/(out-1), ALIGN_CORNERS_FALSE at (i + 0.5) * in/out - 0.5,
        # all clamped to the input: ONNX's asymmetric, align_corners and half_pixel.
        transform = {U.DEFAULT: "asymmetric", U.ALIGN_CORNERS_TRUE: "align_corners",
                     U.ALIGN_CORNERS_FALSE: "half_pixel"}[p.linearUpsampleMode]
        attrs = dict(mode="linear", coordinate_transformation_mode=transform)
    if len(p.fractionalScalingFactor):
        fh, fw = pair(p.fractionalScalingFactor, [], "fractionalScalingFactor", layer)
        # Output size floor(in * factor); the grids above use the real in/out ratio, which
        # ONNX uses when given sizes rather than scales.
        shape = g.op("Shape", [x], hint=layer.name)
        hw = g.op("Slice", [shape, g.const(f"{layer.name}.from", [2], np.int64), g.const(f"{layer.name}.to", [4], np.int64)], hint=layer.name)
        hw = g.op("Cast", [hw], hint=layer.name, to=TensorProto.FLOAT)
        hw = g.op("Mul", [hw, g.const(f"{layer.name}.factor", [fh, fw])], hint=layer.name)
        hw = g.op("Floor", [hw], hint=layer.name)
        hw = g.op("Cast", [hw], hint=layer.name, to=TensorProto.INT64)
        nc = g.op("Slice", [shape, g.const(f"{layer.name}.zero", [0], np.int64), g.const(f"{layer.name}.two", [2], np.int64)], hint=layer.name)
        sizes = g.op("Concat", [nc, hw], hint=layer.name, axis=0)
        g.op("Resize", [x, "", "", sizes], out, hint=layer.name, **attrs)
        return
    sh, sw = pair(p.scalingFactor, [1, 1], "scalingFactor", layer)
    scales = g.const(f"{layer.name}.scales", [1, 1, sh, sw])
    g.op("Resize", [x, "", scales], out, hint=layer.name, **attrs)


def crop(g, layer, ins, out):
    p = layer.crop
    if len(ins) == 1:
        t, l, b, r = border(p.cropAmounts)
        big = np.iinfo(np.int64).max
        starts = g.const(f"{layer.name}.starts", [t, l], np.int64)
        ends = g.const(f"{layer.name}.ends", [-b if b else big, -r if r else big], np.int64)
        axes = g.const(f"{layer.name}.axes", [2, 3], np.int64)
        g.op("Slice", [ins[0], starts, ends, axes], out, hint=layer.name)
        return
    if len(ins) != 2:
        raise ImportFailure(f"layer '{layer.name}' (crop) has {len(ins)} inputs, expected 1 or 2")
    # Two inputs: the second one's H and W, from the offset.
    offset = pair(p.offset, [0, 0], "offset", layer)
    shape = g.op("Shape", [ins[1]], hint=layer.name)
    hw = g.op("Slice", [shape, g.const(f"{layer.name}.from", [2], np.int64), g.const(f"{layer.name}.to", [4], np.int64)], hint=layer.name)
    starts = g.const(f"{layer.name}.starts", offset, np.int64)
    ends = g.op("Add", [hw, starts], hint=layer.name)
    axes = g.const(f"{layer.name}.axes", [2, 3], np.int64)
    g.op("Slice", [ins[0], starts, ends, axes], out, hint=layer.name)


def concat(g, layer, ins, out):
    if layer.concat.sequenceConcat:
        raise ImportFailure(f"layer '{layer.name}' concatenates along the sequence axis, which streamlens import does not support")
    g.op("Concat", ins, out, hint=layer.name, axis=1)


def unary(g, layer, ins, out):
    p = layer.unary
    x = one_input(layer, ins)
    n = layer.name
    O = NeuralNetwork_pb2.UnaryFunctionLayerParams
    s, shift = (p.scale or 1.0), p.shift
    if s != 1.0:
        x = g.op("Mul", [x, g.const(f"{n}.scale", s)], hint=n)
    if shift != 0.0:
        x = g.op("Add", [x, g.const(f"{n}.shift", shift)], hint=n)
    eps = p.epsilon or 1e-6
    if p.type == O.SQRT:
        g.op("Sqrt", [x], out, hint=n)
    elif p.type == O.RSQRT:
        t = g.op("Add", [x, g.const(f"{n}.epsilon", eps)], hint=n)
        g.op("Reciprocal", [g.op("Sqrt", [t], hint=n)], out, hint=n)
    elif p.type == O.INVERSE:
        t = g.op("Add", [x, g.const(f"{n}.epsilon", eps)], hint=n)
        g.op("Reciprocal", [t], out, hint=n)
    elif p.type == O.POWER:
        g.op("Pow", [x, g.const(f"{n}.alpha", p.alpha)], out, hint=n)
    elif p.type == O.EXP:
        g.op("Exp", [x], out, hint=n)
    elif p.type == O.LOG:
        g.op("Log", [x], out, hint=n)
    elif p.type == O.ABS:
        g.op("Abs", [x], out, hint=n)
    elif p.type == O.THRESHOLD:
        g.op("Max", [x, g.const(f"{n}.alpha", p.alpha)], out, hint=n)
    else:
        raise ImportFailure(f"layer '{n}' is a unary function of type {p.type}, which streamlens import does not support")


def clip(g, layer, ins, out):
    p = layer.clip
    g.op("Clip", [one_input(layer, ins), g.const(f"{layer.name}.min", p.minVal), g.const(f"{layer.name}.max", p.maxVal)],
         out, hint=layer.name)


def copy(g, layer, ins, out):
    g.op("Identity", [one_input(layer, ins)], out, hint=layer.name)


LAYERS = {
    "activation": activation,
    "add": elementwise("Add", "add"),
    "addBroadcastable": broadcastable("Add"),
    "average": variadic("Mean"),
    "batchnorm": batchnorm,
    "bias": bias,
    "clip": clip,
    "concat": concat,
    "convolution": convolution,
    "copy": copy,
    "crop": crop,
    "max": variadic("Max"),
    "min": variadic("Min"),
    "multiply": elementwise("Mul", "multiply"),
    "multiplyBroadcastable": broadcastable("Mul"),
    "mvn": mvn,
    "padding": padding,
    "scale": scale,
    "subtractBroadcastable": broadcastable("Sub"),
    "unary": unary,
    "upsample": upsample,
}


# --- the model --------------------------------------------------------------------------------

COLOR_SPACES = {FeatureTypes_pb2.ImageFeatureType.RGB: "RGB", FeatureTypes_pb2.ImageFeatureType.BGR: "BGR"}


def image_feature(feature, role):
    """(channel order, width, height) of an image feature; multi-array features are taken as
    3-channel RGB arrays [3, H, W] / [1, 3, H, W] of 8-bit values."""
    kind = feature.type.WhichOneof("Type")
    if kind == "imageType":
        t = feature.type.imageType
        if t.colorSpace not in COLOR_SPACES:
            spaces = FeatureTypes_pb2.ImageFeatureType.ColorSpace
            # proto3 keeps enum values it has no name for (a damaged file, a newer spec).
            if t.colorSpace not in spaces.values():
                raise ImportFailure(f"{role} '{feature.name}' has colour space {t.colorSpace}, which Core ML does not "
                                    "define; streamlens import handles RGB and BGR images")
            raise ImportFailure(f"{role} '{feature.name}' is a {spaces.Name(t.colorSpace)} image; streamlens import "
                                "handles RGB and BGR images")
        return COLOR_SPACES[t.colorSpace], t.width, t.height
    if kind == "multiArrayType":
        shape = list(feature.type.multiArrayType.shape)
        if len(shape) in (3, 4) and shape[-3] == 3:
            sys.stderr.write(f"streamlens import: note: {role} '{feature.name}' is a multi-array {shape}, not an image; "
                             "taking it as RGB values 0-255\n")
            return "RGB", shape[-1], shape[-2]
        raise ImportFailure(f"{role} '{feature.name}' is a multi-array of shape {shape}, not an image")
    raise ImportFailure(f"{role} '{feature.name}' has type {kind}; streamlens import needs an image")


def load_spec(path):
    if os.path.isdir(path):
        raise ImportFailure(f"{path} is a directory (an .mlpackage ML Program?); streamlens import reads "
                            "NeuralNetwork .mlmodel files")
    with open(path, "rb") as f:
        data = f.read()
    spec = Model_pb2.Model()
    try:
        spec.ParseFromString(data)
    except Exception as e:
        raise ImportFailure(f"{path} is not a Core ML model ({e})")
    return spec, data


def check_layers(layers):
    """Every layer whose type this importer does not map, as messages."""
    problems = []
    for layer in layers:
        kind = layer.WhichOneof("layer")
        if kind not in LAYERS:
            problems.append(f"layer '{layer.name}' has type '{kind}', which streamlens import does not support "
                            f"(supported: {', '.join(sorted(LAYERS))})")
        elif kind == "activation" and layer.activation.WhichOneof("NonlinearityType") not in ACTIVATIONS:
            sub = layer.activation.WhichOneof("NonlinearityType")
            problems.append(f"layer '{layer.name}' has type 'activation' ({sub}), which streamlens import does not "
                            f"support (supported activations: {', '.join(ACTIVATIONS)})")
    return problems


def convert(spec, path):
    """The ONNX model and the manifest's input/decoder parts."""
    kind = spec.WhichOneof("Type")
    if kind == "mlProgram":
        raise ImportFailure(f"{os.path.basename(path)} is an ML Program; streamlens import reads NeuralNetwork models "
                            "(Create ML style transfer exports them)")
    if kind is None:
        raise ImportFailure(f"{os.path.basename(path)} is not a Core ML model (it holds no model)")
    if kind != "neuralNetwork":
        raise ImportFailure(f"{os.path.basename(path)} is a '{kind}' model; streamlens import reads NeuralNetwork "
                            "image-to-image models")
    nn = spec.neuralNetwork
    problems = check_layers(nn.layers)
    if problems:
        raise ImportFailure("\n".join(problems))
    desc = spec.description
    if len(desc.input) != 1 or len(desc.output) != 1:
        raise ImportFailure(f"the model has {len(desc.input)} inputs and {len(desc.output)} outputs; "
                            "streamlens import handles one image in, one image out")
    inp, outp = desc.input[0], desc.output[0]
    if not inp.name or not outp.name:
        raise ImportFailure("the model's input or output has no name")
    if inp.name == outp.name:
        # ONNX names values, not features: the graph's input would be its output too.
        raise ImportFailure(f"the model's input and output are both named '{inp.name}'")
    in_order, width, height = image_feature(inp, "input")
    if not (width > 0 and height > 0):
        # The manifest's input size comes from here; StreamLens refuses a manifest without one.
        raise ImportFailure(f"input '{inp.name}' declares the size {width}x{height}; streamlens import needs the "
                            "model's own input size (width and height above 0)")
    out_order, out_w, out_h = image_feature(outp, "output")

    # Pre-processing: y = channelScale * pixel + bias(channel), channels in the input's order.
    scale, biases = 1.0, [0.0, 0.0, 0.0]
    for pre in nn.preprocessing:
        if pre.featureName not in ("", inp.name):
            continue
        which = pre.WhichOneof("preprocessor")
        if which == "meanImage":
            raise ImportFailure(f"input '{inp.name}' subtracts a mean image, which fixes the image size; "
                                "streamlens import does not support it")
        if which == "scaler":
            s = pre.scaler
            # proto3 cannot tell an unset scale from 0; a zero scale would blank every image, and
            # Core ML's converters always write one, so 0 reads as "unset" (1).
            scale = s.channelScale or 1.0
            rgb = [s.redBias, s.greenBias, s.blueBias]
            biases = rgb if in_order == "RGB" else rgb[::-1]

    g = Graph()
    # Blob names keep their Core ML names in ONNX; helper values must not take one.
    g.names.add(inp.name)
    for layer in nn.layers:
        g.names.update(layer.output)
    x = inp.name
    if not all(math.isfinite(v) for v in [scale, *biases]):
        raise ImportFailure(f"input '{inp.name}': its pre-processing (scale {scale}, biases {biases}) is not finite")
    # As written into the manifest (rounded by number()), which StreamLens reads only as lo < hi.
    value_range = [number(biases[0]), number(255.0 * scale + biases[0])]
    if len(set(biases)) == 1 and value_range[0] < value_range[1]:
        # The same increasing affine map on every channel: the manifest's value range says it,
        # and the runtime's pre-processing does it.
        pass
    else:
        # Per-channel biases, or a map a value range cannot say (a negative scale, or one lost
        # in the range's rounding): done in the graph, which then takes plain 0-255 values.
        value_range = [0, 255]
        x = g.op("Mul", [x, g.const("preprocess.scale", scale)], hint="preprocess")
        x = g.op("Add", [x, g.const("preprocess.bias", np.asarray(biases).reshape(1, 3, 1, 1))], hint="preprocess")
    value_of = {inp.name: x}  # Core ML blob -> the ONNX value holding it now
    output_writers = sum(outp.name in layer.output for layer in nn.layers)
    produced = set()
    for layer in nn.layers:
        ins = []
        for name in layer.input:
            if name not in value_of:
                raise ImportFailure(f"layer '{layer.name}' reads '{name}', which no earlier layer produces")
            ins.append(value_of[name])
        if len(layer.output) != 1:
            raise ImportFailure(f"layer '{layer.name}' has {len(layer.output)} outputs, expected 1")
        blob = layer.output[0]
        if not blob:
            raise ImportFailure(f"layer '{layer.name}' writes an output with no name")
        # ONNX values are assigned once; Core ML lets a copy layer overwrite a blob. The graph's
        # output is written by one node only: by the only layer writing it, else by the Identity
        # below (several layers writing it in turn made two nodes write it; found by fuzzing).
        if blob == outp.name and output_writers > 1:
            out = g.fresh(blob)
        else:
            out = g.fresh(blob) if blob in produced or blob == inp.name else blob
        produced.add(blob)
        LAYERS[layer.WhichOneof("layer")](g, layer, ins, out)
        value_of[blob] = out

    if outp.name not in produced:
        raise ImportFailure(f"no layer produces the output '{outp.name}'")
    if value_of[outp.name] != outp.name:
        g.nodes.append(helper.make_node("Identity", [value_of[outp.name]], [outp.name], name=g.fresh("output/Identity")))

    in_info = helper.make_tensor_value_info(inp.name, TensorProto.FLOAT, [1, 3, "height", "width"])
    out_info = helper.make_tensor_value_info(outp.name, TensorProto.FLOAT, [1, 3, "out_height", "out_width"])
    graph = helper.make_graph(g.nodes, spec.description.metadata.shortDescription or "streamlens-import",
                              [in_info], [out_info], initializer=g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="streamlens import", ir_version=IR_VERSION)
    check_at_size(model, inp.name, outp.name, width, height, out_w, out_h, g.deconv_checks)
    onnx.checker.check_model(model, full_check=True)
    manifest_input = {"width": int(width), "height": int(height), "color_order": in_order,
                      "value_range": [number(v) for v in value_range], "layout": "NCHW", "name": inp.name}
    decoder = {"name": "image", "parameters": {"color_order": out_order, "value_range": [0, 255], "layout": "NCHW"}}
    return model, manifest_input, decoder


def number(v):
    """A float32-derived value for JSON: 1/255 * 255 gives 1.0000000591, written as 1."""
    v = round(float(v), 6)
    return int(v) if v.is_integer() else v


def check_at_size(model, input_name, output_name, width, height, out_w, out_h, deconv_checks):
    """Shape inference with the input fixed at the model's own size: the output must have 3
    channels (and the declared image size, where one is declared), and a deconvolution's fixed
    outputShape must be what its padding gives."""
    if not width or not height:
        return
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    fixed.graph.output[0].type.tensor_type.ClearField("shape")  # to be inferred
    dims = fixed.graph.input[0].type.tensor_type.shape.dim
    dims[2].ClearField("dim_param"); dims[2].dim_value = int(height)
    dims[3].ClearField("dim_param"); dims[3].dim_value = int(width)
    try:
        inferred = onnx.shape_inference.infer_shapes(fixed, strict_mode=True)
    except Exception as e:
        raise ImportFailure(f"the converted network is inconsistent at {width}x{height}: {e}")
    shapes = {}
    for v in list(inferred.graph.value_info) + list(inferred.graph.output):
        d = v.type.tensor_type.shape.dim
        shapes[v.name] = [x.dim_value if x.HasField("dim_value") else None for x in d]
    for value, (h, w), layer in deconv_checks:
        got = shapes.get(value)
        if got is None or got[2:] != [h, w]:
            gives = f"{got[2]}x{got[3]}" if got and None not in got[2:] else "an unknown size"
            raise ImportFailure(f"layer '{layer}' fixes its output to {h}x{w} (outputShape, height x width) where "
                                f"its padding gives {gives}; streamlens import needs layers that follow the input size")
    got = shapes.get(output_name)
    if got is not None and len(got) != 4:
        raise ImportFailure(f"the output '{output_name}' has {len(got)} dimensions at {width}x{height}, expected 4 "
                            "(batch, channels, height, width)")
    if got is not None and got[1] not in (None, 3):
        raise ImportFailure(f"the output '{output_name}' has {got[1]} channels, expected 3")
    if got is not None and out_w and out_h and None not in got[2:] and got[2:] != [out_h, out_w]:
        sys.stderr.write(f"streamlens import: note: at {width}x{height} the network gives {got[3]}x{got[2]}, "
                         f"the model declares {out_w}x{out_h} for '{output_name}'\n")


def manifest_json(value, indent=""):
    """Indented JSON with lists of plain values on one line, as the manifests in Models/ are."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent + "  "
        items = [f"{inner}{json.dumps(k)}: {manifest_json(v, inner)}" for k, v in value.items()]
        text = "{\n" + ",\n".join(items) + "\n" + indent + "}"
        return text + "\n" if indent == "" else text
    if isinstance(value, list):
        return "[" + ", ".join(manifest_json(v, indent) for v in value) + "]"
    return json.dumps(value)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="streamlens import",
                                 description="Convert a Core ML NeuralNetwork image-to-image model (e.g. Create ML "
                                             "style transfer) to ONNX and a StreamLens model manifest.")
    ap.add_argument("model", help="the .mlmodel file")
    ap.add_argument("-o", "--output", help="the ONNX file to write (default: NAME.onnx beside the .mlmodel); "
                                           "the manifest goes beside it with .json")
    ap.add_argument("--name", help="the manifest's name (default: the output's or the model's file name)")
    args = ap.parse_args(argv)
    # The name becomes a file name beside the model when -o is not given: one plain name, so it
    # cannot write outside that folder (--name ../x).
    if args.name is not None and (not args.name or args.name in (".", "..") or "/" in args.name or "\\" in args.name
                                  or "\0" in args.name):
        sys.stderr.write(f"streamlens import: --name {args.name!r} must be a plain name (no folders): "
                         "give the folder with -o\n")
        return 2

    try:
        spec, data = load_spec(args.model)
        base = os.path.basename(args.model)
        stem = os.path.splitext(base)[0]
        if args.output:
            onnx_path = args.output if args.output.endswith(".onnx") else args.output + ".onnx"
            name = args.name or os.path.splitext(os.path.basename(onnx_path))[0]
        else:
            name = args.name or stem
            onnx_path = os.path.join(os.path.dirname(args.model), f"{name}.onnx")
        json_path = os.path.splitext(onnx_path)[0] + ".json"
        model, manifest_input, decoder = convert(spec, args.model)
    except (ImportFailure, OSError) as e:
        for line in str(e).splitlines():
            sys.stderr.write(f"streamlens import: {line}\n")
        return 1
    except Exception as e:  # a malformed spec the checks above did not foresee
        sys.stderr.write(f"streamlens import: cannot convert {args.model}: {type(e).__name__}: {e}\n")
        return 1

    licence = spec.description.metadata.license.strip() or f"unknown (from {base})"
    manifest = {
        "schema_version": 1,
        "name": name,
        "model": os.path.basename(onnx_path),
        "input": manifest_input,
        "crop": "stretch",
        "decoder": decoder,
        "labels": [],
        "licence": licence,
        "provenance": f"converted by streamlens import from {base} (sha256 {hashlib.sha256(data).hexdigest()})",
    }
    out_dir = os.path.dirname(onnx_path)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    onnx.save(model, onnx_path)
    with open(json_path, "w") as f:
        f.write(manifest_json(manifest))
    counts = {}
    for layer in spec.neuralNetwork.layers:
        counts[layer.WhichOneof("layer")] = counts.get(layer.WhichOneof("layer"), 0) + 1
    summary = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))
    lo, hi = manifest_input["value_range"]
    print(f"imported {base}: {len(spec.neuralNetwork.layers)} layers ({summary})")
    print(f"  input '{manifest_input['name']}' {manifest_input['width']}x{manifest_input['height']} "
          f"{manifest_input['color_order']} [{lo}, {hi}], output {decoder['parameters']['color_order']} [0, 255]; "
          "height and width free")
    print(f"wrote {onnx_path}")
    print(f"wrote {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
