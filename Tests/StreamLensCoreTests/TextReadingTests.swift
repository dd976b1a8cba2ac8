import Foundation
import Testing
@testable import StreamLensCore

/// The text reader's parts on numbers made here: turned rectangles, the DB map's decoding, CTC
/// reading, the crop along a line, and the vote over a track. (The real models against
/// PaddleOCR's own pipeline: Tests/CLITests/TextReadingTests.swift.)
@Suite struct TextGeometryTests {
    /// The cells of a w × h rectangle turned by `angle` around (cx, cy), on a grid.
    static func turnedBlock(cx: Double, cy: Double, w: Double, h: Double, angle: Double, grid: (Int, Int)) -> [Bool] {
        let (c, s) = (cos(angle), sin(angle))
        return (0..<(grid.0 * grid.1)).map { i in
            let (dx, dy) = (Double(i % grid.0) - cx, Double(i / grid.0) - cy)
            let (u, v) = (c * dx + s * dy, -s * dx + c * dy)
            return abs(u) <= w / 2 && abs(v) <= h / 2
        }
    }

    @Test func smallestRectangleOfAnUprightBlock() throws {
        let points = (10...20).flatMap { x in (5...8).map { y in Point(x: Double(x), y: Double(y)) } }
        let r = try #require(RotatedRectangle.enclosing(points))
        #expect(r.corners == [Point(x: 10, y: 5), Point(x: 20, y: 5), Point(x: 20, y: 8), Point(x: 10, y: 8)])
        #expect(r.width == 10 && r.height == 3)
        let grown = r.grown(by: 2)
        #expect(grown.corners == [Point(x: 8, y: 3), Point(x: 22, y: 3), Point(x: 22, y: 10), Point(x: 8, y: 10)])
        #expect(RotatedRectangle.enclosing([]) == nil)
        #expect(try #require(RotatedRectangle.enclosing([Point(x: 1, y: 1)])).area == 0)
    }

    @Test func smallestRectangleOfATurnedBlockFollowsItsSlant() throws {
        let grid = (120, 80)
        let cells = Self.turnedBlock(cx: 60, cy: 40, w: 80, h: 16, angle: .pi / 9, grid: grid) // 20°
        let regions = connectedRegions(cells, width: grid.0, height: grid.1, limit: 10)
        #expect(regions.count == 1)
        let r = try #require(RotatedRectangle.enclosing(regions[0]))
        let top = atan2(r.corners[1].y - r.corners[0].y, r.corners[1].x - r.corners[0].x)
        #expect(abs(top - .pi / 9) < 0.03, "\(top * 180 / .pi)°")
        #expect(abs(r.width - 80) < 2 && abs(r.height - 16) < 2, "\(r.width) x \(r.height)")
        #expect(abs(r.center.x - 60) < 1 && abs(r.center.y - 40) < 1)
        // Reading order: top-left is the left-most upper corner.
        #expect(r.corners[0].x < r.corners[1].x && r.corners[3].y > r.corners[0].y)
    }

    @Test func separateBlocksAreSeparateRegions() {
        var cells = [Bool](repeating: false, count: 20 * 10)
        for x in 1...5 { cells[2 * 20 + x] = true }
        for x in 8...12 { cells[3 * 20 + x] = true } // touches nothing of the first
        cells[3 * 20 + 6] = false
        cells[4 * 20 + 13] = true // diagonal neighbour of (12, 3): the same region
        let regions = connectedRegions(cells, width: 20, height: 10, limit: 10)
        #expect(regions.count == 2)
        #expect(connectedRegions(cells, width: 20, height: 10, limit: 1).count == 1)
        #expect(connectedRegions([true], width: 2, height: 2, limit: 5).isEmpty, "a grid of the wrong size")
    }
}

@Suite struct TextDetectionDecoderTests {
    static let decoder = TextDetectionDecoder(options: TextDetectionDecoderOptions(), width: 64, height: 32,
                                              classes: try! DetectionClasses(labels: ["text"], classThresholds: [:], keeping: nil))

    /// A 64 × 32 map, 0.9 inside the block x 10…29, y 10…15, 0.05 elsewhere.
    static func map(_ value: (Int, Int) -> Float? = { _, _ in nil }) -> [Float] {
        (0..<(64 * 32)).map { i in
            let (x, y) = (i % 64, i / 64)
            return value(x, y) ?? ((10...29).contains(x) && (10...15).contains(y) ? 0.9 : 0.05)
        }
    }

