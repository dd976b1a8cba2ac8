import Foundation
import Testing
@testable import StreamLensCore

/// The yolov8, yolov5 and ssd families on hand-made tensors, and what every family shares:
/// per-class suppression, per-class thresholds, the classes filter, labels files.
private let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
private let coco = try! ModelManifest.readLabels(packageRoot.appendingPathComponent("Models/labels/coco.txt").path)

/// One YOLO box: corners in input pixels, a class and its score.
private struct Planted { var box: (Double, Double, Double, Double); var cls: Int; var score: Float }

/// A YOLOv8 output of `n` boxes × (4 + nc), laid out as asked, the planted boxes at `slots`.
private func yolov8Tensor(_ planted: [Planted], nc: Int, n: Int, channelsFirst: Bool) -> [Float] {
    var rows = [[Float]](repeating: [Float](repeating: 0, count: 4 + nc), count: n)
    for (k, p) in planted.enumerated() {
        let (x0, y0, x1, y1) = p.box
        let slot = (k * 7 + 3) % n
        rows[slot][0...3] = [Float((x0 + x1) / 2), Float((y0 + y1) / 2), Float(x1 - x0), Float(y1 - y0)]
        rows[slot][4 + p.cls] = p.score
    }
    return channelsFirst ? (0..<(4 + nc)).flatMap { k in rows.map { $0[k] } } : rows.flatMap { $0 }
}

@Suite struct YOLOv8Tests {
    static func decoder(labels: [String], classes: Int? = nil, width: Int = 320, height: Int = 320, thresholds: [String: Double] = [:],
                        keeping: [String]? = nil, shape: [Int]) throws -> any DetectionDecoder {
        var d = try YOLOv8DecoderOptions(classes: classes, minScore: 0.5)
            .makeDecoder(input: input(width, height), classes: DetectionClasses(labels: labels, classThresholds: thresholds, keeping: keeping))
        #expect(try d.bind([ModelOutput(name: "output0", shape: shape)]) == [0])
        return d
    }

    @Test func oneClassChannelsFirst() throws {
        let t = yolov8Tensor([Planted(box: (60, 40, 200, 220), cls: 0, score: 0.9), Planted(box: (10, 10, 20, 20), cls: 0, score: 0.3)],
                             nc: 1, n: 2100, channelsFirst: true)
        let found = decode(try Self.decoder(labels: ["face"], shape: [1, 5, 2100]), [t])
        try #require(found.count == 1)
        #expect(near(found[0].box, Box(xMin: 60 / 320.0, yMin: 40 / 320.0, xMax: 200 / 320.0, yMax: 220 / 320.0)))
        #expect(found[0].label == "face" && found[0].labelId == 0 && abs(found[0].score - 0.9) < 1e-6)
    }

    @Test func eightyClassesBoxesFirstOnAWideInput() throws {
        let planted = [Planted(box: (100, 50, 300, 250), cls: 0, score: 0.8), Planted(box: (400, 100, 600, 400), cls: 79, score: 0.7),
                       Planted(box: (110, 60, 310, 260), cls: 2, score: 0.6)]   // overlaps the person: another class, kept
        let t = yolov8Tensor(planted, nc: 80, n: 300, channelsFirst: false)
        let found = decode(try Self.decoder(labels: coco, width: 640, height: 480, shape: [1, 300, 84]), [t])
        #expect(found.map(\.label) == ["person", "toothbrush", "car"])
        #expect(found.map(\.labelId) == [0, 79, 2])
        #expect(near(found[1].box, Box(xMin: 400 / 640.0, yMin: 100 / 480.0, xMax: 600 / 640.0, yMax: 400 / 480.0)))
    }

    @Test func layoutFromTheShapeAndTheClassCount() throws {
        let d = try YOLOv8Decoder(options: YOLOv8DecoderOptions(), input: input(640, 640), classes: DetectionClasses(labels: coco))
        #expect(d.layout([1, 84, 8400])! == (true, 8400))
        #expect(d.layout([1, 8400, 84])! == (false, 8400))
        #expect(d.layout([84, 8400])! == (true, 8400))
        #expect(d.layout([1, 84, 84])! == (true, 84))   // ambiguous: Ultralytics' layout
        #expect(d.layout([1, 85, 8400]) == nil)
    }

