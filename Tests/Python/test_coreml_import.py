"""tools/coreml_import.py against a NumPy reference of Core ML's layers.

Each model is built at test time with coremltools' NeuralNetworkBuilder from random weights
(mlmodels.py), converted by the importer, run with OpenVINO (the project's runtime; single
layers also with ONNX's reference evaluator), and compared with `reference` below: Core ML's layer semantics
written from NeuralNetwork.proto's comments, independently of the importer's ONNX mapping.

    PYTHONPATH=.deps/python:.deps/openvino python3 -m unittest discover -s Tests/Python
"""

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))

import mlmodels  # noqa: E402
import coreml_import  # noqa: E402
import onnx  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
import openvino as ov  # noqa: E402

IMPORTER = os.path.join(ROOT, "tools", "coreml_import.py")


# --- the NumPy reference: one Core ML layer at a time, on (C, H, W) float64 arrays ---------------

def ref_pad(x, amounts, mode, value=0.0):
    t, l, b, r = amounts
    width = ((0, 0), (t, b), (l, r))
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=value)
    # reflection mirrors without repeating the edge (NeuralNetwork.proto's example: 3 2 | 1 2 3 4).
    return np.pad(x, width, mode={"reflection": "reflect", "replication": "edge"}[mode])


def same_padding(size, k, s, mode):
    """SamePadding: out = ceil(in / s), total = max(0, (out - 1) * s + k - in), split by mode."""
    out = -(-size // s)
    total = max(0, (out - 1) * s + k - size)
    if mode == "BOTTOM_RIGHT_HEAVY":
        return total // 2, total - total // 2
    return total - total // 2, total // 2


def ref_conv(x, L):
    W, bias, s, d, g = L["W"].astype(np.float64), L["b"], L["stride"], L["dilation"], L["groups"]
    cout, cin_g, kh, kw = W.shape
    ekh, ekw = (kh - 1) * d + 1, (kw - 1) * d + 1
    pad = L["padding"]
    if pad[0] == "valid":
        t, l, b, r = pad[1:]
    else:
        t, b = same_padding(x.shape[1], ekh, s, pad[1])
        l, r = same_padding(x.shape[2], ekw, s, pad[1])
    xp = np.pad(x, ((0, 0), (t, b), (l, r)))
    oh, ow = (xp.shape[1] - ekh) // s + 1, (xp.shape[2] - ekw) // s + 1
    y = np.zeros((cout, oh, ow))
    og = cout // g
    for gi in range(g):
        xs = xp[gi * cin_g:(gi + 1) * cin_g]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, i * d:i * d + (oh - 1) * s + 1:s, j * d:j * d + (ow - 1) * s + 1:s]
                y[gi * og:(gi + 1) * og] += np.einsum("oc,chw->ohw", W[gi * og:(gi + 1) * og, :, i, j], patch)
    if bias is not None:
        y += bias[:, None, None]
    return y


def ref_deconv(x, L):
    """Transposed convolution: every input pixel scatters its kernel, stride s apart; the border
    the padding names is then cropped (valid) or out = in * s is kept (same)."""
    W, bias, s, g = L["W"].astype(np.float64), L["b"], L["stride"], L["groups"]
    cin, cout_g, kh, kw = W.shape
    H, Wd = x.shape[1:]
    full = np.zeros((cout_g * g, (H - 1) * s + kh, (Wd - 1) * s + kw))
    cin_g = cin // g
    for gi in range(g):
        xs = x[gi * cin_g:(gi + 1) * cin_g]
        for i in range(kh):
            for j in range(kw):
                full[gi * cout_g:(gi + 1) * cout_g, i:i + (H - 1) * s + 1:s, j:j + (Wd - 1) * s + 1:s] += \
                    np.einsum("co,chw->ohw", W[gi * cin_g:(gi + 1) * cin_g, :, i, j], xs)
    pad = L["padding"]
    if pad[0] == "valid":
        t, l, b, r = pad[1:]
    else:
        th, tw = kh - s, kw - s  # these tests keep k >= s
        if pad[1] == "BOTTOM_RIGHT_HEAVY":
            t, b, l, r = th // 2, th - th // 2, tw // 2, tw - tw // 2
        else:
            t, b, l, r = th - th // 2, th // 2, tw - tw // 2, tw // 2
    y = full[:, t:full.shape[1] - b, l:full.shape[2] - r]
    if bias is not None:
        y = y + bias[:, None, None]
    return y


