import Foundation
import Testing
@testable import StreamLensCore

/// The yolov8-seg family on hand-made tensors. Mostly a 64×64 input under 16×16 prototypes (a
/// prototype pixel is 4 input pixels), boxes on prototype pixels' edges, so that a mask's pixel
/// (i, j) is the prototype pixel at the box's corner + (i, j).
private let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// One box: corners in input pixels, a class, its score and its mask coefficients.
private struct Planted {
    var box: (Double, Double, Double, Double)
    var cls: Int
    var score: Float
    var coefficients: [Float]
}

/// A yolov8-seg `output0` of `n` boxes × (4 + nc + nm), laid out as asked; planted box k in slot
/// `slots[k]` (default 7k + 3 mod n).
private func segTensor(_ planted: [Planted], nc: Int, nm: Int, n: Int, channelsFirst: Bool, slots: [Int]? = nil) -> [Float] {
    var rows = [[Float]](repeating: [Float](repeating: 0, count: 4 + nc + nm), count: n)
    for (k, p) in planted.enumerated() {
        let (x0, y0, x1, y1) = p.box
        let slot = slots?[k] ?? (k * 7 + 3) % n
        rows[slot][0...3] = [Float((x0 + x1) / 2), Float((y0 + y1) / 2), Float(x1 - x0), Float(y1 - y0)]
        rows[slot][4 + p.cls] = p.score
        for (j, c) in p.coefficients.enumerated() { rows[slot][4 + nc + j] = c }
    }
    return channelsFirst ? (0..<(4 + nc + nm)).flatMap { k in rows.map { $0[k] } } : rows.flatMap { $0 }
}

/// Prototypes [nm, size, size]: channel k is +1 on prototype pixels x0..<x1, y0..<y1 of
/// `rects[k]` and -1 elsewhere (channels beyond the rectangles: -1 everywhere).
private func prototypes(_ rects: [(Int, Int, Int, Int)], nm: Int, size: Int) -> [Float] {
    (0..<nm).flatMap { k in
        (0..<(size * size)).map { p -> Float in
            guard k < rects.count else { return -1 }
            let (x0, y0, x1, y1) = rects[k], x = p % size, y = p / size
            return x >= x0 && x < x1 && y >= y0 && y < y1 ? 1 : -1
        }
    }
}

/// Coefficients selecting channel `k` of `nm`: its ±1 becomes a logit of ±6 (coverage 254 or 1).
private func select(_ k: Int, of nm: Int, weight: Float = 6) -> [Float] {
    (0..<nm).map { $0 == k ? weight : 0 }
}

/// The pixels of `mask` that are the object (coverage ≥ 0.5) are exactly those `inside` says.
private func expectMask(_ mask: ObjectMask?, width: Int, height: Int, inside: (Int, Int) -> Bool,
                        sourceLocation: SourceLocation = #_sourceLocation) throws {
    let mask = try #require(mask, sourceLocation: sourceLocation)
    #expect(mask.width == width && mask.height == height, "\(mask.width)×\(mask.height)", sourceLocation: sourceLocation)
    guard mask.width == width, mask.height == height else { return }
    let wrong = (0..<height).flatMap { j in (0..<width).filter { i in mask.contains(i, j) != inside(i, j) }.map { "(\($0), \(j))" } }
    #expect(wrong.isEmpty, "pixels wrong: \(wrong)", sourceLocation: sourceLocation)
}

@Suite struct YOLOv8SegDecoderTests {
    static func decoder(_ options: YOLOv8SegDecoderOptions, labels: [String] = ["a", "b"], size: Int = 64,
                        shapes: [[Int]]) throws -> any DetectionDecoder {
        var d = try options.makeDecoder(input: input(size, size), classes: DetectionClasses(labels: labels))
        #expect(try d.bind(shapes.enumerated().map { ModelOutput(name: "output\($0.offset)", shape: $0.element) }) == [0, 1])
        return d
    }