    @Test func aShapeForAnotherClassCountIsRefused() throws {
        var d = try YOLOv8DecoderOptions().makeDecoder(input: input(320, 320), classes: DetectionClasses(labels: coco))
        #expect(throws: StageError("yolov8: no output of the model ('output0' [1, 7, 2100]) is [1, 84, N] or [1, N, 84] (4 box values and 80 class scores per box)")) {
            try d.bind([ModelOutput(name: "output0", shape: [1, 7, 2100])])
        }
        #expect(throws: StageError("decoder.parameters.classes is 3 but the manifest has 80 labels")) {
            try YOLOv8DecoderOptions(classes: 3).makeDecoder(input: input(320, 320), classes: DetectionClasses(labels: coco))
        }
        #expect(throws: StageError("yolov8 needs the class count: give labels, labels_file or decoder.parameters.classes")) {
            try YOLOv8DecoderOptions().makeDecoder(input: input(320, 320), classes: DetectionClasses())
        }
        // A class count without labels: the ids come unnamed.
        let unnamed = yolov8Tensor([Planted(box: (0, 0, 32, 32), cls: 2, score: 0.9)], nc: 3, n: 10, channelsFirst: true)
        let found = decode(try Self.decoder(labels: [], classes: 3, shape: [1, 7, 10]), [unnamed])
        #expect(found.map(\.labelId) == [2] && found[0].label == nil)
    }

    @Test func normalizedCoordinates() throws {
        var d = try YOLOv8DecoderOptions(coordinates: .normalized, minScore: 0.5)
            .makeDecoder(input: input(640, 480), classes: DetectionClasses(labels: ["a"]))
        _ = try d.bind([ModelOutput(name: "y", shape: [1, 5, 2])])
        let found = decode(d, [[0.5, 0, 0.5, 0, 0.2, 0, 0.4, 0, 0.9, 0]])
        #expect(found.count == 1 && near(found[0].box, Box(xMin: 0.4, yMin: 0.3, xMax: 0.6, yMax: 0.7)))
    }
}

@Suite struct YOLOv5Tests {
    /// Rows of cx, cy, w, h, objectness, class scores.
    static func row(_ box: (Float, Float, Float, Float), objectness: Float, classes: [Float]) -> [Float] {
        let (x0, y0, x1, y1) = box
        return [(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0, objectness] + classes
    }

    @Test func scoreIsObjectnessTimesClass() throws {
        var d = try YOLOv5DecoderOptions(minScore: 0.5).makeDecoder(input: input(320, 320), classes: DetectionClasses(labels: ["a", "b"]))
        #expect(try d.bind([ModelOutput(name: "other", shape: [1, 3]), ModelOutput(name: "output0", shape: [1, 3, 7])]) == [1])
        let t = Self.row((60, 40, 200, 220), objectness: 0.9, classes: [0.1, 0.9])     // 0.81: kept, class b
            + Self.row((10, 10, 50, 50), objectness: 0.6, classes: [0.7, 0.1])         // 0.42: each above 0.5, product below
            + Self.row((100, 100, 150, 150), objectness: 0.3, classes: [1, 0])         // objectness alone below
        let found = decode(d, [t])
        try #require(found.count == 1)
        #expect(found[0].label == "b" && found[0].labelId == 1 && abs(found[0].score - 0.81) < 1e-6)
        #expect(near(found[0].box, Box(xMin: 60 / 320.0, yMin: 40 / 320.0, xMax: 200 / 320.0, yMax: 220 / 320.0)))
    }

    @Test func aYOLOv8ShapeIsNotAYOLOv5One() throws {
        var d = try YOLOv5DecoderOptions().makeDecoder(input: input(320, 320), classes: DetectionClasses(labels: ["a", "b", "c"]))
        #expect(throws: StageError("yolov5: no output of the model ('output0' [1, 7, 2100]) is [1, N, 8] (4 box values, objectness and 3 class scores per box)")) {
            try d.bind([ModelOutput(name: "output0", shape: [1, 7, 2100])])
        }
        var named = try YOLOv5DecoderOptions(output: "output0").makeDecoder(input: input(320, 320), classes: DetectionClasses(labels: ["a", "b", "c"]))
        #expect(throws: StageError("yolov5: output 'output0' has shape [1, 7, 2100], not [1, N, 8] (4 box values, objectness and 3 class scores per box)")) {
            try named.bind([ModelOutput(name: "output0", shape: [1, 7, 2100])])
        }
    }
}