    @Test func aBlockBecomesOneLineGrownByDBsUnclip() throws {
        let found = Self.map().withUnsafeBufferPointer { Self.decoder.decode([$0]) }
        let line = try #require(found.first)
        #expect(found.count == 1 && line.label == "text" && line.labelId == 0)
        #expect(abs(line.score - 0.9) < 1e-6)
        // The core 19 x 5 (pixel centres 10…29, 10…15) grows by 19·5·1.6 / 48 ≈ 3.17 a side,
        // rounded to whole map pixels: 7…32, 7…18, over 64 x 32.
        #expect(line.keypoints.count == 4)
        #expect(abs(line.box.xMin * 64 - 7) < 1e-9 && abs(line.box.xMax * 64 - 32) < 1e-9, "\(line.box)")
        #expect(abs(line.box.yMin * 32 - 7) < 1e-9 && abs(line.box.yMax * 32 - 18) < 1e-9, "\(line.box)")
    }

    @Test func hostileMapsGiveNothingOrWhatIsThere() {
        // NaN everywhere: no text; NaN inside the block: not text either (the block splits).
        let nan = [Float](repeating: .nan, count: 64 * 32)
        #expect(nan.withUnsafeBufferPointer { Self.decoder.decode([$0]) }.isEmpty)
        let holed = Self.map { x, y in x == 20 && (10...15).contains(y) ? .nan : nil }
        #expect(holed.withUnsafeBufferPointer { Self.decoder.decode([$0]) }.count == 2)
        // Infinite values are text, left out of the line's mean.
        let infinite = Self.map { x, y in x == 20 && y == 12 ? .infinity : nil }
        #expect(infinite.withUnsafeBufferPointer { Self.decoder.decode([$0]) }.count == 1)
        // A buffer of another size, none at all.
        #expect([Float](repeating: 1, count: 10).withUnsafeBufferPointer { Self.decoder.decode([$0]) }.isEmpty)
        #expect(Self.decoder.decode([]).isEmpty)
        // Everything text: one line the map's size, inside it.
        let full = [Float](repeating: 1, count: 64 * 32).withUnsafeBufferPointer { Self.decoder.decode([$0]) }
        #expect(full.count == 1 && full[0].box == Box(xMin: 0, yMin: 0, xMax: 1, yMax: 1))
        // Low probability lines are dropped by min_score (box_thresh).
        let faint = Self.map { x, y in (10...29).contains(x) && (10...15).contains(y) ? 0.4 : nil }
        #expect(faint.withUnsafeBufferPointer { Self.decoder.decode([$0]) }.isEmpty)
    }

