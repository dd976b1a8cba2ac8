#!/usr/bin/env python3
"""A test fixture for the detector families: an ONNX model whose outputs are constants encoding
exactly the boxes asked for, in the layout of one family, with its StreamLens manifest.

    make_test_detector.py --family yolov8|yolov5|ssd --input WxH --classes N
                          --boxes "CLASS:SCORE:x0,y0,x1,y1;..." --out DIR
                          [--layout channels-first|boxes-first] [--ssd-form detection-output|four-outputs]
                          [--threshold T] [--seed S]
        writes DIR/model.onnx and DIR/model.json (and DIR/coco.txt with --classes 80)

Boxes are corners in pixels of the model input (W x H). Beside each box the outputs hold a
near-duplicate (moved by 1 % of its size, IoU > 0.9, 0.9 x its score) for suppression to
remove, and decoys that must not come out: boxes scoring below the threshold, and per family
what its decoding must ignore (YOLOv5: objectness and class each above the threshold but their
product below it; SSD: rows after DetectionOutput's -1 terminator or beyond the TF count, and
the background class).

No wheel ships a clean COCO YOLO or SSD model, and Ultralytics' export needs torch and
downloaded weights: these constants test the decoders through OpenVINO and real pipelines
without either. The image input [1, 3, H, W] (RGB, 0-1) is consumed by the graph
(output = constant + 0 x ReduceMean(input)) so the model keeps it. Needs numpy and onnx
(tools/setup.sh puts them in .deps/python).
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    sys.stderr.write(f"make_test_detector: {e}; run tools/setup.sh and put .deps/python on PYTHONPATH\n")
    sys.exit(1)

COCO_LABELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Models", "labels", "coco.txt")


def parse_boxes(text, classes, width, height):
    """"0:0.9:60,40,200,220;2:0.8:..." as [(class, score, (x0, y0, x1, y1))]."""
    boxes = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        try:
            cls, score, corners = part.split(":")
            cls, score = int(cls), float(score)
            x0, y0, x1, y1 = (float(v) for v in corners.split(","))
        except ValueError:
            raise SystemExit(f"make_test_detector: box '{part}' is not CLASS:SCORE:x0,y0,x1,y1")
        if not 0 <= cls < classes:
            raise SystemExit(f"make_test_detector: box '{part}': class {cls} is not in 0..{classes - 1}")
        if not 0 < score <= 1:
            raise SystemExit(f"make_test_detector: box '{part}': score {score} is not in (0, 1]")
        if not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
            raise SystemExit(f"make_test_detector: box '{part}' is not inside the {width}x{height} input")
        boxes.append((cls, score, (x0, y0, x1, y1)))
    return boxes


def duplicate(box):
    """The box moved by 1 % of its size: IoU about 0.96 with it."""
    x0, y0, x1, y1 = box
    dx, dy = 0.01 * (x1 - x0), 0.01 * (y1 - y0)
    return (x0 + dx, y0 + dy, x1 + dx, y1 + dy)


def rows(boxes, threshold, classes, width, height, rng):
    """What every family encodes: (class, score, box) of the boxes, their duplicates and the
    decoys below the threshold (random places and classes)."""
    out = []
    for cls, score, box in boxes:
        out.append((cls, score, box))
        out.append((cls, score * 0.9, duplicate(box)))
    for _ in range(12):
        w, h = rng.uniform(10, width / 3), rng.uniform(10, height / 3)
        x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
        out.append((int(rng.integers(classes)), threshold * rng.uniform(0.1, 0.8), (x, y, x + w, y + h)))
    return out


def centre(box):
    x0, y0, x1, y1 = box
    return [(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0]


def grid_boxes(width, height):
    """How many boxes an Ultralytics head at strides 8, 16, 32 gives for this input."""
    return sum(((width + s - 1) // s) * ((height + s - 1) // s) for s in (8, 16, 32))


def yolov8(boxes, threshold, classes, width, height, rng, layout):
    n = max(grid_boxes(width, height), 64)
    values = np.zeros((n, 4 + classes), np.float32)
    encoded = rows(boxes, threshold, classes, width, height, rng)
    # Scattered over the boxes, as a trained model's would be; the other classes score low.
    for j, (cls, score, box) in zip(rng.choice(n, len(encoded), replace=False), encoded):
        values[j, :4] = centre(box)
        values[j, 4:] = rng.uniform(0, 0.05, classes)
        values[j, 4 + cls] = score
    data = values.T[None] if layout == "channels-first" else values[None]
    return {"output0": data}, {"classes": classes}


def yolov5(boxes, threshold, classes, width, height, rng):
    n = max(3 * grid_boxes(width, height), 64)
    values = np.zeros((n, 5 + classes), np.float32)
    encoded = rows(boxes, threshold, classes, width, height, rng)
    # Objectness and class each above the threshold, their product below: must not come out.
    sqrt = (threshold * 0.9) ** 0.5
    encoded.append((0, None, (10, 10, 60, 60)))
    for j, (cls, score, box) in zip(rng.choice(n, len(encoded), replace=False), encoded):
        values[j, :4] = centre(box)
        values[j, 5:] = rng.uniform(0, 0.05, classes)
        if score is None:
            values[j, 4], values[j, 5 + cls] = sqrt, sqrt
        else:
            objectness = 0.95 if score <= 0.95 else score
            values[j, 4], values[j, 5 + cls] = objectness, score / objectness
    return {"output0": values[None]}, {"classes": classes}


def ssd(boxes, threshold, classes, width, height, rng, form):
    n = 100
    encoded = rows(boxes, threshold, classes, width, height, rng)
    norm = lambda b: (b[0] / width, b[1] / height, b[2] / width, b[3] / height)
    # After the list's end: a strong box the decoder must not read.
    garbage = (0, 0.99, (0.0, 0.0, width / 2, height / 2))
    if form == "detection-output":
        # Label 0 is the background here (label_offset 1), as in most DetectionOutput models.
        values = np.zeros((n, 7), np.float32)
        values[:, 0] = 0
        background = (-1, 0.99, (width / 4, height / 4, width / 2, height / 2))
        for i, (cls, score, box) in enumerate(encoded + [background]):
            values[i] = [0, cls + 1, score, *norm(box)]
        end = len(encoded) + 1
        values[end] = [-1, 0, 0, 0, 0, 0, 0]
        values[end + 1] = [0, garbage[0] + 1, garbage[1], *norm(garbage[2])]
        return {"detection_out": values[None, None]}, {"label_offset": 1}
    bx = np.zeros((n, 4), np.float32)
    cl = np.zeros(n, np.float32)
    sc = np.zeros(n, np.float32)
    for i, (cls, score, box) in enumerate(encoded + [garbage]):
        x0, y0, x1, y1 = norm(box)
        bx[i], cl[i], sc[i] = (y0, x0, y1, x1), cls, score
    # The garbage row is the one after the count.
    return {"detection_boxes": bx[None], "detection_classes": cl[None], "detection_scores": sc[None],
            "num_detections": np.array([len(encoded)], np.float32)}, {}


def build_onnx(outputs, width, height):
    """outputs: name -> constant array. Each output = constant + 0 x mean(input)."""
    nodes = [helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
             helper.make_node("Mul", ["mean", "zero"], ["nothing"])]
    initializers = [numpy_helper.from_array(np.array(0, np.float32), "zero")]
    graph_outputs = []
    for name, value in outputs.items():
        initializers.append(numpy_helper.from_array(value.astype(np.float32), f"{name}_value"))
        nodes.append(helper.make_node("Add", [f"{name}_value", "nothing"], [name]))
        graph_outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)))
    graph = helper.make_graph(nodes, "test_detector",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, height, width])],
                              graph_outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                              producer_name="make_test_detector")
    onnx.checker.check_model(model, full_check=True)
    return model


def manifest(args, width, height, parameters, labels):
    return {
        "schema_version": 1,
        "name": f"test-{args.family}",
        "model": "model.onnx",
        "input": {"width": width, "height": height, "color_order": "RGB", "value_range": [0, 1], "layout": "NCHW",
                  "name": "images"},
        "crop": "letterbox",
        "decoder": {"name": args.family, "parameters": {**parameters, "min_score": args.threshold}},
        **labels,
        "licence": "CC0-1.0 (constant outputs made by tools/make_test_detector.py)",
        "provenance": "generated by tools/make_test_detector.py " + " ".join(sys.argv[1:]),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--family", required=True, choices=["yolov8", "yolov5", "ssd"])
    p.add_argument("--input", required=True, help="WxH of the model input")
    p.add_argument("--classes", required=True, type=int)
    p.add_argument("--boxes", required=True, help='"CLASS:SCORE:x0,y0,x1,y1;..." in input pixels')
    p.add_argument("--out", required=True)
    p.add_argument("--layout", default="channels-first", choices=["channels-first", "boxes-first"],
                   help="yolov8: [1, 4+nc, N] (Ultralytics') or [1, N, 4+nc]")
    p.add_argument("--ssd-form", default="detection-output", choices=["detection-output", "four-outputs"])
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    try:
        width, height = (int(v) for v in args.input.lower().split("x"))
    except ValueError:
        raise SystemExit(f"make_test_detector: --input {args.input} is not WxH")
    if args.classes < 1:
        raise SystemExit("make_test_detector: --classes must be at least 1")
    boxes = parse_boxes(args.boxes, args.classes, width, height)
    if any(score < args.threshold for _, score, _ in boxes):
        raise SystemExit(f"make_test_detector: every box must score at least the threshold {args.threshold}")
    rng = np.random.default_rng(args.seed)
    if args.family == "yolov8":
        outputs, parameters = yolov8(boxes, args.threshold, args.classes, width, height, rng, args.layout)
    elif args.family == "yolov5":
        outputs, parameters = yolov5(boxes, args.threshold, args.classes, width, height, rng)
    else:
        outputs, parameters = ssd(boxes, args.threshold, args.classes, width, height, rng, args.ssd_form)
    os.makedirs(args.out, exist_ok=True)
    if args.classes == 80:
        shutil.copyfile(COCO_LABELS, os.path.join(args.out, "coco.txt"))
        labels = {"labels_file": "coco.txt"}
    else:
        labels = {"labels": [f"class{i}" for i in range(args.classes)]}
    onnx.save(build_onnx(outputs, width, height), os.path.join(args.out, "model.onnx"))
    with open(os.path.join(args.out, "model.json"), "w") as f:
        json.dump(manifest(args, width, height, parameters, labels), f, indent=2)
        f.write("\n")
    print(f"{args.out}/model.onnx: {args.family}, {len(boxes)} boxes, outputs " +
          ", ".join(f"{k} {list(v.shape)}" for k, v in outputs.items()))


if __name__ == "__main__":
    main()