def ref_batchnorm(x, L):
    if L["compute"]:
        mean = x.mean(axis=(1, 2), keepdims=True)
        var = x.var(axis=(1, 2), keepdims=True)
    else:
        mean, var = L["mean"][:, None, None], L["variance"][:, None, None]
    return L["gamma"][:, None, None] * (x - mean) / np.sqrt(var + L["epsilon"]) + L["beta"][:, None, None]


def ref_act(x, L):
    fn, p = L["fn"], L.get("params")
    if fn == "RELU":
        return np.maximum(x, 0)
    if fn == "SIGMOID":
        return 1 / (1 + np.exp(-x))
    if fn == "LINEAR":
        return p[0] * x + p[1]
    if fn == "LEAKYRELU":
        return np.where(x >= 0, x, p[0] * x)
    if fn == "PRELU":
        return np.where(x >= 0, x, p.reshape(-1, 1, 1) * x)
    if fn == "ELU":
        return np.where(x >= 0, x, p * (np.exp(x) - 1))
    if fn == "THRESHOLDEDRELU":
        return np.where(x >= p, x, 0)
    if fn == "TANH":
        return np.tanh(x)
    if fn == "SCALED_TANH":
        return p[0] * np.tanh(p[1] * x)
    if fn == "SIGMOID_HARD":
        return np.clip(p[0] * x + p[1], 0, 1)
    if fn == "SOFTSIGN":
        return x / (1 + np.abs(x))
    if fn == "SOFTPLUS":
        return np.log1p(np.exp(x))
    raise ValueError(fn)


def upsample_grid(X, N, mode):
    """Where output index i samples the input, per UpsampleLayerParams.LinearUpsampleMode."""
    i = np.arange(N, dtype=np.float64)
    if mode == "DEFAULT":
        g = i * ((X - X / N) / (N - 1))
    elif mode == "ALIGN_CORNERS_TRUE":
        g = i * ((X - 1) / (N - 1))
    else:
        spacing = X / N
        g = i * spacing + 0.5 * spacing - 0.5
    return np.clip(g, 0, X - 1)


def ref_upsample(x, L):
    fh, fw = L["factor"]
    if L["mode"] == "NN":
        return x.repeat(fh, axis=1).repeat(fw, axis=2)
    C, H, W = x.shape
    gy = upsample_grid(H, int(np.floor(H * fh)), L["linear_mode"])
    gx = upsample_grid(W, int(np.floor(W * fw)), L["linear_mode"])
    y0 = np.floor(gy).astype(int); y1 = np.minimum(y0 + 1, H - 1); wy = (gy - y0)[None, :, None]
    x0 = np.floor(gx).astype(int); x1 = np.minimum(x0 + 1, W - 1); wx = (gx - x0)[None, None, :]
    top = x[:, y0][:, :, x0] * (1 - wx) + x[:, y0][:, :, x1] * wx
    bottom = x[:, y1][:, :, x0] * (1 - wx) + x[:, y1][:, :, x1] * wx
    return top * (1 - wy) + bottom * wy


def ref_unary(x, L):
    x = L.get("scale", 1.0) * x + L.get("shift", 0.0)
    fn, eps, alpha = L["fn"], L.get("epsilon"), L.get("alpha", 1.0)
    return {"sqrt": lambda: np.sqrt(x), "rsqrt": lambda: 1 / np.sqrt(x + eps), "inverse": lambda: 1 / (x + eps),
            "power": lambda: x ** alpha, "exp": lambda: np.exp(x), "log": lambda: np.log(x),
            "abs": lambda: np.abs(x), "threshold": lambda: np.maximum(x, alpha)}[fn]()


