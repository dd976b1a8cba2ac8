"""The coreml-import fuzzer within the ordinary test run: its committed corpus
(Fuzz/corpus/coreml-import) replayed through the harness's own check (Fuzz/coreml/
fuzz_coreml_import.py, no atheris needed), and every model the fuzzer crashed the importer with,
rebuilt here as a readable recipe, with the message the importer gives now.

    PYTHONPATH=.deps/python:.deps/openvino python3 -m unittest Tests/Python/test_fuzz_corpus.py
"""

import os
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "Fuzz", "coreml"))

import mlmodels  # noqa: E402
import coreml_import  # noqa: E402
import fuzz_coreml_import  # noqa: E402
import test_coreml_import as importer_tests  # noqa: E402  (its helpers; its tests run on their own)

CORPUS = os.path.join(ROOT, "Fuzz", "corpus", "coreml-import")
RELU = [dict(kind="act", name="layer", inputs=["image"], output="stylizedImage", fn="RELU")]


def refusal(spec):
    """The importer's ImportFailure message for a spec, through the fuzz harness's check (which
    raises on anything but an ImportFailure or a loadable result)."""
    return fuzz_coreml_import.check_one(spec.SerializeToString(), coreml_import)


class FuzzCorpusTests(unittest.TestCase):
    def test_committed_corpus_replays(self):
        files = sorted(os.listdir(CORPUS))
        self.assertGreaterEqual(len(files), 50)
        converted = 0
        for name in files:
            with self.subTest(name):
                with open(os.path.join(CORPUS, name), "rb") as f:
                    converted += fuzz_coreml_import.check_one(f.read(), coreml_import) is None
        # The seeds get past the checks, so mutations of them reach the layer mappings.
        self.assertGreaterEqual(converted, 50)

    def test_seeds_are_what_make_seeds_writes(self):
        # The corpus is reproducible: make_seeds.py rewrites the same bytes (seeded weights).
        import make_seeds
        with tempfile.TemporaryDirectory() as tmp:
            make_seeds.OUT = tmp
            make_seeds.main()
            for name in os.listdir(tmp):
                with open(os.path.join(tmp, name), "rb") as a, open(os.path.join(CORPUS, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), name)

    def test_unknown_colour_space_is_refused(self):
        # Found by the fuzzer: a colour space value the proto does not define made the message's
        # own enum lookup raise ValueError (crash-e13e1215…, regression-unknown-colour-space).
        spec = mlmodels.build(RELU, 20, 16)
        spec.description.output[0].type.imageType.colorSpace = 83
        self.assertEqual(refusal(spec), "output 'stylizedImage' has colour space 83, which Core ML does not define; "
                                        "streamlens import handles RGB and BGR images")
        spec.description.output[0].type.imageType.colorSpace = 10  # GRAYSCALE: named
        self.assertEqual(refusal(spec), "output 'stylizedImage' is a GRAYSCALE image; streamlens import handles RGB "
                                        "and BGR images")

    def test_two_value_fields_with_another_count_are_refused(self):
        # Found by the fuzzer: a convolution whose kernelSize held three values failed to unpack
        # (ValueError) instead of being refused (crash-f109f9d3…, regression-kernel-size). The
        # other (height, width) fields of the same layers had the same flaw and get the same check.
        conv = [mlmodels.conv("layer", ["image"], "stylizedImage", np.random.default_rng(0), 3, 3, 3)]
        deconv = [dict(kind="deconv", name="layer", inputs=["image"], output="stylizedImage",
                       W=np.ones((3, 3, 4, 4), np.float32), b=None, stride=2, padding=("valid", 1, 1, 1, 1),
                       dilation=1, groups=1, output_shape=(32, 40))]
        upsample = [dict(kind="upsample", name="layer", inputs=["image"], output="stylizedImage", factor=(2, 2),
                         mode="NN", linear_mode="DEFAULT")]
        crop = [dict(kind="act", name="r", inputs=["image"], output="r", fn="RELU"),
                dict(kind="crop", name="layer", inputs=["image", "r"], output="stylizedImage", amounts=(0, 0, 0, 0))]
        cases = [(conv, "convolution", "kernelSize"), (conv, "convolution", "stride"),
                 (conv, "convolution", "dilationFactor"), (deconv, "convolution", "outputShape"),
                 (upsample, "upsample", "scalingFactor"), (upsample, "upsample", "fractionalScalingFactor"),
                 (crop, "crop", "offset")]
        for recipe, kind, field in cases:
            for count in (1, 3):
                with self.subTest(field=field, count=count):
                    spec = mlmodels.build(recipe, 20, 16)
                    values = getattr(getattr(spec.neuralNetwork.layers[-1], kind), field)
                    del values[:]
                    values.extend([2] * count)
                    self.assertEqual(refusal(spec), f"layer 'layer': {field} has {count} values, expected 2 (height, width)")

    def test_zero_stride_is_refused(self):
        # Found by the fuzzer: a convolution with stride [0, 1] was handed to ONNX's shape
        # inference, which divided by it and killed the process with SIGFPE ("Floating point
        # exception"; crash-a02e59c8…, regression-zero-stride). Kernel size and dilation get the
        # same check.
        for field in ("stride", "kernelSize", "dilationFactor"):
            with self.subTest(field=field):
                spec = mlmodels.build([mlmodels.conv("layer", ["image"], "stylizedImage", np.random.default_rng(0), 3, 3, 3)], 20, 16)
                values = getattr(spec.neuralNetwork.layers[0].convolution, field)
                del values[:]
                values.extend([0, 1])
                self.assertEqual(refusal(spec), f"layer 'layer': {field} is [0, 1]; each value must be at least 1")

    def test_batchnorm_channel_count_is_checked_before_defaults_are_made(self):
        # Found by the fuzzer: a batchnorm declaring 1993938567167 channels with gamma but no beta
        # made np.zeros allocate 7.25 TiB (MemoryError) before the sizes were compared
        # (crash-374d8de1…, regression-batchnorm-channels).
        norm = [mlmodels.instance_norm("layer", ["image"], "stylizedImage", np.random.default_rng(0), 3)]
        spec = mlmodels.build(norm, 20, 16)
        p = spec.neuralNetwork.layers[0].batchnorm
        p.channels = 1993938567167
        p.beta.ClearField("floatValue")
        self.assertEqual(refusal(spec), "layer 'layer': gamma has 3 values for 1993938567167 channels")
        # Neither given: the defaults' size is the count alone, so it is bounded.
        p.gamma.ClearField("floatValue")
        self.assertEqual(refusal(spec), "layer 'layer': batchnorm over 1993938567167 channels without gamma or beta; "
                                        "streamlens import takes at most 65536 channels there")
        # Within the bound, defaults are made as before (and the network is checked as usual).
        p.channels = 3
        self.assertIsNone(refusal(spec))

    def test_input_without_a_size_is_refused(self):
        # Found by the fuzzer: an input image of height 0 was converted, and the manifest written
        # with it is one StreamLens refuses to load ("input size 20x0 is not positive")
        # (crash-849cf30d…, regression-zero-input-height).
        spec = mlmodels.build(RELU, 20, 16)
        spec.description.input[0].type.imageType.height = 0
        self.assertEqual(refusal(spec), "input 'image' declares the size 20x0; streamlens import needs the model's "
                                        "own input size (width and height above 0)")
        spec = mlmodels.build(RELU, 20, 16, image_input=False)
        spec.description.input[0].type.multiArrayType.shape[-1] = 0
        self.assertEqual(refusal(spec), "input 'image' declares the size 0x16; streamlens import needs the model's "
                                        "own input size (width and height above 0)")

    def test_output_written_by_several_layers_converts(self):
        # Found by the fuzzer: two layers writing the output blob in turn (Core ML lets a layer
        # overwrite a blob) made two ONNX nodes write the graph's output, and onnx.checker's
        # ValidationError escaped (crash-a2d183e3…, regression-output-written-twice). The last
        # writer's value is the output now.
        recipe = [dict(kind="act", name="first", inputs=["image"], output="stylizedImage", fn="RELU"),
                  dict(kind="act", name="second", inputs=["stylizedImage"], output="stylizedImage", fn="SIGMOID")]
        self.assertIsNone(refusal(mlmodels.build(recipe, 20, 16)))
        model, _, _ = coreml_import.convert(mlmodels.build(recipe, 20, 16), "m.mlmodel")
        writers = [node.op_type for node in model.graph.node if "stylizedImage" in node.output]
        self.assertEqual(writers, ["Identity"])
        # Checked for the values too: sigmoid(relu(x)).
        x = np.linspace(-2, 2, 3 * 16 * 20, dtype=np.float32).reshape(1, 3, 16, 20)
        got = importer_tests.ReferenceEvaluator(model).run(None, {"image": x})[0]
        np.testing.assert_allclose(got, 1 / (1 + np.exp(-np.maximum(x, 0))), rtol=1e-5)

    def test_unnamed_layers_convert_and_unnamed_blobs_are_refused(self):
        # Found by the fuzzer: an mvn layer with the name "" made helper values named "", and
        # onnx.checker's ValidationError escaped (crash-a857c61b…, regression-unnamed-layer).
        mvn = [dict(kind="mvn", name="", inputs=["image"], output="stylizedImage", across=False, variance=True,
                    epsilon=1e-2)]
        spec = mlmodels.build(mvn, 20, 16)
        self.assertIsNone(refusal(spec))
        model, _, _ = coreml_import.convert(spec, "m.mlmodel")
        self.assertNotIn("", [o for node in model.graph.node for o in node.output])
        # A blob or feature without a name is refused: it would be an ONNX value named "".
        spec.neuralNetwork.layers[0].output[0] = ""
        self.assertEqual(refusal(spec), "layer '' writes an output with no name")
        spec = mlmodels.build(RELU, 20, 16)
        spec.description.input[0].name = ""
        self.assertEqual(refusal(spec), "the model's input or output has no name")

    def test_enum_values_core_ml_does_not_define_are_refused(self):
        # Found by the fuzzer: an upsample layer's linearUpsampleMode 3 raised KeyError: 3
        # (crash-56f59260…, regression-upsample-mode). Its mode, and a convolution's same-padding
        # asymmetryMode, fell through to a default branch: refused too.
        upsample = [dict(kind="upsample", name="layer", inputs=["image"], output="stylizedImage", factor=(2, 2),
                         mode="BILINEAR", linear_mode="DEFAULT")]
        conv = [mlmodels.conv("layer", ["image"], "stylizedImage", np.random.default_rng(0), 3, 3, 3,
                              padding=("same", "BOTTOM_RIGHT_HEAVY"))]
        for recipe, edit, message in (
                (upsample, lambda layer: setattr(layer.upsample, "linearUpsampleMode", 3), "linearUpsampleMode is 3"),
                (upsample, lambda layer: setattr(layer.upsample, "mode", 7), "mode is 7"),
                (conv, lambda layer: setattr(layer.convolution.same, "asymmetryMode", 2), "asymmetryMode is 2")):
            with self.subTest(message):
                spec = mlmodels.build(recipe, 20, 16)
                self.assertIsNone(refusal(spec))
                edit(spec.neuralNetwork.layers[0])
                self.assertEqual(refusal(spec), f"layer 'layer': {message}, which Core ML does not define")

    def test_per_channel_quantization_counts(self):
        # Found by the fuzzer: per-channel 8-bit weights with 3 biases and no scales failed to
        # broadcast (ValueError; crash-731346f2…, regression-quantization-bias-count). An absent
        # list means 1 (scales) or 0 (biases), one value applies to every channel, as in the
        # one-value case; other counts are refused.
        recipe = dict(importer_tests.single_layer_cases())["conv 8-bit quantized"]
        codes = recipe[0]["quantized"][0]
        spec = mlmodels.build(recipe, 20, 16)
        q = spec.neuralNetwork.layers[0].convolution.weights.quantization.linearQuantization
        bias = np.asarray(q.bias, np.float32)
        del q.scale[:]
        self.assertIsNone(refusal(spec))
        model, _, _ = coreml_import.convert(spec, "m.mlmodel")
        weight = next(t for t in model.graph.initializer if t.name == "layer.weight")
        got = coreml_import.numpy_helper.to_array(weight)
        np.testing.assert_allclose(got, codes.astype(np.float32) + bias.reshape(-1, 1, 1, 1))
        q.scale.extend([0.5, 0.25])
        self.assertEqual(refusal(spec), "layer 'layer': weights has 2 quantization scales and 3 biases; expected one, "
                                        "or one per channel, of each")

    def test_input_and_output_with_one_name_are_refused(self):
        # The same naming flaw, seen while fixing the one above: check_at_size indexed an empty
        # shape (IndexError).
        spec = mlmodels.build(RELU, 20, 16)
        spec.description.output[0].name = "image"
        spec.neuralNetwork.layers[0].output[0] = "image"
        self.assertEqual(refusal(spec), "the model's input and output are both named 'image'")


