import Foundation
import Testing
@testable import StreamLensCore

/// The package root, found from this file, so the tests read the real manifests in Models/.
private let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
private func manifestPath(_ name: String) -> String { packageRoot.appendingPathComponent("Models/\(name).json").path }

private func close(_ a: Double, _ b: Double, _ tolerance: Double = 1e-9) -> Bool { abs(a - b) <= tolerance }
private func close(_ a: Box, _ b: Box, _ tolerance: Double = 1e-9) -> Bool {
    close(a.xMin, b.xMin, tolerance) && close(a.yMin, b.yMin, tolerance) && close(a.xMax, b.xMax, tolerance) && close(a.yMax, b.yMax, tolerance)
}
private func close(_ a: Point, _ b: Point, _ tolerance: Double = 1e-9) -> Bool { close(a.x, b.x, tolerance) && close(a.y, b.y, tolerance) }

@Suite struct AnchorTests {
    @Test func shortRangeHas896Anchors() throws {
        let manifest = try ModelManifest.load(path: manifestPath("face-short-range"))
        #expect(manifest.decoder.blazeFace!.anchors == .faceShortRange)
        let anchors = generateAnchors(manifest.decoder.blazeFace!.anchors)
        #expect(anchors.count == 896)
        #expect(anchors.first == Anchor(xCenter: 0.03125, yCenter: 0.03125, width: 1, height: 1))
        #expect(anchors.last == Anchor(xCenter: 0.9375, yCenter: 0.9375, width: 1, height: 1))
        // 16x16 cells of 2 anchors (stride 8), then 8x8 cells of 6 (three stride-16 layers of 2).
        #expect(anchors[1] == anchors[0])
        #expect(anchors[2].xCenter == 0.09375)
        #expect(anchors[512] == Anchor(xCenter: 0.0625, yCenter: 0.0625, width: 1, height: 1))
        #expect(anchors[600] == Anchor(xCenter: 0.8125, yCenter: 0.1875, width: 1, height: 1)) // row 1, column 6
    }

    @Test func fullRangeHas2304Anchors() throws {
        let manifest = try ModelManifest.load(path: manifestPath("face-full-range"))
        #expect(manifest.decoder.blazeFace!.anchors == .faceFullRange)
        let anchors = generateAnchors(manifest.decoder.blazeFace!.anchors)
        #expect(anchors.count == 2304)
        #expect(close(anchors[0].xCenter, 0.5 / 48, 1e-15) && close(anchors[0].yCenter, 0.5 / 48, 1e-15))
        #expect(close(anchors[2303].xCenter, 47.5 / 48, 1e-15) && close(anchors[2303].yCenter, 47.5 / 48, 1e-15))
        #expect(close(anchors[48].xCenter, 0.5 / 48, 1e-15) && close(anchors[48].yCenter, 1.5 / 48, 1e-15))
        #expect(anchors.allSatisfy { $0.width == 1 && $0.height == 1 })
    }

    /// The classic SSD MobileNet configuration exercises what BlazeFace does not: several
    /// aspect ratios, sized anchors and the reduced lowest layer. It has 1917 anchors.
    @Test func ssdMobileNetConfiguration() {
        let o = SSDAnchorOptions(numLayers: 6, minScale: 0.2, maxScale: 0.95, inputHeight: 300, inputWidth: 300,
                                 strides: [16, 32, 64, 128, 256, 512], aspectRatios: [1, 2, 0.5, 3, 1.0 / 3],
                                 fixedAnchorSize: false, interpolatedScaleAspectRatio: 1, reduceBoxesInLowestLayer: true)
        let anchors = generateAnchors(o)
        #expect(anchors.count == 19 * 19 * 3 + 10 * 10 * 6 + 5 * 5 * 6 + 3 * 3 * 6 + 2 * 2 * 6 + 6)
        #expect(anchors.count == 1917)
        #expect(close(anchors[0].width, 0.1) && close(anchors[0].height, 0.1))
        #expect(close(anchors[1].width, 0.2 * 2.0.squareRoot()) && close(anchors[1].height, 0.2 / 2.0.squareRoot()))
        #expect(close(anchors[0].xCenter, 0.5 / 19))
        // Layer 1: scale 0.35, then the interpolated anchor between 0.35 and the next scale 0.5.
        let layer1 = anchors[19 * 19 * 3]
        #expect(close(layer1.width, 0.35) && close(layer1.xCenter, 0.05))
        #expect(close(anchors[19 * 19 * 3 + 5].width, (0.35 * 0.5).squareRoot()))
        // The last layer's interpolated anchor reaches towards scale 1.
        #expect(close(anchors.last!.width, (0.95 * 1.0).squareRoot()))
    }