def reference(recipe, image):
    """Core ML's output for `image` ((C, H, W) values after pre-processing)."""
    blobs = {"image": image.astype(np.float64)}
    for L in recipe:
        xs = [blobs[n] for n in L["inputs"]]
        k = L["kind"]
        if k == "conv":
            y = ref_conv(xs[0], L)
        elif k == "deconv":
            y = ref_deconv(xs[0], L)
        elif k == "batchnorm":
            y = ref_batchnorm(xs[0], L)
        elif k == "act":
            y = ref_act(xs[0], L)
        elif k == "pad":
            y = ref_pad(xs[0], L["amounts"], L["mode"], L.get("value", 0.0))
        elif k == "add":
            y = xs[0] + L["alpha"] if len(xs) == 1 else sum(xs)
        elif k == "multiply":
            y = xs[0] * L["alpha"] if len(xs) == 1 else np.prod(xs, axis=0)
        elif k == "upsample":
            y = ref_upsample(xs[0], L)
        elif k == "scale":
            y = xs[0] * L["W"].reshape(-1, 1, 1) + (0 if L["b"] is None else L["b"].reshape(-1, 1, 1))
        elif k == "bias":
            y = xs[0] + L["b"].reshape(-1, 1, 1)
        elif k == "crop":
            t, l, b, r = L["amounts"]
            y = xs[0][:, t:xs[0].shape[1] - b, l:xs[0].shape[2] - r]
        elif k == "concat":
            y = np.concatenate(xs, axis=0)
        elif k == "unary":
            y = ref_unary(xs[0], L)
        elif k == "clip":
            y = np.clip(xs[0], L["min"], L["max"])
        elif k == "mvn":
            axes = (0, 1, 2) if L["across"] else (1, 2)
            y = xs[0] - xs[0].mean(axis=axes, keepdims=True)
            if L["variance"]:
                y = y / np.sqrt(xs[0].var(axis=axes, keepdims=True) + L["epsilon"])
        else:
            raise ValueError(k)
        blobs[L["output"]] = y
    return blobs[recipe[-1]["output"]]


# --- running what the importer wrote ---------------------------------------------------------------

_core = ov.Core()