    @Test func parametersKeepPaddleOCRsDefaultsUnlessGiven() throws {
        let given = try JSONDecoder().decode(TextDetectionDecoderOptions.self, from: Data(#"{"unclip_ratio": 2, "max_candidates": 5, "output": "x"}"#.utf8))
        #expect(given.unclipRatio == 2 && given.maxCandidates == 5 && given.output == "x")
        #expect(given.threshold == 0.3 && given.minScore == 0.5 && given.minSize == 3 && given.suppression.method == .none)
        let reader = try JSONDecoder().decode(TextRecognitionDecoderOptions.self, from: Data(#"{"space": false, "min_score": 0.7}"#.utf8))
        #expect(!reader.space && reader.minScore == 0.7 && reader.attribute == "text" && reader.blank == 0 && reader.activation == .none)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(TextDetectionDecoderOptions.self, from: Data(#"{"threshold": "high"}"#.utf8)) }
    }

    @Test func bindsOnlyAMapOfTheInputsSize() throws {
        var d = Self.decoder
        #expect(try d.bind([ModelOutput(name: "x", shape: [1, 2]), ModelOutput(name: "map", shape: [1, 1, 32, 64])]) == [1])
        #expect(throws: StageError.self) { try d.bind([ModelOutput(name: "map", shape: [1, 1, 64, 64])]) }
        #expect(throws: StageError.self) { try d.bind([ModelOutput(name: "map", shape: [1, 40, 18385])]) }
        var options = TextDetectionDecoderOptions()
        options.unclipRatio = .nan
        let input = ModelManifest.Input(width: 64, height: 32, colorOrder: .bgr, valueRange: [0, 1], layout: .nchw)
        #expect(throws: StageError.self) { try options.validate(input: input) }
    }
}

@Suite struct TextRecognitionDecoderTests {
    static let reader = TextRecognitionDecoderOptions().makeDecoder(input: .init(width: 320, height: 48, colorOrder: .bgr, valueRange: [-1, 1], layout: .nchw),
                                                                    labels: ["A", "B", "\u{3000}"]) as! TextRecognitionDecoderOptions.Reader

    /// Steps of one-hot-ish scores: the class taken each step, at probability p.
    static func steps(_ classes: [Int], p: Float = 0.9) -> [Float] {
        classes.flatMap { k in (0..<5).map { $0 == k ? p : (1 - p) / 4 } } // blank, A, B, U+3000, space
    }

    @Test func greedyCTCMergesRepeatsAndDropsBlanks() {
        // A A blank A B B space B: "AA B" (a blank between equals keeps both).
        guard case .text(let name, let reading, let score) = Self.reader.decode(Self.steps([1, 1, 0, 1, 2, 2, 4, 2])) else { Issue.record(); return }
        #expect(name == "text" && reading == "AAB B")
        #expect(abs(score - 0.9) < 1e-6)
        guard case .text(_, let ideographic, _) = Self.reader.decode(Self.steps([3, 0])) else { Issue.record(); return }
        #expect(ideographic == "\u{3000}", "the character list's own space is a character")
    }

    @Test func lowScoresAndHostileScoresReadNothing() {
        guard case .text(_, let faint, let s) = Self.reader.decode(Self.steps([1, 2], p: 0.4)) else { Issue.record(); return }
        #expect(faint == "" && abs(s - 0.4) < 1e-6, "under min_score 0.5")
        var nan = Self.steps([1, 2])
        for i in 0..<5 { nan[i] = .nan } // the first step all NaN: no class wins it
        guard case .text(_, let partial, _) = Self.reader.decode(nan) else { Issue.record(); return }
        #expect(partial == "B")
        #expect(Self.reader.read(UnsafeBufferPointer(start: nil, count: 0)).0 == "")
        #expect([Float](repeating: 1, count: 7).withUnsafeBufferPointer { Self.reader.read($0) }.0 == "", "not whole steps")
    }

    @Test func bindsOnlyScoresOverTheCharacters() throws {
        #expect(try Self.reader.bind([ModelOutput(name: "a", shape: [1, 40, 5])]) == [0])
        #expect(throws: StageError.self) { try Self.reader.bind([ModelOutput(name: "a", shape: [1, 40, 18385])]) }
        #expect(throws: StageError.self) { try Self.reader.bind([ModelOutput(name: "a", shape: [2, 40, 5])]) }
        #expect(throws: StageError.self) { try TextRecognitionDecoderOptions().validate(labels: []) }
        var options = TextRecognitionDecoderOptions()
        options.blank = 3
        #expect(throws: StageError.self) { try options.validate(labels: ["A"]) }
    }

    @Test func softmaxLogitsAndABlankAtTheEnd() {
        var options = TextRecognitionDecoderOptions()
        options.blank = -1
        options.activation = .softmax
        options.space = false
        let reader = options.makeDecoder(input: .init(width: 100, height: 32, colorOrder: .gray, valueRange: [0, 1], layout: .nchw),
                                         labels: ["x", "y"]) as! TextRecognitionDecoderOptions.Reader
        // Classes x, y, blank; logits: x (e^2 of e^2+1+1), blank, y.
        let logits: [Float] = [2, 0, 0, 0, 0, 2, 0, 2, 0]
        guard case .text(_, let reading, let score) = reader.decode(logits) else { Issue.record(); return }
        #expect(reading == "xy")
        #expect(abs(score - exp(2) / (exp(2) + 2)) < 1e-6)
    }

    @Test func labelsKeepSpacesOtherThanASCII() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("chars-\(getpid()).txt").path
        try "\u{3000}\n a \r\nb\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try ModelManifest.readLabels(path) == ["\u{3000}", "a", "b"])
    }
}

@Suite struct TextLineCropTests {
    @Test func aLineFillsTheInputFromTheLeftAtItsAspect() throws {
        // A 100 x 25 line turned by 10°: its corners in reading order.
        let a = 10 * Double.pi / 180, (c, s) = (cos(a), sin(a))
        func at(_ u: Double, _ v: Double) -> Point { Point(x: 200 + u * c - v * s, y: 100 + u * s + v * c) }
        let corners = [at(-50, -12.5), at(50, -12.5), at(50, 12.5), at(-50, 12.5)]
        let region = RegionOfInterest(label: "text", x: 140, y: 70, width: 120, height: 60, keypoints: corners)
        let p = try #require(ObjectCrop(mode: .textLine).placement(of: region, inputWidth: 320, inputHeight: 48))
        #expect(abs(p.rotation - a) < 1e-9 && abs(p.width - 100) < 1e-9 && abs(p.height - 25) < 1e-9)
        #expect(abs(p.filled - 192.0 / 320) < 1e-9, "48 x 100/25 = 192 columns of 320")
        let topLeft = p.frame(0, 0), bottomRight = p.frame(p.filled, 1)
        #expect(abs(topLeft.x - corners[0].x) < 1e-9 && abs(topLeft.y - corners[0].y) < 1e-9)
        #expect(abs(bottomRight.x - corners[2].x) < 1e-9 && abs(bottomRight.y - corners[2].y) < 1e-9)
        let back = p.crop(corners[2])
        #expect(abs(back.x - p.filled) < 1e-9 && abs(back.y - 1) < 1e-9)
        // Standing 1.5 times taller than wide: turned a quarter, its height across.
        let tall = [Point(x: 10, y: 10), Point(x: 30, y: 10), Point(x: 30, y: 70), Point(x: 10, y: 70)]
        let q = try #require(ObjectCrop(mode: .textLine).placement(of: RegionOfInterest(label: "t", x: 10, y: 10, width: 20, height: 60, keypoints: tall),
                                                                     inputWidth: 320, inputHeight: 48))
        #expect(q.width == 60 && q.height == 20 && abs(q.rotation - .pi / 2) < 1e-9)
        #expect(ObjectCrop(mode: .textLine).placement(of: RegionOfInterest(label: "t", x: 0, y: 0, width: 5, height: 5), inputWidth: 320, inputHeight: 48) == nil,
                "no corners")
    }

