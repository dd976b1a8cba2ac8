"""Core ML NeuralNetwork test models, built at test time with coremltools' NeuralNetworkBuilder
from random weights (no model files are committed).

A model is a *recipe*: a list of layers, each a dict with `kind`, `name`, `inputs`, `output` and
its parameters, weights in the layouts Core ML's spec stores them (convolution
[out, in/groups, kh, kw], deconvolution [in, out/groups, kh, kw]). `build` turns a recipe into an
.mlmodel spec through the builder; test_coreml_import.py runs the same recipe through its own
NumPy reference of each layer.

    python3 Tests/Python/mlmodels.py OUTDIR   # writes OUTDIR/style.mlmodel and OUTDIR/unsupported.mlmodel
"""

import logging
import os
import sys

import numpy as np

logging.getLogger("coremltools").setLevel(logging.ERROR)

from coremltools.models import datatypes  # noqa: E402
from coremltools.models.neural_network import NeuralNetworkBuilder  # noqa: E402
from coremltools.proto import FeatureTypes_pb2  # noqa: E402


def conv(name, inputs, output, rng, cin, cout, k, stride=1, padding=("valid", 0, 0, 0, 0), dilation=1, groups=1,
         bias=True, weight_scale=None):
    """A convolution layer with He-like random weights (so activations keep their size)."""
    fan_in = cin // groups * k * k
    s = weight_scale if weight_scale is not None else np.sqrt(2.0 / fan_in)
    return dict(kind="conv", name=name, inputs=inputs, output=output,
                W=(rng.standard_normal((cout, cin // groups, k, k)) * s).astype(np.float32),
                b=(rng.standard_normal(cout) * 0.1).astype(np.float32) if bias else None,
                stride=stride, padding=padding, dilation=dilation, groups=groups)


def instance_norm(name, inputs, output, rng, c):
    return dict(kind="batchnorm", name=name, inputs=inputs, output=output, compute=True, instance=True,
                gamma=(1 + 0.2 * rng.standard_normal(c)).astype(np.float32),
                beta=(0.2 * rng.standard_normal(c)).astype(np.float32), epsilon=1e-5)


def style_net(seed=0, final="multiply", upsample="NN", width=40, height=32):
    """A small network shaped like Create ML's "video" style-transfer models: reflection padding
    before each convolution, batchnorm layers in instance-norm mode, ReLU, a stride-2
    convolution, a residual block, a 2x upsample, a 9x9 output convolution, sigmoid and x255."""
    rng = np.random.default_rng(seed)
    L = [
        dict(kind="pad", name="pad1", inputs=["image"], output="pad1", mode="reflection", amounts=(4, 4, 4, 4)),
        conv("conv1", ["pad1"], "conv1", rng, 3, 8, 9),
        instance_norm("norm1", ["conv1"], "norm1", rng, 8),
        dict(kind="act", name="relu1", inputs=["norm1"], output="relu1", fn="RELU"),
        conv("down", ["relu1"], "down", rng, 8, 16, 3, stride=2, padding=("same", "BOTTOM_RIGHT_HEAVY")),
        instance_norm("norm2", ["down"], "norm2", rng, 16),
        dict(kind="act", name="relu2", inputs=["norm2"], output="relu2", fn="RELU"),
        dict(kind="pad", name="res_pad1", inputs=["relu2"], output="res_pad1", mode="reflection", amounts=(1, 1, 1, 1)),
        conv("res_conv1", ["res_pad1"], "res_conv1", rng, 16, 16, 3),
        instance_norm("res_norm1", ["res_conv1"], "res_norm1", rng, 16),
        dict(kind="act", name="res_relu", inputs=["res_norm1"], output="res_relu", fn="RELU"),
        dict(kind="pad", name="res_pad2", inputs=["res_relu"], output="res_pad2", mode="reflection", amounts=(1, 1, 1, 1)),
        conv("res_conv2", ["res_pad2"], "res_conv2", rng, 16, 16, 3),
        instance_norm("res_norm2", ["res_conv2"], "res_norm2", rng, 16),
        dict(kind="add", name="res_add", inputs=["relu2", "res_norm2"], output="res_add"),
        dict(kind="upsample", name="up", inputs=["res_add"], output="up", factor=(2, 2), mode=upsample,
             linear_mode="DEFAULT"),
        dict(kind="pad", name="up_pad", inputs=["up"], output="up_pad", mode="reflection", amounts=(1, 1, 1, 1)),
        conv("up_conv", ["up_pad"], "up_conv", rng, 16, 8, 3),
        instance_norm("up_norm", ["up_conv"], "up_norm", rng, 8),
        dict(kind="act", name="up_relu", inputs=["up_norm"], output="up_relu", fn="RELU"),
        dict(kind="pad", name="out_pad", inputs=["up_relu"], output="out_pad", mode="reflection", amounts=(4, 4, 4, 4)),
        conv("out_conv", ["out_pad"], "out_conv", rng, 8, 3, 9, weight_scale=0.03),
        dict(kind="act", name="sigmoid", inputs=["out_conv"], output="sigmoid", fn="SIGMOID"),
    ]
    if final == "multiply":
        L.append(dict(kind="multiply", name="times255", inputs=["sigmoid"], output="stylizedImage", alpha=255.0))
    elif final == "linear":
        L.append(dict(kind="act", name="times255", inputs=["sigmoid"], output="stylizedImage", fn="LINEAR",
                      params=[255.0, 0.0]))
    else:
        L.append(dict(kind="scale", name="times255", inputs=["sigmoid"], output="stylizedImage",
                      W=np.array([255.0], np.float32), b=None, shape_scale=[1]))
    return L


def build(recipe, width, height, input_name="image", output_name="stylizedImage", in_channels=3,
          image_input=True, image_output=True, bgr=False, output_bgr=False, image_scale=1 / 255.0,
          biases=(0.0, 0.0, 0.0), licence="", out_size=None):
    """The .mlmodel spec of a recipe. biases are (red, green, blue)."""
    out_w, out_h = out_size or (width, height)
    b = NeuralNetworkBuilder([(input_name, datatypes.Array(in_channels, height, width))],
                             [(output_name, datatypes.Array(3, out_h, out_w))])
    for layer in recipe:
        add_layer(b, layer)
    if image_input:
        b.set_pre_processing_parameters(image_input_names=[input_name], is_bgr=bgr, image_scale=image_scale,
                                        red_bias=biases[0], green_bias=biases[1], blue_bias=biases[2])
    spec = b.spec
    if image_output:
        t = spec.description.output[0].type
        t.imageType.width = out_w
        t.imageType.height = out_h
        t.imageType.colorSpace = FeatureTypes_pb2.ImageFeatureType.BGR if output_bgr else FeatureTypes_pb2.ImageFeatureType.RGB
    spec.description.metadata.license = licence
    return spec


def add_layer(b, L):
    k, name, ins, out = L["kind"], L["name"], L["inputs"], L["output"]
    if k in ("conv", "deconv"):
        W = L["W"]
        deconv = k == "deconv"
        # The builder takes weights as (kh, kw, in/groups or in, out or out/groups).
        hwio = W.transpose(2, 3, 0, 1) if deconv else W.transpose(2, 3, 1, 0)
        cout = W.shape[1] * L["groups"] if deconv else W.shape[0]
        kc = W.shape[0] if deconv else W.shape[1]
        pad = L["padding"]
        kw = dict(padding_top=pad[1], padding_left=pad[2], padding_bottom=pad[3], padding_right=pad[4]) if pad[0] == "valid" \
            else dict(same_padding_asymmetry_mode=pad[1])
        quant = L.get("quantized")
        if quant is not None:
            codes, qscale, qbias = quant
            # The builder wants the codes in its (kh, kw, in, out) order too.
            qcodes = codes.reshape(W.shape).transpose(2, 3, 1, 0)
            kw.update(quantization_type="linear", nbits=8, quant_scale=qscale, quant_bias=qbias)
            weights = np.ascontiguousarray(qcodes).tobytes()
        else:
            weights = hwio
        b.add_convolution(name, kernel_channels=kc, output_channels=cout, height=W.shape[2], width=W.shape[3],
                          stride_height=L["stride"], stride_width=L["stride"], border_mode=pad[0], groups=L["groups"],
                          W=weights, b=L["b"], has_bias=L["b"] is not None, is_deconv=deconv,
                          output_shape=L.get("output_shape"), input_name=ins[0], output_name=out,
                          dilation_factors=[L["dilation"], L["dilation"]], **kw)
        if L.get("fp16"):
            layer = b.spec.neuralNetwork.layers[-1].convolution
            values = np.asarray(layer.weights.floatValue, np.float32)
            layer.weights.ClearField("floatValue")
            layer.weights.float16Value = values.astype("<f2").tobytes()
    elif k == "batchnorm":
        c = L["gamma"].size
        b.add_batchnorm(name, c, L["gamma"], L["beta"], mean=L.get("mean"), variance=L.get("variance"),
                        input_name=ins[0], output_name=out, compute_mean_var=L["compute"],
                        instance_normalization=L["instance"] or L["compute"], epsilon=L["epsilon"])
        if L["compute"] and not L["instance"]:
            # Statistics over the whole batch: valid in the spec, refused by the builder.
            b.spec.neuralNetwork.layers[-1].batchnorm.instanceNormalization = False
    elif k == "act":
        b.add_activation(name, L["fn"], ins[0], out, params=L.get("params"))
    elif k == "pad":
        t, l, bo, r = L["amounts"]
        b.add_padding(name, left=l, right=r, top=t, bottom=bo, value=L.get("value", 0.0), input_name=ins[0],
                      output_name=out, padding_type=L["mode"])
    elif k == "add":
        b.add_elementwise(name, ins, out, "ADD", alpha=L.get("alpha"))
    elif k == "multiply":
        b.add_elementwise(name, ins, out, "MULTIPLY", alpha=L.get("alpha"))
    elif k == "upsample":
        b.add_upsample(name, L["factor"][0], L["factor"][1], ins[0], out, mode=L["mode"],
                       linear_upsample_mode=L["linear_mode"])
    elif k == "scale":
        b.add_scale(name, L["W"], L["b"], L["b"] is not None, ins[0], out, shape_scale=L["shape_scale"],
                    shape_bias=L.get("shape_bias"))
    elif k == "bias":
        b.add_bias(name, L["b"], ins[0], out, shape_bias=[L["b"].size])
    elif k == "crop":
        t, l, bo, r = L["amounts"]
        b.add_crop(name, left=l, right=r, top=t, bottom=bo, offset=[0, 0], input_names=ins, output_name=out)
    elif k == "concat":
        b.add_elementwise(name, ins, out, "CONCAT")
    elif k == "unary":
        b.add_unary(name, ins[0], out, L["fn"], alpha=L.get("alpha", 1.0), shift=L.get("shift", 0.0),
                    scale=L.get("scale", 1.0), epsilon=L.get("epsilon"))
    elif k == "clip":
        b.add_clip(name, ins[0], out, min_value=L["min"], max_value=L["max"])
    elif k == "mvn":
        b.add_mvn(name, ins[0], out, across_channels=L["across"], normalize_variance=L["variance"],
                  epsilon=L["epsilon"])
    elif k == "softmax_nd":
        b.add_softmax_nd(name, ins[0], out, axis=-3)
    else:
        raise ValueError(f"unknown recipe layer kind {k}")


def save(spec, path):
    with open(path, "wb") as f:
        f.write(spec.SerializeToString())


def unsupported_recipe():
    """A convolution followed by a softmaxND layer, which the importer does not map."""
    rng = np.random.default_rng(1)
    return [conv("conv", ["image"], "conv", rng, 3, 3, 3, padding=("same", "BOTTOM_RIGHT_HEAVY")),
            dict(kind="softmax_nd", name="probabilities", inputs=["conv"], output="stylizedImage")]


def main(argv):
    if len(argv) != 1:
        sys.stderr.write("usage: mlmodels.py OUTDIR\n")
        return 2
    out = argv[0]
    os.makedirs(out, exist_ok=True)
    save(build(style_net(), 40, 32, licence="CC0-1.0 (test model)"), os.path.join(out, "style.mlmodel"))
    save(build(unsupported_recipe(), 40, 32), os.path.join(out, "unsupported.mlmodel"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
