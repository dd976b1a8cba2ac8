"""tools/make_test_stylizer.py: the ONNX network it writes, run by OpenVINO, equals its NumPy
reference (`--reference`) within one 8-bit level, for both layouts and both value ranges, at
the manifest's size and at another one.

    PYTHONPATH=.deps/python:.deps/openvino python3 -m unittest discover -s Tests/Python
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import onnx
import openvino as ov

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "make_test_stylizer.py")

_core = ov.Core()


def test_frame(width, height, seed=4):
    """Packed RGB8: smooth ramps (so neighbours are alike, as in video) plus some noise."""
    y, x = np.mgrid[0:height, 0:width]
    rng = np.random.default_rng(seed)
    img = np.stack([x * 255 // max(1, width - 1), y * 255 // max(1, height - 1), (x * 7 + y * 3) % 256], axis=-1)
    img = np.clip(img + rng.integers(-20, 21, size=img.shape), 0, 255)
    return img.astype(np.uint8)


def tool(*args):
    r = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"make_test_stylizer.py {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}")
    return r


class MakeTestStylizerTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def openvino_u8(self, directory, layout, value_range, frame):
        """The frame through the ONNX model on OpenVINO, fed and read as the manifest says."""
        compiled = _core.compile_model(_core.read_model(os.path.join(directory, "stylizer.onnx")), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
        x = frame.astype(np.float32) / 255.0 * value_range  # (H, W, 3)
        x = x[None] if layout == "NHWC" else x.transpose(2, 0, 1)[None]
        y = compiled([x])[0][0]
        y = y if layout == "NHWC" else y.transpose(1, 2, 0)
        return np.clip(np.floor(y * 255.0 / value_range + 0.5), 0, 255).astype(np.uint8)

    def reference_u8(self, directory, layout, value_range, frame):
        h, w = frame.shape[:2]
        src, dst = os.path.join(self.dir, "in.rgb"), os.path.join(self.dir, "out.rgb")
        with open(src, "wb") as f:
            f.write(frame.tobytes())
        tool("--layout", layout, "--range", value_range, "--out", directory, "--reference", src, str(w), str(h), dst)
        with open(dst, "rb") as f:
            data = f.read()
        self.assertEqual(len(data), w * h * 3)
        return np.frombuffer(data, dtype=np.uint8).reshape(h, w, 3)

    def test_openvino_equals_the_reference(self):
        outputs = {}
        for layout in ("NCHW", "NHWC"):
            for value_range in ("255", "1"):
                with self.subTest(layout=layout, range=value_range):
                    d = os.path.join(self.dir, f"{layout}-{value_range}")
                    tool("--layout", layout, "--range", value_range, "--out", d, "--seed", "3")
                    for (w, h) in ((64, 48), (37, 29)):
                        frame = test_frame(w, h)
                        got = self.openvino_u8(d, layout, float(value_range), frame)
                        want = self.reference_u8(d, layout, value_range, frame)
                        diff = np.abs(got.astype(int) - want.astype(int))
                        self.assertLessEqual(int(diff.max()), 1, f"{layout} range {value_range} {w}x{h}")
                        if (w, h) == (64, 48):
                            outputs[(layout, value_range)] = want
                            # Visibly varying, not saturated.
                            self.assertGreater(float(want.std()), 20, "output should vary across the image")
                            saturated = np.mean((want == 0) | (want == 255))
                            self.assertLess(saturated, 0.02, "output should not be saturated")
                            self.assertGreater(float(np.abs(want.astype(int) - frame.astype(int)).mean()), 5,
                                               "output should differ from the input")
        # Same seed: the layout and the range change the tensors, not the picture.
        first = outputs[("NCHW", "255")]
        for key, out in outputs.items():
            self.assertLessEqual(int(np.abs(out.astype(int) - first.astype(int)).max()), 1, f"{key} vs NCHW/255")

    def test_files(self):
        d = os.path.join(self.dir, "m")
        tool("--layout", "NHWC", "--range", "1", "--out", d)
        with open(os.path.join(d, "stylizer.json")) as f:
            m = json.load(f)
        self.assertEqual(m["schema_version"], 1)
        self.assertEqual(m["model"], "stylizer.onnx")
        self.assertEqual(m["crop"], "stretch")
        self.assertEqual(m["input"], {"width": 64, "height": 48, "color_order": "RGB", "value_range": [0, 1],
                                      "layout": "NHWC", "name": "input"})
        self.assertEqual(m["decoder"], {"name": "image", "parameters": {"color_order": "RGB", "value_range": [0, 1],
                                                                          "layout": "NHWC"}})
        self.assertEqual(m["labels"], [])
        self.assertTrue(m["licence"] and m["provenance"])
        model = onnx.load(os.path.join(d, "stylizer.onnx"))
        onnx.checker.check_model(model, full_check=True)
        dims = model.graph.input[0].type.tensor_type.shape.dim
        self.assertEqual(dims[0].dim_value, 1)
        self.assertEqual(dims[3].dim_value, 3)
        self.assertTrue(dims[1].dim_param and dims[2].dim_param, "height and width must be symbolic")

    def test_seeds_differ(self):
        a, b = os.path.join(self.dir, "a"), os.path.join(self.dir, "b")
        tool("--layout", "NCHW", "--range", "255", "--out", a, "--seed", "1")
        tool("--layout", "NCHW", "--range", "255", "--out", b, "--seed", "2")
        frame = test_frame(32, 24)
        ra = self.reference_u8(a, "NCHW", "255", frame)
        rb = self.reference_u8(b, "NCHW", "255", frame)
        self.assertGreater(int(np.abs(ra.astype(int) - rb.astype(int)).max()), 10)

    def test_reference_refuses_a_mismatched_directory(self):
        d = os.path.join(self.dir, "m")
        tool("--layout", "NCHW", "--range", "255", "--out", d)
        src = os.path.join(self.dir, "in.rgb")
        with open(src, "wb") as f:
            f.write(test_frame(8, 8).tobytes())
        r = subprocess.run([sys.executable, TOOL, "--layout", "NHWC", "--range", "255", "--out", d, "--reference",
                            src, "8", "8", os.path.join(self.dir, "out.rgb")], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("NCHW", r.stderr)


if __name__ == "__main__":
    unittest.main()