    @Test func samplingPadsPastTheLine() {
        // A 4 x 2 white RGB frame; a placement filling half the 8-wide input.
        let frame = [UInt8](repeating: 255, count: 4 * 2 * 3)
        let source = CropSampling.Source(width: 4, height: 2, stride: 12, pixelFormat: "RGB")
        let p = ObjectCrop.Placement(centerX: 2, centerY: 1, width: 4, height: 2, rotation: 0, filled: 0.5)
        var out: [UInt8] = []
        frame.withUnsafeBytes { CropSampling.sample($0, source, placement: p, outWidth: 8, outHeight: 2, gray: false, padding: [1, 2, 3], into: &out) }
        #expect(Array(out[0..<12]) == [UInt8](repeating: 255, count: 12))
        #expect(Array(out[12..<24]) == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3])
        let input = ModelManifest.Input(width: 320, height: 48, colorOrder: .bgr, valueRange: [-1, 1], layout: .nchw)
        #expect(input.zeroPixel == [128, 128, 128])
    }

    @Test func edgeMarginSkipsLinesNearTheEdge() {
        let crop = ObjectCrop(mode: .textLine, edgeMargin: 1)
        let line = { (x: Double) in RegionOfInterest(label: "t", x: x, y: 100, width: 200, height: 50) }
        #expect(crop.inView(line(50), width: 640, height: 360))
        #expect(!crop.inView(line(49), width: 640, height: 360))
        #expect(!crop.inView(line(400), width: 640, height: 360), "ends 40 px from the right edge")
        #expect(ObjectCrop(mode: .textLine).inView(line(0), width: 640, height: 360), "no margin: every region")
    }
}