@Suite struct SSDTests {
    static let labels = ["person", "bicycle", "car"]

    @Test func detectionOutputEndsAtMinusOne() throws {
        var d = try SSDDecoderOptions(labelOffset: 1).makeDecoder(input: input(300, 300), classes: DetectionClasses(labels: Self.labels))
        #expect(try d.bind([ModelOutput(name: "detection_out", shape: [1, 1, 5, 7])]) == [0])
        let rows: [[Float]] = [
            [0, 1, 0.9, 0.1, 0.2, 0.5, 0.6],    // person
            [0, 3, 0.7, 0.4, 0.4, 0.8, 0.9],    // car
            [0, 0, 0.99, 0, 0, 1, 1],           // the background: dropped
            [-1, 0, 0, 0, 0, 0, 0],             // the end
            [0, 2, 0.99, 0, 0, 0.5, 0.5],       // after the end: never read
        ]
        let found = decode(d, [rows.flatMap { $0 }])
        #expect(found.map(\.label) == ["person", "car"])
        #expect(near(found[0].box, Box(xMin: 0.1, yMin: 0.2, xMax: 0.5, yMax: 0.6)))
    }

    @Test func fourOutputsByShapeAndName() throws {
        var d = try SSDDecoderOptions().makeDecoder(input: input(320, 320), classes: DetectionClasses(labels: Self.labels))
        // TFLite's order and names: boxes, classes, scores, count.
        let outputs = [ModelOutput(name: "num_detections", shape: [1]), ModelOutput(name: "detection_scores", shape: [1, 3]),
                       ModelOutput(name: "detection_boxes", shape: [1, 3, 4]), ModelOutput(name: "detection_classes", shape: [1, 3])]
        #expect(try d.bind(outputs) == [2, 3, 1, 0])
        let boxes: [Float] = [0.2, 0.1, 0.6, 0.5, /* */ 0.3, 0.3, 0.4, 0.4, /* */ 0, 0, 1, 1]
        let found = decode(d, [boxes, [2, 1, 0], [0.8, 0.3, 0.99], [2]])   // the third row is beyond the count
        try #require(found.count == 1)
        #expect(found[0].label == "car" && near(found[0].box, Box(xMin: 0.1, yMin: 0.2, xMax: 0.5, yMax: 0.6)))
        // Unnamed outputs: classes come before scores, as TFLite gives them.
        var byOrder = try SSDDecoderOptions().makeDecoder(input: input(320, 320), classes: DetectionClasses(labels: Self.labels))
        #expect(try byOrder.bind([ModelOutput(name: "a", shape: [1, 3, 4]), ModelOutput(name: "b", shape: [1, 3]),
                                  ModelOutput(name: "c", shape: [1, 3]), ModelOutput(name: "d", shape: [1])]) == [0, 1, 2, 3])
        // Manifest names win.
        var named = try SSDDecoderOptions(classesOutput: "c", scoresOutput: "b").makeDecoder(input: input(320, 320), classes: DetectionClasses(labels: Self.labels))
        #expect(try named.bind([ModelOutput(name: "a", shape: [1, 3, 4]), ModelOutput(name: "b", shape: [1, 3]),
                                ModelOutput(name: "c", shape: [1, 3]), ModelOutput(name: "d", shape: [1])]) == [0, 2, 1, 3])
    }

    @Test func nanAndHugeLabelsAreNoClass() throws {
        var d = try SSDDecoderOptions().makeDecoder(input: input(300, 300), classes: DetectionClasses(labels: Self.labels))
        _ = try d.bind([ModelOutput(name: "out", shape: [1, 1, 3, 7])])
        let rows: [Float] = [0, .nan, 0.9, 0, 0, 1, 1, 0, 1e30, 0.9, 0, 0, 1, 1, 0, 1, .nan, 0, 0, 1, 1]
        #expect(decode(d, [rows]).isEmpty)
    }
}