    @Test func anchorOptionsValidate() {
        var o = SSDAnchorOptions.faceShortRange
        o.strides = [8, 16]
        #expect(throws: StageError("anchor options: num_layers is 4 but there are 2 strides (one per layer)")) { try o.validate() }
        #expect(throws: Never.self) { try SSDAnchorOptions.faceFullRange.validate() }
    }
}

@Suite struct DecoderTests {
    static func shortRange() throws -> BlazeFaceDecoder {
        try #require(try ModelManifest.load(path: manifestPath("face-short-range")).makeDecoder() as? BlazeFaceDecoder)
    }

    /// Empty tensors for the short-range model: all regressors 0, all logits `logit`.
    static func tensors(logit: Float = -10) -> (boxes: [Float], scores: [Float]) {
        ([Float](repeating: 0, count: 896 * 16), [Float](repeating: logit, count: 896))
    }

    @Test func oneStrongAnchorGivesItsBoxAndKeypoints() throws {
        let decoder = try Self.shortRange()
        var (boxes, scores) = Self.tensors()
        // Anchor 600 sits at (0.8125, 0.1875). Values chosen exact in Float.
        scores[600] = 5
        let raw: [Float] = [16, -8, 32, 64] + (0..<6).flatMap { k in [Float(k) * 16, Float(k) * -8] }
        boxes.replaceSubrange(600 * 16..<601 * 16, with: raw)

        let found = decoder.decode(boxes: boxes, scores: scores)
        #expect(found.count == 1)
        let d = try #require(found.first)
        // centre (16/128 + 0.8125, -8/128 + 0.1875) = (0.9375, 0.125); size (32/128, 64/128).
        #expect(close(d.box, Box(xMin: 0.8125, yMin: -0.125, xMax: 1.0625, yMax: 0.375), 1e-12))
        #expect(close(d.score, 1 / (1 + exp(-5)), 1e-12))
        #expect(d.keypoints.count == 6)
        for k in 0..<6 {
            #expect(close(d.keypoints[k], Point(x: 0.8125 + Double(k) * 0.125, y: 0.1875 - Double(k) * 0.0625), 1e-12))
        }
        #expect(d.label == "face")
    }

    @Test func boxOrdersAgree() throws {
        var options = try Self.shortRange().options
        var (boxes, scores) = Self.tensors()
        scores[600] = 5
        boxes[600 * 16 + 0] = -8   // y centre first
        boxes[600 * 16 + 1] = 16
        boxes[600 * 16 + 2] = 64   // height first
        boxes[600 * 16 + 3] = 32
        boxes[600 * 16 + 4] = 2    // keypoint 0: y, x
        boxes[600 * 16 + 5] = 4
        options.boxOrder = .yxhw
        let d = try #require(try BlazeFaceDecoder(options: options).decode(boxes: boxes, scores: scores).first)
        #expect(close(d.box, Box(xMin: 0.8125, yMin: -0.125, xMax: 1.0625, yMax: 0.375), 1e-12))
        #expect(close(d.keypoints[0], Point(x: 0.8125 + 4.0 / 128, y: 0.1875 + 2.0 / 128), 1e-12))

        // Edge distances (left, top, right, bottom) from the anchor centre, MediaPipe's XYXY.
        boxes.replaceSubrange(600 * 16..<600 * 16 + 4, with: [16, 8, 32, 24] as [Float])
        options.boxOrder = .xyxy
        let e = try #require(try BlazeFaceDecoder(options: options).decode(boxes: boxes, scores: scores).first)
        #expect(close(e.box, Box(xMin: 0.8125 - 0.125, yMin: 0.1875 - 0.0625, xMax: 0.8125 + 0.25, yMax: 0.1875 + 0.1875), 1e-12))
        boxes.replaceSubrange(600 * 16..<600 * 16 + 4, with: [8, 16, 24, 32] as [Float])
        options.boxOrder = .yxyx
        let f = try #require(try BlazeFaceDecoder(options: options).decode(boxes: boxes, scores: scores).first)
        #expect(close(f.box, e.box, 1e-12))
    }