@Suite struct TextVotesTests {
    @Test func aReadingSettlesOnceWithEnoughSteadyVotes() throws {
        var votes = try TextVotes(needed: 3, pattern: "")
        #expect(votes.add("KX 4729", score: 0.9, area: 1000, objectId: 1, frame: 0) == nil)
        #expect(votes.add("KX4729", score: 0.8, area: 1010, objectId: 1, frame: 1) == nil)
        #expect(votes.add("KX 4728", score: 0.99, area: 1000, objectId: 1, frame: 2) == nil)
        let settles = votes.add("  KX  4729 ", score: 0.7, area: 1020, objectId: 1, frame: 3)
        let settled = try #require(settles)
        #expect(settled.text == "KX 4729" && settled.votes == 3 && abs(settled.score - 0.8) < 1e-9, "\(settled)")
        #expect(votes.isSettled(1) && !votes.isSettled(2))
        #expect(votes.add("KX 4729", score: 0.9, area: 1000, objectId: 1, frame: 4) == nil, "settled once")
        #expect(votes.reading(of: 1)?.votes == 4)
    }

    @Test func largerViewsSupersedeAndGrowingBoxesDoNotSettle() throws {
        var votes = try TextVotes(needed: 2, pattern: "")
        // A line coming into view: its box grows 20 % a frame; nothing settles while it does.
        #expect(votes.add("4729", score: 1, area: 1000, objectId: 7, frame: 0) == nil)
        #expect(votes.add("4729", score: 1, area: 1200, objectId: 7, frame: 1) == nil)
        // Whole: 1.3 times larger than the first views, which count no more.
        #expect(votes.add("KX 4729", score: 0.9, area: 2000, objectId: 7, frame: 2) == nil)
        #expect(votes.reading(of: 7)?.text == "KX 4729")
        #expect(votes.add("X 4729", score: 0.9, area: 1400, objectId: 7, frame: 3) == nil, "a smaller view: no vote")
        #expect(votes.add("KX 4729", score: 0.9, area: 2010, objectId: 7, frame: 4)?.text == "KX 4729")
    }

    @Test func aPatternFitsConfusedCharactersAndRefusesTheRest() throws {
        let votes = try TextVotes(needed: 1, pattern: "[A-Z]{2}[0-9]{4}")
        #expect(votes.normalized("kx-4729") == "KX4729")
        #expect(votes.normalized("K8 4O29") == "KB4029", "B/8 and O/0 swapped to fit")
        #expect(votes.normalized("1X 47Z9") == "IX4729")
        #expect(votes.normalized("KX 472") == nil)
        #expect(votes.normalized("") == nil)
        #expect(throws: StageError.self) { try TextVotes(needed: 1, pattern: "[A-") }
    }
}

@Suite struct SizeFromFrameTests {
    @Test func paddleOCRsSizesForCommonFrames() throws {
        var input = ModelManifest.Input(width: 640, height: 352, colorOrder: .bgr, valueRange: [0, 1], layout: .nchw, resizable: true)
        #expect(input.sized(forFrameWidth: 1280, height: 720) == input, "no rule: the manifest's size")
        input.sizeFromFrame = .init(maxSide: 960, multiple: 32)
        func size(_ w: Int, _ h: Int) -> [Int] { let s = input.sized(forFrameWidth: w, height: h); return [s.width, s.height] }
        #expect(size(640, 360) == [640, 352])
        #expect(size(1280, 720) == [960, 544])
        #expect(size(1920, 1080) == [960, 544])
        #expect(size(360, 640) == [352, 640])
        #expect(size(20, 10) == [32, 32], "never under one multiple")
        let json = #"{"schema_version": 1, "name": "t", "model": "m.onnx", "input": {"width": 64, "height": 64, "color_order": "BGR", "value_range": [0, 1], "layout": "NCHW", "size_from_frame": {"max_side": 960, "multiple": 32}}, "decoder": {"name": "db", "parameters": {}}, "labels": ["text"], "licence": "x"}"#
        #expect(throws: StageError.self) { try ModelManifest.decode(Data(json.utf8), origin: "t") }
        let resizable = json.replacingOccurrences(of: #""layout": "NCHW","#, with: #""layout": "NCHW", "resizable": true,"#)
        #expect(try ModelManifest.decode(Data(resizable.utf8), origin: "t").input.sizeFromFrame == .init(maxSide: 960, multiple: 32))
    }
}