    @Test func eachBoxsCoefficientsSelectItsPrototypeInsideItsBox() throws {
        // Box a: prototype pixels (2, 4)…(10, 12), an 8×8 mask; channel 1's rectangle (4, 6)…(7, 14)
        // runs out of its bottom. Box b: (11, 1)…(15, 5); channel 2's rectangle covers its first two columns.
        let planted = [Planted(box: (8, 16, 40, 48), cls: 0, score: 0.9, coefficients: select(1, of: 4)),
                       Planted(box: (44, 4, 60, 20), cls: 1, score: 0.8, coefficients: select(2, of: 4))]
        let protos = prototypes([(0, 0, 16, 16), (4, 6, 7, 14), (0, 0, 13, 16)], nm: 4, size: 16)
        let d = try Self.decoder(YOLOv8SegDecoderOptions(numMasks: 4, minScore: 0.5), shapes: [[1, 10, 50], [1, 4, 16, 16]])
        let found = decode(d, [segTensor(planted, nc: 2, nm: 4, n: 50, channelsFirst: true), protos])
        try #require(found.count == 2)
        #expect(found.map(\.label) == ["a", "b"] && abs(found[0].score - 0.9) < 1e-6)
        #expect(near(found[0].box, Box(xMin: 8 / 64.0, yMin: 16 / 64.0, xMax: 40 / 64.0, yMax: 48 / 64.0)))
        // Columns 2…4 and rows 2…7 of a's mask are channel 1's rectangle; its rows 12, 13 are outside the box.
        try expectMask(found[0].mask, width: 8, height: 8) { i, j in (2..<5).contains(i) && (2..<8).contains(j) }
        try expectMask(found[1].mask, width: 4, height: 4) { i, _ in i < 2 }
        #expect(found[0].mask!.values.allSatisfy { $0 == 254 || $0 == 1 })   // sigmoid(±6) × 255, rounded
    }

    @Test func theSuppressedPairKeepsTheBestBoxsMask() throws {
        // Two boxes of one class, the better one later in box order; channel 0 is a's, channel 1 b's.
        let planted = [Planted(box: (8, 8, 40, 40), cls: 0, score: 0.8, coefficients: select(0, of: 2)),
                       Planted(box: (8, 8, 44, 40), cls: 0, score: 0.9, coefficients: select(1, of: 2))]
        let protos = prototypes([(2, 2, 4, 10), (5, 2, 11, 4)], nm: 2, size: 16)
        let t = segTensor(planted, nc: 1, nm: 2, n: 20, channelsFirst: true, slots: [2, 9])
        let found = decode(try Self.decoder(YOLOv8SegDecoderOptions(numMasks: 2), labels: ["a"], shapes: [[1, 7, 20], [1, 2, 16, 16]]), [t, protos])
        try #require(found.count == 1)
        #expect(abs(found[0].score - 0.9) < 1e-6 && near(found[0].box, Box(xMin: 8 / 64.0, yMin: 8 / 64.0, xMax: 44 / 64.0, yMax: 40 / 64.0)))
        // Prototype pixels (2, 2)…(11, 10): channel 1's rectangle is columns 3…8, rows 0 and 1.
        try expectMask(found[0].mask, width: 9, height: 8) { i, j in (3..<9).contains(i) && j < 2 }
        // Weighted: the group's mean box, the best one's coefficients over it.
        let allOrNothing = prototypes([(0, 0, 0, 0), (0, 0, 16, 16)], nm: 2, size: 16)
        let weighted = YOLOv8SegDecoderOptions(numMasks: 2, suppression: SuppressionOptions(method: .weighted, iouThreshold: 0.5))
        let merged = decode(try Self.decoder(weighted, labels: ["a"], shapes: [[1, 7, 20], [1, 2, 16, 16]]), [t, allOrNothing])
        try #require(merged.count == 1)
        let xMax = (40 * 0.8 + 44 * 0.9) / 1.7 / 64
        #expect(near(merged[0].box, Box(xMin: 8 / 64.0, yMin: 8 / 64.0, xMax: xMax, yMax: 40 / 64.0), 1e-6))
        let mask = try #require(merged[0].mask)
        #expect(mask.width == 9 && mask.height == 8 && mask.values.allSatisfy { $0 == 254 })
        // None: both, each with its own.
        let none = YOLOv8SegDecoderOptions(numMasks: 2, suppression: SuppressionOptions(method: .none))
        let both = decode(try Self.decoder(none, labels: ["a"], shapes: [[1, 7, 20], [1, 2, 16, 16]]), [t, allOrNothing])
        #expect(both.map { $0.mask?.values.first } == [254, 1])
    }