    @Test func weakLogitsGiveNothing() throws {
        let decoder = try Self.shortRange()
        let (boxes, scores) = Self.tensors(logit: 1) // sigmoid(1) = 0.73 < 0.75
        #expect(decoder.decode(boxes: boxes, scores: scores).isEmpty)
        let (b2, s2) = Self.tensors()
        #expect(decoder.decode(boxes: b2, scores: s2).isEmpty)
    }

    @Test func logitsAreClippedAndNaNSkipped() throws {
        let decoder = try Self.shortRange()
        var (boxes, scores) = Self.tensors()
        scores[0] = 1e6
        scores[1] = .nan
        scores[300] = 10
        boxes[300 * 16 + 2] = .nan
        scores[400] = 10
        boxes[400 * 16 + 2] = -10  // negative width: skipped, as MediaPipe does
        let found = decoder.decode(boxes: boxes, scores: scores)
        #expect(found.count == 1)
        #expect(found.first?.score == 1 / (1 + exp(-100)))
    }

    @Test func probabilitiesAreTakenAsTheyAre() throws {
        var options = try Self.shortRange().options
        options.scores = .probabilities
        options.minScore = 0.5
        var (boxes, scores) = Self.tensors(logit: 0.25)
        scores[7] = 0.875
        boxes[7 * 16 + 2] = 10
        boxes[7 * 16 + 3] = 10
        let found = try BlazeFaceDecoder(options: options).decode(boxes: boxes, scores: scores)
        #expect(found.map(\.score) == [0.875])
    }

    @Test func shapeMismatchThrows() throws {
        let decoder = try Self.shortRange()
        #expect(throws: Never.self) { try decoder.validate(boxesShape: [1, 896, 16], scoresShape: [1, 896, 1]) }
        #expect(throws: StageError("the boxes output has shape [1, 2304, 16], 2304 boxes, but the manifest's anchors number 896")) {
            try decoder.validate(boxesShape: [1, 2304, 16], scoresShape: [1, 896, 1])
        }
        #expect(throws: StageError("the scores output has shape [1, 2304, 1], 2304 scores, but the manifest's anchors number 896")) {
            try decoder.validate(boxesShape: [1, 896, 16], scoresShape: [1, 2304, 1])
        }
        #expect(throws: StageError("the boxes output has shape [1, 896, 12] but the manifest's num_coords is 16")) {
            try decoder.validate(boxesShape: [1, 896, 12], scoresShape: [1, 896, 1])
        }
    }

    @Test func outputsResolveByNameIndexOrShape() throws {
        let decoder = try Self.shortRange() // "regressors", "classificators"
        #expect(try decoder.resolveOutputs(names: ["classificators", "regressors"], shapes: [[1, 896, 1], [1, 896, 16]]) == (1, 0))
        // Renamed by a runtime: the shapes decide.
        #expect(try decoder.resolveOutputs(names: ["Identity_1", "Identity"], shapes: [[1, 896, 1], [1, 896, 16]]) == (1, 0))
        var options = decoder.options
        options.boxesOutput = "0"
        options.scoresOutput = "1"
        let byIndex = try BlazeFaceDecoder(options: options)
        #expect(try byIndex.resolveOutputs(names: ["a", "b"], shapes: [[1, 896, 16], [1, 896, 1]]) == (0, 1))
        // Indices the wrong way round: the shapes still tell them apart.
        #expect(try byIndex.resolveOutputs(names: ["a", "b"], shapes: [[1, 896, 1], [1, 896, 16]]) == (1, 0))
        // The other model's outputs: nothing fits, and the message says what there was.
        #expect(throws: StageError.self) {
            try decoder.resolveOutputs(names: ["Identity", "Identity_1"], shapes: [[1, 2304, 16], [1, 2304, 1]])
        }
    }

    @Test func badOptionsThrow() throws {
        var options = try Self.shortRange().options
        options.numCoords = 12
        #expect(throws: StageError("decoder: 6 keypoints of 2 values at keypoint_coord_offset 4 do not fit in num_coords 12")) {
            try BlazeFaceDecoder(options: options)
        }
        options.numCoords = 16
        options.xScale = 0
        #expect(throws: StageError.self) { try BlazeFaceDecoder(options: options) }
    }
}