@Suite struct ClassTests {
    static let a = Detection(box: Box(xMin: 0, yMin: 0, xMax: 1, yMax: 1), score: 0.9, label: "a", labelId: 0)
    static let aDuplicate = Detection(box: Box(xMin: 0.01, yMin: 0.01, xMax: 1.01, yMax: 1.01), score: 0.8, label: "a", labelId: 0)
    static let b = Detection(box: Box(xMin: 0.05, yMin: 0.05, xMax: 1.05, yMax: 1.05), score: 0.7, label: "b", labelId: 1)

    @Test func suppressionIsPerClassUnlessClassAgnostic() {
        for method in [SuppressionOptions.Method.nms, .weighted] {
            let perClass = suppress([Self.b, Self.aDuplicate, Self.a], SuppressionOptions(method: method, iouThreshold: 0.5))
            #expect(perClass.map(\.labelId) == [0, 1], "\(method)")
            let agnostic = suppress([Self.b, Self.aDuplicate, Self.a], SuppressionOptions(method: method, iouThreshold: 0.5, classAgnostic: true))
            #expect(agnostic.map(\.labelId) == [0], "\(method)")
        }
        #expect(suppress([Self.b, Self.a], SuppressionOptions(method: .nms, iouThreshold: 0.5)) == [Self.a, Self.b])
    }

    @Test func suppressionKeysMayBeLeftOut() throws {
        let json = #"{"min_score": 0.4, "suppression": {"iou_threshold": 0.6, "class_agnostic": true}}"#
        let o = try JSONDecoder().decode(YOLOv8DecoderOptions.self, from: Data(json.utf8))
        #expect(o.suppression == SuppressionOptions(method: .nms, iouThreshold: 0.6, classAgnostic: true))
        #expect(try JSONDecoder().decode(YOLOv5DecoderOptions.self, from: Data("{}".utf8)).suppression == SuppressionOptions(method: .nms, iouThreshold: 0.45))
    }

