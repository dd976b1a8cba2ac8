"""Writes the committed seed corpus of the coreml-import fuzzer (Fuzz/corpus/coreml-import): one
small .mlmodel per single-layer case of Tests/Python/test_coreml_import.py (every layer kind and
mode the importer maps, built by mlmodels.py's NeuralNetworkBuilder recipes at 20x16), plus a
model with an unsupported layer, one with a multi-array input and a BGR one with per-channel
biases. Deterministic (seeded weights), so re-running it rewrites the same bytes.

    PYTHONPATH=.deps/python:.deps/openvino python3 Fuzz/coreml/make_seeds.py
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "Tests", "Python"))

import mlmodels  # noqa: E402
import test_coreml_import  # noqa: E402

OUT = os.path.join(ROOT, "Fuzz", "corpus", "coreml-import")
WIDTH, HEIGHT = 20, 16


def main():
    os.makedirs(OUT, exist_ok=True)
    models = {}
    for name, recipe in test_coreml_import.single_layer_cases():
        models[name] = mlmodels.build(recipe, WIDTH, HEIGHT, image_scale=2 / 255.0, biases=(-1.0, -1.0, -1.0))
    models["unsupported layer"] = mlmodels.build(mlmodels.unsupported_recipe(), WIDTH, HEIGHT)
    relu = [dict(kind="act", name="layer", inputs=["image"], output="stylizedImage", fn="RELU")]
    models["multi-array input"] = mlmodels.build(relu, WIDTH, HEIGHT, image_input=False)
    models["bgr per-channel bias"] = mlmodels.build(relu, WIDTH, HEIGHT, bgr=True, output_bgr=True,
                                                    biases=(-123.68, -116.78, -103.94), licence="CC0-1.0")
    for name, spec in models.items():
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        mlmodels.save(spec, os.path.join(OUT, f"{slug}.mlmodel"))
    print(f"wrote {len(models)} seeds to {OUT}")


if __name__ == "__main__":
    main()