@Suite struct SuppressionTests {
    static let a = Detection(box: Box(xMin: 0, yMin: 0, xMax: 1, yMax: 1), score: 0.9,
                             keypoints: [Point(x: 0.5, y: 0.5)], label: "face")
    static let b = Detection(box: Box(xMin: 0.1, yMin: 0, xMax: 1.1, yMax: 1), score: 0.6,
                             keypoints: [Point(x: 0.8, y: 0.2)], label: "face")
    static let c = Detection(box: Box(xMin: 5, yMin: 5, xMax: 6, yMax: 6), score: 0.7,
                             keypoints: [Point(x: 5.5, y: 5.5)], label: "face")

    @Test func iou() {
        #expect(close(Self.a.box.iou(Self.b.box), 0.9 / 1.1))
        #expect(Self.a.box.iou(Self.c.box) == 0)
        #expect(Self.a.box.iou(Self.a.box) == 1)
        #expect(Self.a.box.center == Point(x: 0.5, y: 0.5))
        #expect(Self.b.box.area == 1)
    }

    @Test func weightedAveragesOverlappingBoxes() {
        let out = suppress([Self.c, Self.b, Self.a], SuppressionOptions(method: .weighted, iouThreshold: 0.3))
        #expect(out.count == 2)
        let merged = out[0]
        // Corners weighted by score (0.9 and 0.6 of 1.5), the score a plain mean.
        #expect(close(merged.box, Box(xMin: (0.9 * 0 + 0.6 * 0.1) / 1.5, yMin: 0, xMax: (0.9 * 1 + 0.6 * 1.1) / 1.5, yMax: 1)))
        #expect(close(merged.box.xMin, 0.04) && close(merged.box.xMax, 1.04))
        #expect(close(merged.score, 0.75))
        #expect(close(merged.keypoints[0], Point(x: (0.9 * 0.5 + 0.6 * 0.8) / 1.5, y: (0.9 * 0.5 + 0.6 * 0.2) / 1.5)))
        #expect(merged.label == "face")
        #expect(out[1] == Self.c) // alone: untouched
    }

    /// A hostile answer scoring every cell (fuzzed: a remote CenterFace heatmap of 96x160 all at
    /// 0.99 took seconds a frame): only the best `candidateLimit` candidates are grouped.
    @Test func onlyTheBestCandidatesAreGrouped() {
        let n = 3 * SuppressionOptions.candidateLimit / 2
        // Apart from each other (no group forms), scores falling with the index.
        let many = (0..<n).map { i in
            Detection(box: Box(xMin: Double(i), yMin: 0, xMax: Double(i) + 0.5, yMax: 1), score: 1 - Double(i) / Double(n), keypoints: [], label: "face")
        }
        for method in SuppressionOptions.Method.allCases {
            let out = suppress(many.reversed(), SuppressionOptions(method: method))
            #expect(out.count == SuppressionOptions.candidateLimit, "\(method)")
            #expect(out.first == many[0] && out.last == many[SuppressionOptions.candidateLimit - 1], "\(method)")
        }
    }

    @Test func weightedKeepsLoneDetectionsAndRespectsTheLimit() {
        #expect(suppress([Self.a], SuppressionOptions()) == [Self.a])
        #expect(suppress([Self.c, Self.a, Self.b], SuppressionOptions(maxDetections: 1)).count == 1)
        // Below the threshold the two stay apart.
        #expect(suppress([Self.a, Self.b], SuppressionOptions(iouThreshold: 0.9)) == [Self.a, Self.b])
    }

    @Test func nmsKeepsTheBest() {
        let out = suppress([Self.b, Self.c, Self.a], SuppressionOptions(method: .nms, iouThreshold: 0.3))
        #expect(out == [Self.a, Self.c])
        #expect(suppress([Self.b, Self.c, Self.a], SuppressionOptions(method: .nms, maxDetections: 1)) == [Self.a])
        #expect(suppress([Self.b, Self.c, Self.a], SuppressionOptions(method: .none)) == [Self.a, Self.c, Self.b])
    }