def run_openvino(onnx_path, x):
    # f32: the CPU plugin would otherwise run in bf16 on CPUs that have it.
    compiled = _core.compile_model(_core.read_model(onnx_path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([x[None].astype(np.float32)])[0][0]


def run_reference_evaluator(onnx_path, x):
    model = onnx.load(onnx_path)
    name = model.graph.input[0].name
    return ReferenceEvaluator(model).run(None, {name: x[None].astype(np.float32)})[0][0]


def run_importer(model_path, *args):
    env = dict(os.environ)
    return subprocess.run([sys.executable, IMPORTER, model_path, *args], capture_output=True, text=True, env=env)


class ImporterCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def convert(self, spec, name="model", args=(), written=None, in_process=False):
        """Saves the spec as NAME.mlmodel, runs the importer as `streamlens import` does (or,
        in_process, its main(), sparing a Python start per model); (onnx path, manifest) of what
        it wrote (WRITTEN.onnx/.json, by default NAME's)."""
        path = os.path.join(self.dir, f"{name}.mlmodel")
        mlmodels.save(spec, path)
        if in_process:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = coreml_import.main([path, *args])
            self.assertEqual(status, 0, f"importer failed:\n{out.getvalue()}\n{err.getvalue()}")
        else:
            r = run_importer(path, *args)
            self.assertEqual(r.returncode, 0, f"importer failed:\n{r.stdout}\n{r.stderr}")
        stem = os.path.join(self.dir, written or name)
        with open(stem + ".json") as f:
            return stem + ".onnx", json.load(f)

    def model_input(self, pixels, manifest):
        """What the runtime feeds: 8-bit pixels mapped onto the manifest's value range."""
        lo, hi = manifest["input"]["value_range"]
        return pixels * ((hi - lo) / 255.0) + lo

    def assertClose(self, got, want, context, rtol=1e-3):
        self.assertEqual(got.shape, want.shape, f"{context}: shape")
        scale = max(1.0, float(np.abs(want).max()))
        err = float(np.abs(got - want).max())
        self.assertLessEqual(err, rtol * scale, f"{context}: max error {err:.3g} (scale {scale:.3g})")


class StyleNetTests(ImporterCase):
    """A Create-ML-"video"-shaped network, end to end, at its own size and another one."""

    def check_style(self, final, upsample):
        recipe = mlmodels.style_net(seed=3, final=final, upsample=upsample)
        onnx_path, manifest = self.convert(mlmodels.build(recipe, 40, 32), f"style_{final}_{upsample}")
        rng = np.random.default_rng(7)
        for (w, h) in ((40, 32), (56, 24)):
            pixels = rng.integers(0, 256, size=(3, h, w)).astype(np.float64)
            want = reference(recipe, pixels / 255.0)  # Core ML: channelScale 1/255, no bias
            x = self.model_input(pixels, manifest)
            got = run_openvino(onnx_path, x)
            self.assertClose(got, want, f"{final}/{upsample} {w}x{h} OpenVINO")
            self.assertGreater(float(want.std()), 1.0, "the test network's output should vary")

    def test_multiply_nearest(self):
        self.check_style("multiply", "NN")

    def test_linear_activation_bilinear(self):
        self.check_style("linear", "BILINEAR")

    def test_scale_layer(self):
        self.check_style("scale", "NN")

    def test_onnx_file_and_manifest(self):
        recipe = mlmodels.style_net()
        spec = mlmodels.build(recipe, 40, 32, licence="CC0-1.0 (test model)")
        onnx_path, manifest = self.convert(spec, "starry", ("--name", "starry-night"), written="starry-night")
        model = onnx.load(onnx_path)
        onnx.checker.check_model(model, full_check=True)
        self.assertGreaterEqual(model.opset_import[0].version, 13)
        dims = model.graph.input[0].type.tensor_type.shape.dim
        self.assertEqual([d.dim_value for d in dims[:2]], [1, 3])
        self.assertTrue(dims[2].dim_param and dims[3].dim_param, "height and width must be symbolic")
        out_dims = model.graph.output[0].type.tensor_type.shape.dim
        self.assertTrue(out_dims[2].dim_param and out_dims[3].dim_param)
        self.assertEqual(model.graph.output[0].name, "stylizedImage")
        with open(os.path.join(self.dir, "starry.mlmodel"), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        self.assertEqual(manifest, {
            "schema_version": 1,
            "name": "starry-night",
            "model": "starry-night.onnx",
            "input": {"width": 40, "height": 32, "color_order": "RGB", "value_range": [0, 1], "layout": "NCHW",
                      "name": "image"},
            "crop": "stretch",
            "decoder": {"name": "image", "parameters": {"color_order": "RGB", "value_range": [0, 255], "layout": "NCHW"}},
            "labels": [],
            "licence": "CC0-1.0 (test model)",
            "provenance": f"converted by streamlens import from starry.mlmodel (sha256 {digest})",
        })

    def test_output_path_and_unknown_licence(self):
        spec = mlmodels.build(mlmodels.style_net(), 40, 32)
        path = os.path.join(self.dir, "in.mlmodel")
        mlmodels.save(spec, path)
        out = os.path.join(self.dir, "sub", "wave.onnx")
        r = run_importer(path, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.dir, "sub", "wave.json")) as f:
            manifest = json.load(f)
        self.assertEqual((manifest["name"], manifest["model"]), ("wave", "wave.onnx"))
        self.assertEqual(manifest["licence"], "unknown (from in.mlmodel)")
        self.assertTrue(os.path.exists(out))


class PreprocessingTests(ImporterCase):
    """imageScale, biases and channel order: in the manifest when every channel shares them,
    in the graph when the biases differ."""

    recipe = [dict(kind="scale", name="gain", inputs=["image"], output="stylizedImage",
                   W=np.array([100.0], np.float32), b=None, shape_scale=[1])]

    def run_case(self, **build):
        spec = mlmodels.build(self.recipe, 16, 12, **build)
        onnx_path, manifest = self.convert(spec)
        pixels = np.random.default_rng(2).integers(0, 256, size=(3, 12, 16)).astype(np.float64)
        got = run_openvino(onnx_path, self.model_input(pixels, manifest))
        return manifest, pixels, got

    def test_uniform_bias_goes_to_the_manifest(self):
        manifest, pixels, got = self.run_case(bgr=True, output_bgr=True, image_scale=2 / 255.0, biases=(-1, -1, -1))
        self.assertEqual(manifest["input"]["color_order"], "BGR")
        self.assertEqual(manifest["input"]["value_range"], [-1, 1])
        self.assertEqual(manifest["decoder"]["parameters"]["color_order"], "BGR")
        self.assertClose(got, 100 * (pixels * 2 / 255.0 - 1), "scale 2/255, bias -1")

    def test_per_channel_biases_go_into_the_graph(self):
        # Caffe-style mean subtraction, BGR: channel 0 is blue.
        manifest, pixels, got = self.run_case(bgr=True, image_scale=1.0, biases=(-123.68, -116.78, -103.94))
        self.assertEqual(manifest["input"]["value_range"], [0, 255])
        self.assertEqual(manifest["input"]["color_order"], "BGR")
        bias_bgr = np.array([-103.94, -116.78, -123.68]).reshape(3, 1, 1)
        self.assertClose(got, 100 * (pixels + bias_bgr), "per-channel bias", rtol=1e-4)


def conv_layer(rng, **kw):
    cin = kw.pop("cin", 3)
    cout = kw.pop("cout", 3)
    return mlmodels.conv("layer", ["image"], "stylizedImage", rng, cin, cout, kw.pop("k", 3), **kw)


def single_layer_cases():
    """(name, recipe, input value offset) for one layer of each kind and mode."""
    rng = np.random.default_rng(11)
    C = 3
    cases = [
        ("conv valid padded", [conv_layer(rng, padding=("valid", 1, 2, 0, 1))]),
        ("conv same bottom-right", [conv_layer(rng, k=4, stride=1, padding=("same", "BOTTOM_RIGHT_HEAVY"))]),
        ("conv same top-left", [conv_layer(rng, k=4, padding=("same", "TOP_LEFT_HEAVY"))]),
        ("conv stride 2 same", [conv_layer(rng, k=3, stride=2, padding=("same", "BOTTOM_RIGHT_HEAVY"))]),
        ("conv stride 2 same top-left", [conv_layer(rng, k=4, stride=2, padding=("same", "TOP_LEFT_HEAVY"))]),
        ("conv dilated", [conv_layer(rng, k=3, dilation=2, padding=("same", "BOTTOM_RIGHT_HEAVY"))]),
        ("conv grouped no bias", [conv_layer(rng, k=3, groups=3, bias=False, padding=("valid", 1, 1, 1, 1))]),
        ("deconv valid", [dict(kind="deconv", name="layer", inputs=["image"], output="stylizedImage",
                               W=rng.standard_normal((3, 3, 4, 4)).astype(np.float32) * 0.3,
                               b=rng.standard_normal(3).astype(np.float32), stride=2, padding=("valid", 1, 1, 1, 1),
                               dilation=1, groups=1)]),
        ("deconv valid, outputShape as the padding gives",
         [dict(kind="deconv", name="layer", inputs=["image"], output="stylizedImage",
               W=rng.standard_normal((3, 3, 4, 4)).astype(np.float32) * 0.3, b=None, stride=2,
               padding=("valid", 1, 1, 1, 1), dilation=1, groups=1, output_shape=(32, 40))]),
        ("deconv same", [dict(kind="deconv", name="layer", inputs=["image"], output="stylizedImage",
                              W=rng.standard_normal((3, 3, 3, 3)).astype(np.float32) * 0.3,
                              b=None, stride=2, padding=("same", "BOTTOM_RIGHT_HEAVY"), dilation=1, groups=1)]),
        ("batchnorm inference", [dict(kind="batchnorm", name="layer", inputs=["image"], output="stylizedImage",
                                      compute=False, instance=False, gamma=np.array([1.5, 0.5, -1.0], np.float32),
                                      beta=np.array([0.1, 0.2, 0.3], np.float32), mean=np.array([0.4, 0.5, 0.6], np.float32),
                                      variance=np.array([0.09, 0.04, 0.25], np.float32), epsilon=1e-3)]),
        ("batchnorm instance", [mlmodels.instance_norm("layer", ["image"], "stylizedImage", rng, C)]),
        ("batchnorm computed over a batch of one",
         [dict(mlmodels.instance_norm("layer", ["image"], "stylizedImage", rng, C), instance=False)]),
        ("pad constant", [dict(kind="pad", name="layer", inputs=["image"], output="stylizedImage", mode="constant",
                               amounts=(1, 2, 3, 0), value=0.5)]),
        ("pad reflection", [dict(kind="pad", name="layer", inputs=["image"], output="stylizedImage", mode="reflection",
                                 amounts=(2, 0, 1, 3))]),
        ("pad replication", [dict(kind="pad", name="layer", inputs=["image"], output="stylizedImage",
                                  mode="replication", amounts=(0, 3, 2, 1))]),
        ("upsample nearest 2x3", [dict(kind="upsample", name="layer", inputs=["image"], output="stylizedImage",
                                       factor=(2, 3), mode="NN", linear_mode="DEFAULT")]),
        *[(f"upsample bilinear {m}", [dict(kind="upsample", name="layer", inputs=["image"], output="stylizedImage",
                                           factor=(2, 2), mode="BILINEAR", linear_mode=m)])
          for m in ("DEFAULT", "ALIGN_CORNERS_TRUE", "ALIGN_CORNERS_FALSE")],
        *[(f"upsample bilinear x1.5 {m}", [dict(kind="upsample", name="layer", inputs=["image"], output="stylizedImage",
                                                factor=(1.5, 2.5), mode="BILINEAR", linear_mode=m)])
          for m in ("ALIGN_CORNERS_TRUE", "ALIGN_CORNERS_FALSE")],
        ("scale per channel with bias", [dict(kind="scale", name="layer", inputs=["image"], output="stylizedImage",
                                              W=np.array([2.0, -1.0, 0.5], np.float32), b=np.array([0.1, 0.2, 0.3], np.float32),
                                              shape_scale=[3], shape_bias=[3])]),
        ("bias", [dict(kind="bias", name="layer", inputs=["image"], output="stylizedImage",
                       b=np.array([0.5, -0.5, 2.0], np.float32))]),
        ("add scalar", [dict(kind="add", name="layer", inputs=["image"], output="stylizedImage", alpha=0.25)]),
        ("multiply two inputs", [dict(kind="act", name="t", inputs=["image"], output="t", fn="TANH"),
                                 dict(kind="multiply", name="layer", inputs=["image", "t"], output="stylizedImage")]),
        ("add three inputs", [dict(kind="act", name="a", inputs=["image"], output="a", fn="SIGMOID"),
                              dict(kind="act", name="b", inputs=["image"], output="b", fn="SOFTSIGN"),
                              dict(kind="add", name="layer", inputs=["image", "a", "b"], output="stylizedImage")]),
        ("crop", [dict(kind="crop", name="layer", inputs=["image"], output="stylizedImage", amounts=(1, 2, 3, 0))]),
        ("concat then conv", [dict(kind="act", name="r", inputs=["image"], output="r", fn="RELU"),
                              dict(kind="concat", name="cat", inputs=["image", "r"], output="cat"),
                              mlmodels.conv("layer", ["cat"], "stylizedImage", rng, 6, 3, 1)]),
        ("clip", [dict(kind="clip", name="layer", inputs=["image"], output="stylizedImage", min=-0.2, max=0.3)]),
        *[(f"mvn across={a} variance={v}", [dict(kind="mvn", name="layer", inputs=["image"], output="stylizedImage",
                                                 across=a, variance=v, epsilon=1e-2)])
          for a in (False, True) for v in (False, True)],
        ("fp16 weights", [dict(conv_layer(rng, padding=("same", "BOTTOM_RIGHT_HEAVY")), fp16=True)]),
    ]
    for fn, params in (("LEAKYRELU", [0.2]), ("PRELU", np.array([0.1, 0.2, 0.3], np.float32)), ("ELU", 0.7),
                       ("THRESHOLDEDRELU", 0.1), ("TANH", None), ("SCALED_TANH", [1.7, 0.6]),
                       ("SIGMOID_HARD", [0.3, 0.4]), ("SOFTSIGN", None), ("SOFTPLUS", None), ("LINEAR", [-2.0, 0.5])):
        cases.append((f"activation {fn}", [dict(kind="act", name="layer", inputs=["image"], output="stylizedImage",
                                                fn=fn, params=params)]))
    for fn, extra in (("sqrt", {}), ("rsqrt", dict(epsilon=1e-3)), ("inverse", dict(epsilon=1e-2)),
                      ("power", dict(alpha=1.5)), ("exp", {}), ("log", {}), ("abs", dict(shift=-0.3)),
                      ("threshold", dict(alpha=0.4))):
        # scale 0.4, shift 0.5: inputs in [-1, 1] become [0.1, 0.9], inside every function's domain.
        cases.append((f"unary {fn}", [dict(kind="unary", name="layer", inputs=["image"], output="stylizedImage",
                                           fn=fn, shift=extra.pop("shift", 0.5), scale=0.4, **extra)]))
    # 8-bit linear quantization, one scale and bias per output channel.
    codes = rng.integers(0, 256, size=(3, 3, 3, 3)).astype(np.uint8)
    qscale, qbias = np.array([0.01, 0.02, 0.005], np.float32), np.array([-1.2, -2.5, -0.6], np.float32)
    dequantized = (codes.astype(np.float32) * qscale.reshape(-1, 1, 1, 1) + qbias.reshape(-1, 1, 1, 1))
    q = dict(conv_layer(rng, padding=("valid", 1, 1, 1, 1)), W=dequantized, quantized=(codes, qscale, qbias))
    cases.append(("conv 8-bit quantized", [q]))
    return cases


class SingleLayerTests(ImporterCase):
    """Each supported layer kind and mode alone (3 channels in and out), at two image sizes.
    The input is scaled to [-1, 1] (imageScale 2/255, bias -1) so negative slopes count too."""

    def test_each_layer(self):
        pixels_rng = np.random.default_rng(5)
        for name, recipe in single_layer_cases():
            with self.subTest(layer=name):
                # Multi-array output: the layer may change the size (crop, pad, upsample).
                spec = mlmodels.build(recipe, 20, 16, image_output=False, image_scale=2 / 255.0, biases=(-1, -1, -1))
                onnx_path, manifest = self.convert(spec, "single", in_process=True)
                # OpenVINO at the model's size and another; ONNX's reference evaluator, a second
                # and independent runtime, on a small image (it is pure Python).
                runs = [((20, 16), run_openvino), ((13, 22), run_openvino), ((7, 5), run_reference_evaluator)]
                if "x1.5" in name:
                    # onnx 1.17's evaluator picks the wrong neighbour where a fractional grid point
                    # falls exactly on an input pixel (7 -> 17 columns, column 8 samples 3.0);
                    # OpenVINO gets those right.
                    runs = runs[:2]
                for (w, h), run in runs:
                    pixels = pixels_rng.integers(0, 256, size=(3, h, w)).astype(np.float64)
                    want = reference(recipe, pixels * 2 / 255.0 - 1)
                    x = self.model_input(pixels, manifest)
                    self.assertClose(run(onnx_path, x), want, f"{name} {w}x{h} {run.__name__}")


class RefusalTests(ImporterCase):
    def assertRefused(self, spec, *needles):
        path = os.path.join(self.dir, "bad.mlmodel")
        mlmodels.save(spec, path)
        r = run_importer(path)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        for needle in needles:
            self.assertIn(needle, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "bad.onnx")), "nothing is written on failure")
        return r.stderr

    def test_unsupported_layer_is_named(self):
        err = self.assertRefused(mlmodels.build(mlmodels.unsupported_recipe(), 40, 32),
                                 "layer 'probabilities' has type 'softmaxND'", "does not support", "convolution")
        self.assertNotIn("Traceback", err)

    def test_unsupported_activation_is_named(self):
        recipe = [dict(kind="act", name="psoft", inputs=["image"], output="stylizedImage", fn="PARAMETRICSOFTPLUS",
                       params=(np.ones(3, np.float32), np.ones(3, np.float32)))]
        self.assertRefused(mlmodels.build(recipe, 8, 8), "layer 'psoft'", "parametricSoftplus")

    def test_fixed_deconvolution_size_is_refused(self):
        recipe = [dict(kind="deconv", name="up2", inputs=["image"], output="stylizedImage",
                       W=np.ones((3, 3, 4, 4), np.float32), b=None, stride=2, padding=("valid", 1, 1, 1, 1),
                       dilation=1, groups=1, output_shape=(33, 41))]
        self.assertRefused(mlmodels.build(recipe, 20, 16, image_output=False), "layer 'up2'", "33x41")

    def test_not_a_model(self):
        path = os.path.join(self.dir, "junk.mlmodel")
        with open(path, "wb") as f:
            f.write(b"\xff\x00 not a protobuf")
        r = run_importer(path)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("streamlens import:", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_missing_file(self):
        r = run_importer(os.path.join(self.dir, "absent.mlmodel"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("absent.mlmodel", r.stderr)
        self.assertNotIn("Traceback", r.stderr)


if __name__ == "__main__":
    unittest.main()