    @Test func boxesFirstLayoutGivesTheSameMasks() throws {
        let planted = [Planted(box: (8, 16, 40, 48), cls: 1, score: 0.9, coefficients: select(1, of: 3)),
                       Planted(box: (40, 40, 64, 64), cls: 0, score: 0.7, coefficients: select(0, of: 3))]
        let protos = prototypes([(12, 12, 14, 14), (4, 6, 7, 14)], nm: 3, size: 16)
        let options = YOLOv8SegDecoderOptions(numMasks: 3)
        let channelsFirst = decode(try Self.decoder(options, shapes: [[1, 9, 30], [1, 3, 16, 16]]),
                                   [segTensor(planted, nc: 2, nm: 3, n: 30, channelsFirst: true), protos])
        let boxesFirst = decode(try Self.decoder(options, shapes: [[1, 30, 9], [1, 3, 16, 16]]),
                                [segTensor(planted, nc: 2, nm: 3, n: 30, channelsFirst: false), protos])
        #expect(boxesFirst.count == 2 && boxesFirst == channelsFirst)
        try expectMask(boxesFirst[0].mask, width: 8, height: 8) { i, j in (2..<5).contains(i) && (2..<8).contains(j) }
        try expectMask(boxesFirst[1].mask, width: 6, height: 6) { i, j in (2..<4).contains(i) && (2..<4).contains(j) }
    }

    @Test func ultralyticsShapes() throws {
        // yolov8n-seg at 640: [1, 116, 8400] and [1, 32, 160, 160]; a person at (100, 60)…(300, 420).
        let coco = try ModelManifest.readLabels(packageRoot.appendingPathComponent("Models/labels/coco.txt").path)
        let t = segTensor([Planted(box: (100, 60, 300, 420), cls: 0, score: 0.85, coefficients: select(31, of: 32))],
                          nc: 80, nm: 32, n: 8400, channelsFirst: true)
        var rects = [(Int, Int, Int, Int)](repeating: (0, 0, 0, 0), count: 32)
        rects[31] = (50, 40, 60, 200)
        let found = decode(try Self.decoder(YOLOv8SegDecoderOptions(), labels: coco, size: 640, shapes: [[1, 116, 8400], [1, 32, 160, 160]]),
                           [t, prototypes(rects, nm: 32, size: 160)])
        try #require(found.count == 1 && found[0].label == "person")
        // Prototype pixels (25, 15)…(75, 105): the rectangle is columns 25…34, rows 25…89.
        try expectMask(found[0].mask, width: 50, height: 90) { i, j in (25..<35).contains(i) && j >= 25 }
    }