    @Test func optionsDecodeWithDefaults() throws {
        let o = try JSONDecoder().decode(SuppressionOptions.self, from: Data(#"{"method": "nms", "max_detections": 3}"#.utf8))
        #expect(o == SuppressionOptions(method: .nms, iouThreshold: 0.3, maxDetections: 3))
        #expect(try JSONDecoder().decode(SuppressionOptions.self, from: Data("{}".utf8)) == SuppressionOptions())
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(SuppressionOptions.self, from: Data(#"{"method": "soft"}"#.utf8))
        }
    }
}

@Suite struct FrameGeometryTests {
    struct Case {
        var frame: (Int, Int)
        var model: (Int, Int) = (128, 128)
        var mode: CropMode
        /// Where the model box (0.25, 0.25)…(0.75, 0.75) lands, frame pixels.
        var box: Box
        var padding: (Int, Int, Int, Int) = (0, 0, 0, 0)
        var crop: (Int, Int, Int, Int)? = nil
    }

    static let cases: [Case] = [
        // 1280x720 letterboxed to 1280x1280: 280 rows each side.
        Case(frame: (1280, 720), mode: .letterbox, box: Box(xMin: 320, yMin: 40, xMax: 960, yMax: 680), padding: (280, 0, 280, 0)),
        Case(frame: (1280, 720), mode: .centerCrop, box: Box(xMin: 460, yMin: 180, xMax: 820, yMax: 540), crop: (280, 0, 720, 720)),
        Case(frame: (1280, 720), mode: .stretch, box: Box(xMin: 320, yMin: 180, xMax: 960, yMax: 540)),
        // Portrait.
        Case(frame: (720, 1280), mode: .letterbox, box: Box(xMin: 40, yMin: 320, xMax: 680, yMax: 960), padding: (0, 280, 0, 280)),
        Case(frame: (720, 1280), mode: .centerCrop, box: Box(xMin: 180, yMin: 460, xMax: 540, yMax: 820), crop: (0, 280, 720, 720)),
        Case(frame: (720, 1280), mode: .stretch, box: Box(xMin: 180, yMin: 320, xMax: 540, yMax: 960)),
        // 4:3.
        Case(frame: (640, 480), mode: .letterbox, box: Box(xMin: 160, yMin: 80, xMax: 480, yMax: 400), padding: (80, 0, 80, 0)),
        Case(frame: (640, 480), mode: .centerCrop, box: Box(xMin: 200, yMin: 120, xMax: 440, yMax: 360), crop: (80, 0, 480, 480)),
        Case(frame: (640, 480), mode: .stretch, box: Box(xMin: 160, yMin: 120, xMax: 480, yMax: 360)),
        // Already the model's size: every mode is the identity scaled.
        Case(frame: (128, 128), mode: .letterbox, box: Box(xMin: 32, yMin: 32, xMax: 96, yMax: 96)),
        Case(frame: (128, 128), mode: .centerCrop, box: Box(xMin: 32, yMin: 32, xMax: 96, yMax: 96), crop: (0, 0, 128, 128)),
        Case(frame: (128, 128), mode: .stretch, box: Box(xMin: 32, yMin: 32, xMax: 96, yMax: 96)),
        // Odd remainders go to the bottom/right: 641-480 = 161 = 80 + 81.
        Case(frame: (641, 480), mode: .letterbox, box: Box(xMin: 160.25, yMin: 80.25, xMax: 480.75, yMax: 400.75), padding: (80, 0, 81, 0)),
        Case(frame: (641, 480), mode: .centerCrop, box: Box(xMin: 200, yMin: 120, xMax: 440, yMax: 360), crop: (80, 0, 480, 480)),
        // A 4:3 model on a 16:9 frame: padded to 1280x960.
        Case(frame: (1280, 720), model: (160, 120), mode: .letterbox, box: Box(xMin: 320, yMin: 120, xMax: 960, yMax: 600), padding: (120, 0, 120, 0)),
        Case(frame: (1280, 720), model: (160, 120), mode: .centerCrop, box: Box(xMin: 400, yMin: 180, xMax: 880, yMax: 540), crop: (160, 0, 960, 720)),
    ]

    @Test(arguments: 0..<cases.count) func mapsModelBoxesToFramePixels(_ index: Int) {
        let c = Self.cases[index]
        let g = FrameGeometry(frameWidth: c.frame.0, frameHeight: c.frame.1, modelWidth: c.model.0, modelHeight: c.model.1, mode: c.mode)
        let d = Detection(box: Box(xMin: 0.25, yMin: 0.25, xMax: 0.75, yMax: 0.75), score: 0.9,
                          keypoints: [Point(x: 0.25, y: 0.75), Point(x: 0.75, y: 0.25)], label: "face")
        let mapped = g.toFrame(d)
        #expect(close(mapped.box, c.box), "case \(index): \(mapped.box)")
        #expect(close(mapped.keypoints[0], Point(x: c.box.xMin, y: c.box.yMax)))
        #expect(close(mapped.keypoints[1], Point(x: c.box.xMax, y: c.box.yMin)))
        #expect(mapped.score == 0.9 && mapped.label == "face")

        let p = g.padding
        #expect(p.top == c.padding.0 && p.left == c.padding.1 && p.bottom == c.padding.2 && p.right == c.padding.3, "case \(index)")
        let crop = g.crop
        let expectedCrop = c.crop ?? (0, 0, c.frame.0, c.frame.1)
        #expect(crop.x == expectedCrop.0 && crop.y == expectedCrop.1 && crop.width == expectedCrop.2 && crop.height == expectedCrop.3,
                "case \(index)")
        // The padded (or cropped) region has the model's aspect ratio, to the pixel.
        if c.mode == .letterbox {
            let w = c.frame.0 + p.left + p.right, h = c.frame.1 + p.top + p.bottom
            #expect(abs(w * c.model.1 - h * c.model.0) < max(c.model.0, c.model.1))
        }

        // Round trip for points inside the frame.
        for q in [Point(x: 0, y: 0), Point(x: 17.5, y: 3.25), Point(x: Double(c.frame.0), y: Double(c.frame.1))] {
            #expect(close(g.toFrame(g.toModel(q)), q))
        }
    }

    @Test func boxesAreClampedToTheFrame() {
        let g = FrameGeometry(frameWidth: 1280, frameHeight: 720, modelWidth: 128, modelHeight: 128, mode: .letterbox)
        let d = Detection(box: Box(xMin: -0.1, yMin: 0.1, xMax: 0.5, yMax: 1.2), score: 1, keypoints: [Point(x: -0.1, y: 0.1)])
        let mapped = g.toFrame(d)
        #expect(close(mapped.box, Box(xMin: 0, yMin: 0, xMax: 640, yMax: 720)))
        #expect(close(mapped.keypoints[0], Point(x: -128, y: -152))) // keypoints are not clamped
    }

    @Test func cropModeNames() throws {
        #expect(CropMode.allCases.map(\.rawValue) == ["letterbox", "center-crop", "stretch"])
        #expect(try JSONDecoder().decode([CropMode].self, from: Data(#"["center-crop"]"#.utf8)) == [.centerCrop])
    }
}

@Suite struct ModelManifestTests {
    static func temporaryFile(_ text: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("manifest-\(UUID().uuidString).json")
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    static func shortRangeText() throws -> String { try String(contentsOfFile: manifestPath("face-short-range"), encoding: .utf8) }

    @Test func shippedManifestsLoad() throws {
        let short = try ModelManifest.load(path: manifestPath("face-short-range"))
        #expect(short.name == "face-short-range")
        #expect(short.input == ModelManifest.Input(width: 128, height: 128, colorOrder: .rgb, valueRange: [-1, 1], layout: .nhwc))
        #expect(short.crop == .letterbox)
        #expect(short.labels == ["face"])
        #expect(short.licence.hasPrefix("Apache-2.0"))
        let p = short.decoder.blazeFace!
        #expect(p.boxesOutput == "regressors" && p.scoresOutput == "classificators")
        #expect(p.numCoords == 16 && p.boxOrder == .xywh && p.keypointCoordOffset == 4 && p.numKeypoints == 6)
        #expect(p.xScale == 128 && p.hScale == 128 && p.scores == .logits && p.scoreClippingThresh == 100)
        #expect(p.minScore == 0.75 && p.suppression == SuppressionOptions(method: .weighted, iouThreshold: 0.3))
        #expect(short.model == "catalogue:mediapipe-face-detection/face_detection_short_range.tflite")

        let full = try ModelManifest.load(path: manifestPath("face-full-range"))
        #expect(full.model == "catalogue:mediapipe-face-detection/face_detection_full_range_sparse.tflite")
        #expect(full.input.width == 192 && full.decoder.blazeFace!.xScale == 192 && full.decoder.blazeFace!.minScore == 0.6)
        #expect(try (full.makeDecoder() as? BlazeFaceDecoder)?.anchors.count == 2304)

        // MediaPipe's pose detector by manifest only: pose_detection.tflite's [1, 2254, 12] and [1, 2254, 1].
        let pose = try ModelManifest.load(path: manifestPath("pose-detection"))
        #expect(pose.model == "catalogue:mediapipe-pose-detection/pose_detection.tflite" && pose.labels == ["person"])
        let poseDecoder = try #require(try pose.makeDecoder() as? BlazeFaceDecoder)
        #expect(poseDecoder.anchors.count == 2254)
        #expect(try poseDecoder.resolveOutputs(names: ["Identity", "Identity_1"], shapes: [[1, 2254, 12], [1, 2254, 1]]) == (0, 1))

        // Encoding and decoding again changes nothing.
        let data = try JSONEncoder().encode(full)
        #expect(try ModelManifest.decode(data, origin: "round trip") == full)
    }

    @Test func meanAndScaleFromTheValueRange() {
        func io(_ range: [Double]) -> ModelManifest.Input {
            ModelManifest.Input(width: 1, height: 1, colorOrder: .rgb, valueRange: range, layout: .nhwc)
        }
        #expect(io([-1, 1]).means == [127.5] && io([-1, 1]).scales == [127.5])
        #expect(io([0, 1]).means == [0] && io([0, 1]).scales == [255])
        #expect(io([0, 255]).means == [0] && io([0, 255]).scales == [1])
        #expect(io([0, 255]).means[0].sign == .plus)
        for range in [[-1.0, 1.0], [0, 1], [0, 255], [-0.5, 2]] {
            let input = io(range)
            #expect(close((0 - input.means[0]) / input.scales[0], range[0]) && close((255 - input.means[0]) / input.scales[0], range[1]))
        }
    }

    /// PaddleOCR's and torchvision's normalisation: value_range [0, 1], then ImageNet's mean and
    /// std per channel; 8-bit v of channel c becomes (v / 255 - mean[c]) / std[c].
    @Test func meanAndStdPerChannelAfterTheValueRange() throws {
        let json = #"{"width": 8, "height": 8, "color_order": "BGR", "value_range": [0, 1], "layout": "NCHW", "mean": [0.406, 0.456, 0.485], "std": [0.225, 0.224, 0.229]}"#
        let input = try JSONDecoder().decode(ModelManifest.Input.self, from: Data(json.utf8))
        for (c, (m, s)) in [(0.406, 0.225), (0.456, 0.224), (0.485, 0.229)].enumerated() {
            for v in [0.0, 100, 255] {
                #expect(close((v - input.means[c]) / input.scales[c], (v / 255 - m) / s), "channel \(c), \(v)")
            }
        }
        // One std for all channels with a mean per channel; [-1, 1] first.
        let mixed = try JSONDecoder().decode(ModelManifest.Input.self, from: Data(#"{"width": 8, "height": 8, "color_order": "RGB", "value_range": [-1, 1], "layout": "NHWC", "mean": [0.1, 0.2, 0.3], "std": [2]}"#.utf8))
        #expect(mixed.means.count == 3 && mixed.scales.count == 3 && close((255 - mixed.means[2]) / mixed.scales[2], (1 - 0.3) / 2))
    }

    @Test(arguments: [
        (#""mean": [0.1, 0.2]"#, "input mean has 2 values: give 1, or one per channel (3 for RGB)"),
        (#""std": [0.5, 0, 0.5]"#, "input std [0.5, 0.0, 0.5] must be above 0"),
        (#""std": [1e-320]"#, "input mean and std over value_range [0.0, 1.0] give no usable normalisation"),
    ])
    func aBadMeanOrStdIsRefused(_ extra: String, _ message: String) throws {
        let json = #"{"schema_version": 1, "name": "m", "model": "m.onnx", "licence": "x", "input": {"width": 32, "height": 32, "color_order": "RGB", "value_range": [0, 1], "layout": "NCHW", \#(extra)}, "decoder": {"name": "centerface", "parameters": {}}}"#
        #expect(throws: StageError("model manifest m.json: \(message)")) {
            _ = try ModelManifest.decode(Data(json.utf8), origin: "m.json")
        }
    }

    @Test func missingFile() {
        #expect(throws: StageError("model manifest /nonexistent/face.json not found")) {
            try ModelManifest.load(path: "/nonexistent/face.json")
        }
    }

    @Test func wrongSchemaVersion() throws {
        let path = try Self.temporaryFile(try Self.shortRangeText().replacingOccurrences(of: #""schema_version": 1"#, with: #""schema_version": 2"#))
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(throws: StageError("model manifest \(path) has schema_version 2; this StreamLens reads schema_version 1")) {
            try ModelManifest.load(path: path)
        }
        // Another version may look entirely different: the version is still what is reported.
        let other = try Self.temporaryFile(#"{"schema_version": 3, "model": {"file": "x"}}"#)
        defer { try? FileManager.default.removeItem(atPath: other) }
        #expect(throws: StageError("model manifest \(other) has schema_version 3; this StreamLens reads schema_version 1")) {
            try ModelManifest.load(path: other)
        }
    }

    @Test func unknownDecoder() throws {
        let path = try Self.temporaryFile(try Self.shortRangeText().replacingOccurrences(of: #""name": "blazeface""#, with: #""name": "yolo""#))
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(throws: StageError("model manifest \(path) names decoder 'yolo'; known decoders: \(DecoderRegistry.names.joined(separator: ", "))")) {
            try ModelManifest.load(path: path)
        }
    }

    @Test func badJSONNamesTheKey() throws {
        let missing = try Self.temporaryFile(try Self.shortRangeText().replacingOccurrences(of: #""num_coords": 16,"#, with: ""))
        defer { try? FileManager.default.removeItem(atPath: missing) }
        #expect(throws: StageError("model manifest \(missing) is not valid: missing key decoder.parameters.num_coords")) {
            try ModelManifest.load(path: missing)
        }

        let badOrder = try Self.temporaryFile(try Self.shortRangeText().replacingOccurrences(of: #""box_order": "xywh""#, with: #""box_order": "xyzw""#))
        defer { try? FileManager.default.removeItem(atPath: badOrder) }
        let orderError = #expect(throws: StageError.self) { try ModelManifest.load(path: badOrder) }
        #expect(orderError?.message.contains("decoder.parameters.box_order") == true, "\(orderError?.message ?? "")")

        let badType = try Self.temporaryFile(try Self.shortRangeText().replacingOccurrences(of: #""width": 128"#, with: #""width": "wide""#))
        defer { try? FileManager.default.removeItem(atPath: badType) }
        let typeError = #expect(throws: StageError.self) { try ModelManifest.load(path: badType) }
        #expect(typeError?.message.hasPrefix("model manifest \(badType) is not valid: input.width: expected Int") == true, "\(typeError?.message ?? "")")

        let notJSON = try Self.temporaryFile("{ \"schema_version\": 1,\n  \"name\": }")
        defer { try? FileManager.default.removeItem(atPath: notJSON) }
        let jsonError = #expect(throws: StageError.self) { try ModelManifest.load(path: notJSON) }
        #expect(jsonError?.message.hasPrefix("model manifest \(notJSON) is not valid: ") == true, "\(jsonError?.message ?? "")")
        #expect(jsonError?.message.contains("line 2") == true, "\(jsonError?.message ?? "")")
    }

    @Test func inconsistentValues() throws {
        let range = try Self.temporaryFile(try Self.shortRangeText().replacingOccurrences(of: "[-1, 1]", with: "[1, -1]"))
        defer { try? FileManager.default.removeItem(atPath: range) }
        #expect(throws: StageError("model manifest \(range): input value_range must be two numbers [lo, hi] with lo < hi, got [1.0, -1.0]")) {
            try ModelManifest.load(path: range)
        }
        let size = try Self.temporaryFile(try Self.shortRangeText().replacingOccurrences(of: #""width": 128"#, with: #""width": 192"#))
        defer { try? FileManager.default.removeItem(atPath: size) }
        #expect(throws: StageError("model manifest \(size): the decoder's anchors are for 128x128 but the input is 192x128")) {
            try ModelManifest.load(path: size)
        }
    }
}