class FuzzPreprocessingTests(importer_tests.ImporterCase):
    """Found by the fuzzer: a negative imageScale was converted with the value range
    [-1, -2.6e33] (lo > hi), which StreamLens refuses to load (crash-c22dadc1…,
    regression-negative-scale). Now a map the manifest's range cannot say goes into the graph,
    and pixels come out as Core ML computes them."""

    recipe = [dict(kind="scale", name="gain", inputs=["image"], output="stylizedImage",
                   W=np.array([100.0], np.float32), b=None, shape_scale=[1])]

    def run_case(self, **build):
        onnx_path, manifest = self.convert(mlmodels.build(self.recipe, 16, 12, **build), in_process=True)
        pixels = np.random.default_rng(2).integers(0, 256, size=(3, 12, 16)).astype(np.float64)
        return manifest, pixels, importer_tests.run_openvino(onnx_path, self.model_input(pixels, manifest))

    def test_negative_scale_goes_into_the_graph(self):
        manifest, pixels, got = self.run_case(image_scale=-1 / 255.0, biases=(1, 1, 1))
        self.assertEqual(manifest["input"]["value_range"], [0, 255])
        self.assertClose(got, 100 * (1 - pixels / 255.0), "scale -1/255, bias 1", rtol=1e-4)

    def test_scale_lost_in_the_manifests_rounding_goes_into_the_graph(self):
        # 255 * 1e-9 rounds to 0 at the manifest's six decimals: the range would be [0, 0].
        manifest, pixels, got = self.run_case(image_scale=1e-9, biases=(0, 0, 0))
        self.assertEqual(manifest["input"]["value_range"], [0, 255])
        self.assertClose(got, 100 * 1e-9 * pixels, "scale 1e-9", rtol=1e-4)

    def test_infinite_scale_is_refused(self):
        spec = mlmodels.build(self.recipe, 16, 12)
        spec.neuralNetwork.preprocessing[0].scaler.channelScale = float("inf")
        self.assertEqual(refusal(spec), "input 'image': its pre-processing (scale inf, biases [0.0, 0.0, 0.0]) is not finite")


if __name__ == "__main__":
    unittest.main()