    @Test func garbageIsNoCrash() throws {
        let options = YOLOv8SegDecoderOptions(numMasks: 2)
        let shapes = [[1, 7, 8], [1, 2, 16, 16]]
        let protos = prototypes([(0, 0, 8, 16), (0, 0, 16, 16)], nm: 2, size: 16)
        // Coefficients that are not numbers: a mask of no object. An infinite one: the prototype's sign.
        let planted = [Planted(box: (0, 0, 32, 32), cls: 0, score: 0.9, coefficients: [.nan, 1]),
                       Planted(box: (32, 32, 64, 64), cls: 0, score: 0.8, coefficients: [.infinity, 0]),
                       Planted(box: (0, 32, 16, 48), cls: 0, score: 0.7, coefficients: [-.infinity, .infinity])]
        let found = decode(try Self.decoder(options, labels: ["a"], shapes: shapes), [segTensor(planted, nc: 1, nm: 2, n: 8, channelsFirst: true), protos])
        try #require(found.count == 3)
        try expectMask(found[0].mask, width: 8, height: 8) { _, _ in false }
        try expectMask(found[1].mask, width: 8, height: 8) { _, _ in false }   // columns 8…15: channel 0 is -1
        #expect(found[1].mask!.values.allSatisfy { $0 == 0 })
        try expectMask(found[2].mask, width: 4, height: 4) { _, _ in false }   // -∞ + ∞
        // A box that is not a number is no box; one far larger than the input has a mask no larger than the prototypes.
        var t = segTensor([Planted(box: (0, 0, 32, 32), cls: 0, score: 0.9, coefficients: [1, 1]),
                           Planted(box: (0, 0, 10, 10), cls: 0, score: 0.8, coefficients: [1, 1])], nc: 1, nm: 2, n: 8, channelsFirst: false)
        t[3 * 7] = .nan       // the first box's centre (slot 3)
        t[2 * 7 + 2] = 1e30   // the second box's width (slot 2)
        let huge = decode(try Self.decoder(options, labels: ["a"], shapes: [[1, 8, 7], [1, 2, 16, 16]]), [t, protos])
        try #require(huge.count == 1)
        #expect(huge[0].mask!.width == 16 && huge[0].mask!.height == 3)
        // Anything anywhere, every family's garbage pattern: finite boxes, masks no larger than the prototypes.
        let d = try Self.decoder(YOLOv8SegDecoderOptions(numMasks: 2, minScore: 0), labels: ["a"], shapes: shapes)
        for offset in 0..<GarbageOutputTests.pattern.count {
            let found = decode(d, [GarbageOutputTests.garbage(7 * 8, offset: offset), GarbageOutputTests.garbage(2 * 16 * 16, offset: offset + 5)])
            #expect(GarbageOutputTests.finite(found))
            #expect(found.allSatisfy { $0.mask.map { $0.width <= 16 && $0.height <= 16 } ?? false })
        }
        // Short buffers decode what they hold: prototypes too short, no masks.
        #expect(decode(d, [GarbageOutputTests.garbage(3), protos]).isEmpty)
        #expect(decode(d, [segTensor(planted, nc: 1, nm: 2, n: 8, channelsFirst: true), [1, 2, 3]]).allSatisfy { $0.mask == nil })
    }

