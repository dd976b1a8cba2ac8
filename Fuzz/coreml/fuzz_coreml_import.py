"""libFuzzer harness (atheris) for tools/coreml_import.py, the importer behind `streamlens import`.

Each input is written as an .mlmodel file and goes through the importer's own path: load_spec
(protobuf parsing), then convert (the model checks, every layer's mapping, ONNX shape inference
and onnx.checker). A model the importer cannot convert must be refused with an ImportFailure, the
importer's error for people (`streamlens import: <reason>`). Anything else that escapes is a
finding: main() would only print "cannot convert …: KeyError: 3", the catch-all for what its
checks did not foresee. A model it does convert must give a manifest StreamLens can load: JSON
numbers only (no NaN or Infinity), a positive input size, a value range lo < hi that 0…255 maps
onto (the rules of ModelManifest.validate).

    FUZZ_TARGETS=coreml-import tools/fuzz.sh          # atheris in .deps/fuzz-venv (make fuzz)
    PYTHONPATH=.deps/python python3 Fuzz/coreml/fuzz_coreml_import.py --replay FILE…   # no atheris

The corpus replay in Tests/Python/test_fuzz_corpus.py calls check_one on every committed input.
"""

import atexit
import contextlib
import io
import json
import logging
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))

# coremltools' "Failed to load _MLModelProxy" warnings (no Core ML runtime here), as the importer does.
logging.getLogger("coremltools").setLevel(logging.ERROR)

# The importer's heavy dependencies are imported before it and stay uninstrumented: coverage is
# measured on the importer's own code.
import numpy  # noqa: E402,F401
import onnx  # noqa: E402,F401
import onnx.checker  # noqa: E402,F401
import onnx.shape_inference  # noqa: E402,F401
from coremltools.proto import Model_pb2  # noqa: E402,F401

SCRATCH = os.path.join(tempfile.gettempdir(), f"streamlens-fuzz-{os.getpid()}.mlmodel")
atexit.register(lambda: os.path.exists(SCRATCH) and os.remove(SCRATCH))


class Finding(Exception):
    """A broken promise of the importer that is not an exception of its own making."""


def check_one(data, importer):
    """Runs one input through the importer; raises on a finding, returns the ImportFailure
    message (or None when the model converted)."""
    with open(SCRATCH, "wb") as f:
        f.write(data)
    # The importer writes notes to stderr ("taking it as RGB values 0-255"); not findings.
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            spec, _ = importer.load_spec(SCRATCH)
            model, manifest_input, decoder = importer.convert(spec, SCRATCH)
        except importer.ImportFailure as e:
            if not str(e).strip():
                raise Finding("ImportFailure with an empty message")
            return str(e)
    # What main() writes into the manifest must be loadable by ModelManifest.decode.
    try:
        json.dumps({"input": manifest_input, "decoder": decoder}, allow_nan=False)
    except ValueError as e:
        raise Finding(f"the manifest would not be JSON: {e} ({manifest_input})")
    if not (manifest_input["width"] > 0 and manifest_input["height"] > 0):
        raise Finding(f"converted, but the manifest's input size is {manifest_input['width']}x{manifest_input['height']}")
    lo, hi = manifest_input["value_range"]
    # ModelManifest.validate's rule: finite, lo < hi, and a finite non-zero scale 255 / (hi - lo).
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi and 0 < 255 / (hi - lo) < math.inf):
        raise Finding(f"converted, but the manifest's value_range is [{lo}, {hi}]")
    return None


def main(argv):
    if argv[1:2] == ["--replay"]:
        import coreml_import
        for path in argv[2:]:
            with open(path, "rb") as f:
                message = check_one(f.read(), coreml_import)
            print(f"{path}: {'converted' if message is None else 'refused: ' + message.splitlines()[0]}")
        return 0
    import atheris
    with atheris.instrument_imports(include=["coreml_import"]):
        import coreml_import

    def test_one_input(data):
        check_one(data, coreml_import)

    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