    @Test func perClassThresholds() throws {
        let classes = try DetectionClasses(labels: ["a", "b", "c"], classThresholds: ["b": 0.9, "c": 0.2])
        let t = classes.scoreThresholds(minScore: 0.5)
        #expect(t.admits(0, 0.5) && !t.admits(0, 0.49))
        #expect(!t.admits(1, 0.8) && t.admits(1, 0.9))
        #expect(t.admits(2, 0.2) && t.lowest == 0.2)
        #expect(t.admits(7, 0.5))   // beyond the labels: min_score
        #expect(!t.admits(0, .nan) && !t.admits(0, .infinity))
        #expect(throws: StageError("class_thresholds: 'd' is not a label of this model; its labels: a, b, c")) {
            try DetectionClasses(labels: ["a", "b", "c"], classThresholds: ["d": 0.3])
        }
        #expect(throws: StageError("class_thresholds: b's 1.5 is outside 0…1")) { try DetectionClasses(labels: ["a", "b"], classThresholds: ["b": 1.5]) }
    }

    @Test func classesFilter() throws {
        let planted = [Planted(box: (10, 10, 100, 100), cls: 0, score: 0.9), Planted(box: (12, 12, 102, 102), cls: 2, score: 0.8)]
        let t = yolov8Tensor(planted, nc: 80, n: 50, channelsFirst: true)
        let cars = decode(try YOLOv8Tests.decoder(labels: coco, keeping: ["car"], shape: [1, 84, 50]), [t])
        #expect(cars.map(\.label) == ["car"])
        let filter = try DetectionClasses(labels: ["a", "b"], keeping: ["b"]).scoreThresholds(minScore: 0.5)
        #expect(!filter.admits(0, 1) && filter.admits(1, 0.5) && !filter.admits(5, 1))
        #expect(throws: StageError("classes: 'dog' is not a label of this model; its labels: a, b")) { try DetectionClasses(labels: ["a", "b"], keeping: ["dog"]) }
        // BlazeFace's one class follows the same filter.
        let face = try BlazeFaceDecoder(options: try #require(try ModelManifest.load(path: packageRoot.appendingPathComponent("Models/face-short-range.json").path).decoder.blazeFace),
                                        classes: DetectionClasses(labels: ["face"], keeping: []))
        var scores = [Float](repeating: -10, count: 896)
        scores[600] = 5
        #expect(face.decode(boxes: [Float](repeating: 0, count: 896 * 16), scores: scores).isEmpty)
    }

    @Test func labelsFileBesideTheManifest() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("labels-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        func manifest(_ extra: String) throws -> String {
            let path = dir.appendingPathComponent("m.json").path
            try #"{"schema_version":1,"name":"t","model":"m.onnx","input":{"width":320,"height":320,"color_order":"RGB","value_range":[0,1],"layout":"NCHW"},"decoder":{"name":"yolov8","parameters":{}},\#(extra)"licence":"CC0"}"#
                .write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        try "cat\ndog \r\nbird\n\n".write(to: dir.appendingPathComponent("names.txt"), atomically: true, encoding: .utf8)
        let m = try ModelManifest.load(path: try manifest(#""labels_file":"names.txt","class_thresholds":{"dog":0.7},"#))
        #expect(m.labels == ["cat", "dog", "bird"] && m.classThresholds == ["dog": 0.7])
        #expect(try (m.makeDecoder() as? YOLOv8Decoder)?.valuesPerBox == 7)
        let both = try manifest(#""labels_file":"names.txt","labels":["a"],"#)
        #expect(throws: StageError("model manifest \(both): give labels or labels_file, not both")) { try ModelManifest.load(path: both) }
        let wrong = try manifest(#""labels_file":"names.txt","class_thresholds":{"cow":0.7},"#)
        #expect(throws: StageError("model manifest \(wrong): class_thresholds: 'cow' is not a label of this model; its labels: cat, dog, bird")) {
            try ModelManifest.load(path: wrong)
        }
        try "cat\n\ndog\n".write(to: dir.appendingPathComponent("gap.txt"), atomically: true, encoding: .utf8)
        let gap = try manifest(#""labels_file":"gap.txt","#)
        #expect(throws: StageError("model manifest \(gap): labels_file \(dir.appendingPathComponent("gap.txt").path): line 2 is empty")) {
            try ModelManifest.load(path: gap)
        }
        #expect(coco.count == 80 && coco.first == "person" && coco[2] == "car" && coco.last == "toothbrush")
    }
}

/// A model's outputs may hold anything: NaN, infinities, values too large for an Int, negative
/// sizes. Every family decodes them without trapping, and what comes out is finite.
@Suite struct GarbageOutputTests {
    static let pattern: [Float] = [0, 1, -1, 0.5, 64, -64, 1e30, -1e30, .infinity, -.infinity, .nan, 3, 0.99, -0.25, 128, 7]

    static func garbage(_ count: Int, offset: Int = 0) -> [Float] { (0..<count).map { pattern[($0 + offset) % pattern.count] } }

    static func finite(_ found: [Detection]) -> Bool {
        found.allSatisfy { [$0.box.xMin, $0.box.yMin, $0.box.xMax, $0.box.yMax, $0.score].allSatisfy(\.isFinite) }
    }

    @Test func everyFamilySurvivesGarbage() throws {
        let classes = try DetectionClasses(labels: ["a", "b", "c"])
        for (options, shapes) in [(YOLOv8DecoderOptions(minScore: 0) as any DetectionDecoderParameters, [[1, 7, 40]]), (YOLOv8DecoderOptions(minScore: 0), [[1, 40, 7]]),
                                  (YOLOv5DecoderOptions(minScore: 0), [[1, 40, 8]]), (SSDDecoderOptions(minScore: 0), [[1, 1, 40, 7]]),
                                  (SSDDecoderOptions(minScore: 0), [[1, 40, 4], [1, 40], [1, 40], [1]])] {
            var d = try options.makeDecoder(input: input(320, 320), classes: classes)
            _ = try d.bind(shapes.enumerated().map { ModelOutput(name: "o\($0.offset)", shape: $0.element) })
            for offset in 0..<Self.pattern.count {
                let tensors = shapes.map { Self.garbage($0.reduce(1, *), offset: offset) }
                #expect(Self.finite(decode(d, tensors)), "\(type(of: options)) \(shapes)")
            }
            // Buffers shorter than the shapes said decode what they hold, no more.
            #expect(Self.finite(decode(d, shapes.map { _ in Self.garbage(3) })))
        }
    }
}