    @Test func bindSaysWhatDoesNotFit() throws {
        let coco = try ModelManifest.readLabels(packageRoot.appendingPathComponent("Models/labels/coco.txt").path)
        func bind(_ options: YOLOv8SegDecoderOptions, _ outputs: [(String, [Int])]) throws -> [Int] {
            var d = try options.makeDecoder(input: input(640, 640), classes: DetectionClasses(labels: coco))
            return try d.bind(outputs.map { ModelOutput(name: $0.0, shape: $0.1) })
        }
        let boxes = ("output0", [1, 116, 8400]), protos = ("output1", [1, 32, 160, 160])
        #expect(try bind(YOLOv8SegDecoderOptions(), [protos, boxes]) == [1, 0])
        #expect(try bind(YOLOv8SegDecoderOptions(output: "1", protosOutput: "p"), [boxes, ("output1", [1, 8400, 116]), ("p", [1, 32, 80, 80])]) == [1, 2])
        #expect(throws: StageError("yolov8-seg: output 'output1' has shape [1, 32, 25600], not mask prototypes [1, 32, H, W]")) {
            try bind(YOLOv8SegDecoderOptions(protosOutput: "output1"), [boxes, ("output1", [1, 32, 25600])])
        }
        #expect(throws: StageError("yolov8-seg: no output of the model ('output0' [1, 116, 8400], 'output1' [1, 32, 25600]) is mask prototypes [1, 32, H, W]")) {
            try bind(YOLOv8SegDecoderOptions(), [boxes, ("output1", [1, 32, 25600])])
        }
        #expect(throws: StageError("yolov8-seg: the model has no output 'protos' (its outputs: 'output0' [1, 116, 8400], 'output1' [1, 32, 160, 160])")) {
            try bind(YOLOv8SegDecoderOptions(protosOutput: "protos"), [boxes, protos])
        }
        #expect(throws: StageError("yolov8-seg: output 'output1' [1, 32, 160, 160] holds 32 mask prototypes but num_masks is 16")) {
            try bind(YOLOv8SegDecoderOptions(numMasks: 16), [("output0", [1, 100, 8400]), protos])
        }
        #expect(throws: StageError("yolov8-seg: output 'output1' has shape [2, 32, 160, 160], not mask prototypes [1, 32, H, W]")) {
            try bind(YOLOv8SegDecoderOptions(), [boxes, ("output1", [2, 32, 160, 160])])
        }
        #expect(throws: StageError("yolov8-seg: output 'output1' [1, 32, 5000, 160] has prototypes larger than 4096 pixels a side")) {
            try bind(YOLOv8SegDecoderOptions(), [boxes, ("output1", [1, 32, 5000, 160])])
        }
        // A detection-only yolov8 output: no room for the coefficients.
        #expect(throws: StageError("yolov8-seg: no output of the model ('output0' [1, 84, 8400], 'output1' [1, 32, 160, 160]) is [1, 116, N] or [1, N, 116] (4 box values, 80 class scores and 32 mask coefficients per box)")) {
            try bind(YOLOv8SegDecoderOptions(), [("output0", [1, 84, 8400]), protos])
        }
        #expect(throws: StageError("decoder.parameters.num_masks is 0; yolov8-seg reads 1…1024 mask coefficients a box (Ultralytics' models: 32)")) {
            try YOLOv8SegDecoderOptions(numMasks: 0).makeDecoder(input: input(640, 640), classes: DetectionClasses(labels: coco))
        }
        #expect(throws: StageError("yolov8-seg needs the class count: give labels, labels_file or decoder.parameters.classes")) {
            try YOLOv8SegDecoderOptions().makeDecoder(input: input(640, 640), classes: DetectionClasses())
        }
        #expect(throws: StageError("decoder.parameters.min_score 2.0 is outside 0…1")) {
            try YOLOv8SegDecoderOptions(minScore: 2).makeDecoder(input: input(640, 640), classes: DetectionClasses(labels: coco))
        }
    }

    @Test func aManifestNamesTheFamily() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("yolov8-seg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("labels"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.copyItem(at: packageRoot.appendingPathComponent("Models/labels/coco.txt"), to: dir.appendingPathComponent("labels/coco.txt"))
        func manifest(_ parameters: String) throws -> String {
            let path = dir.appendingPathComponent("m.json").path
            try #"""
            {"schema_version": 1, "name": "yolov8n-seg-coco", "model": "yolov8n-seg.onnx",
             "input": {"width": 640, "height": 640, "color_order": "RGB", "value_range": [0, 1], "layout": "NCHW"}, "crop": "letterbox",
             "decoder": {"name": "yolov8-seg", "parameters": \#(parameters)}, "labels_file": "labels/coco.txt", "licence": "AGPL-3.0"}
            """#.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let m = try ModelManifest.load(path: try manifest(
            #"{"output": "output0", "protos_output": "output1", "num_masks": 32, "min_score": 0.3, "suppression": {"iou_threshold": 0.6}}"#))
        #expect(m.decoder.name == "yolov8-seg" && DecoderRegistry.names.contains("yolov8-seg"))
        let options = try #require(m.decoder.detector as? YOLOv8SegDecoderOptions)
        #expect(options == YOLOv8SegDecoderOptions(output: "output0", protosOutput: "output1", numMasks: 32, minScore: 0.3,
                                                   suppression: SuppressionOptions(method: .nms, iouThreshold: 0.6)))
        var d = try #require(try m.makeDecoder() as? YOLOv8SegDecoder)
        #expect(try d.bind([ModelOutput(name: "output0", shape: [1, 116, 8400]), ModelOutput(name: "output1", shape: [1, 32, 160, 160])]) == [0, 1])
        // Left out: yolov8's defaults, 32 masks; written back, read the same.
        let defaults = try #require(try ModelManifest.load(path: try manifest("{}")).decoder.detector as? YOLOv8SegDecoderOptions)
        #expect(defaults == YOLOv8SegDecoderOptions() && defaults.numMasks == 32 && defaults.minScore == 0.25)
        #expect(defaults.suppression == YOLOv8Decoder.defaultSuppression)
        #expect(try JSONDecoder().decode(YOLOv8SegDecoderOptions.self, from: JSONEncoder().encode(options)) == options)
        let bad = try manifest(#"{"num_masks": -1}"#)
        #expect(throws: StageError("model manifest \(bad): decoder.parameters.num_masks is -1; yolov8-seg reads 1…1024 mask coefficients a box (Ultralytics' models: 32)")) {
            try ModelManifest.load(path: bad)
        }
    }
}
