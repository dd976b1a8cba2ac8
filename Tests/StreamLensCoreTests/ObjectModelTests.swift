import Foundation
import Testing
@testable import StreamLensCore

/// Second models' parts: where a region's crop lies, how it is sampled, and what the decoders
/// make of a model's numbers.
@Suite struct ObjectCropTests {
    static func face(_ x: Double, _ y: Double, _ w: Double, _ h: Double, eyes: (Point, Point)? = nil) -> RegionOfInterest {
        RegionOfInterest(label: "face", x: x, y: y, width: w, height: h, keypoints: eyes.map { [$0.0, $0.1] } ?? [])
    }

    @Test func squareScaledAroundTheCentre() throws {
        let crop = ObjectCrop(mode: .square, scale: 1.5)
        let p = try #require(crop.placement(of: Self.face(100, 50, 40, 80), inputWidth: 192, inputHeight: 192))
        #expect(p == .init(centerX: 120, centerY: 90, width: 120, height: 120, rotation: 0))
        let corner = p.frame(0, 0)
        #expect(abs(corner.x - 60) < 1e-9 && abs(corner.y - 30) < 1e-9)
    }

    @Test func keepAspectGrowsTheShortSide() throws {
        let p = try #require(ObjectCrop(mode: .keepAspect).placement(of: Self.face(0, 0, 40, 40), inputWidth: 200, inputHeight: 100))
        #expect(p.width == 80 && p.height == 40)
    }

    @Test func rotationTurnsTheEyeLineLevel() throws {
        // Eyes on a line going down to the right at 30°: the crop turns by +30° (clockwise on
        // the screen), so the crop's x axis runs along the eye line.
        let a = Point(x: 100, y: 100), b = Point(x: 100 + 40 * cos(.pi / 6), y: 100 + 40 * sin(.pi / 6))
        let crop = ObjectCrop(mode: .square, scale: 1, rotationKeypoints: [0, 1])
        let p = try #require(crop.placement(of: Self.face(80, 80, 60, 60, eyes: (a, b)), inputWidth: 192, inputHeight: 192))
        #expect(abs(p.rotation - .pi / 6) < 1e-9, "\(p.rotation)")
        let left = p.frame(0.25, 0.5), right = p.frame(0.75, 0.5)
        #expect(abs(atan2(right.y - left.y, right.x - left.x) - .pi / 6) < 1e-9)
        #expect(crop.placement(of: Self.face(80, 80, 60, 60), inputWidth: 192, inputHeight: 192) == nil, "rotated without keypoints")
    }

    @Test func samplingAnUnturnedCropCopiesPixels() {
        // A 8x4 RGB frame whose pixel (x, y) is (10x, 10y, 7); the crop of its 4x2 block at (2, 1).
        let (w, h) = (8, 4)
        var frame: [UInt8] = []
        for i in 0..<(w * h) { frame += [UInt8(10 * (i % w)), UInt8(10 * (i / w)), 7] }
        let placement = ObjectCrop.Placement(centerX: 4, centerY: 2, width: 4, height: 2, rotation: 0)
        var out: [UInt8] = []
        frame.withUnsafeBytes {
            CropSampling.sample($0, .init(width: w, height: h, stride: w * 3, pixelFormat: "RGB"), placement: placement,
                                outWidth: 4, outHeight: 2, gray: false, into: &out)
        }
        #expect(out == [20, 10, 7, 30, 10, 7, 40, 10, 7, 50, 10, 7, 20, 20, 7, 30, 20, 7, 40, 20, 7, 50, 20, 7], "\(out)")
        // BGRx: the same picture, red read from byte 2; grey with OpenCV's weights.
        var bgrx: [UInt8] = []
        for i in 0..<(w * h) { bgrx += [7, UInt8(10 * (i / w)), UInt8(10 * (i % w)), 255] }
        var grey: [UInt8] = []
        bgrx.withUnsafeBytes {
            CropSampling.sample($0, .init(width: w, height: h, stride: w * 4, pixelFormat: "BGRx"), placement: placement,
                                outWidth: 4, outHeight: 2, gray: true, into: &grey)
        }
        let expected: Double = 0.299 * 20 + 0.587 * 10 + 0.114 * 7
        #expect(grey[0] == UInt8(expected.rounded()), "\(grey)")
    }
}

@Suite struct RegionDecoderTests {
    static func manifest(_ json: String) throws -> ModelManifest {
        try ModelManifest.decode(Data(json.utf8), origin: "test")
    }
    static let input = #""input": {"width": 64, "height": 32, "color_order": "GRAY", "value_range": [-1, 1], "layout": "NHWC"}"#

    @Test func classifierTakesTheBestClassAfterSoftmax() throws {
        let m = try Self.manifest(#"{"schema_version": 1, "name": "c", "model": "m.tflite", \#(Self.input), "decoder": {"name": "classifier", "parameters": {"attribute": "mood", "activation": "softmax"}}, "labels": ["a", "b", "c"], "licence": "x"}"#)
        let decoder = try #require(m.decoder.region).makeDecoder(input: m.input, labels: m.labels)
        #expect(try decoder.bind([ModelOutput(name: "x", shape: [1, 4]), ModelOutput(name: "y", shape: [1, 3])]) == [1])
        let scores: [Float] = [0, 2, 1]
        let result = scores.withUnsafeBufferPointer { decoder.decode([$0]) }
        guard case .classification(let c) = result else { Issue.record("\(result)"); return }
        let expected = exp(2.0) / (exp(0.0) + exp(2.0) + exp(1.0))
        #expect(c.name == "mood" && c.label == "b" && c.labelId == 1 && abs(c.confidence - expected) < 1e-6)
    }

    @Test func landmarksInCropUnitsAndPresence() throws {
        let m = try Self.manifest(#"{"schema_version": 1, "name": "l", "model": "m.tflite", \#(Self.input.replacingOccurrences(of: "GRAY", with: "RGB")), "decoder": {"name": "landmarks", "parameters": {"count": 2, "values_per_point": 3, "presence_output": "p", "presence": "logit"}}, "licence": "x"}"#)
        let decoder = try #require(m.decoder.region).makeDecoder(input: m.input, labels: [])
        #expect(try decoder.bind([ModelOutput(name: "p", shape: [1, 1]), ModelOutput(name: "pts", shape: [1, 6])]) == [1, 0])
        let points: [Float] = [32, 16, 6.4, 0, 32, -3.2], logit: [Float] = [3]
        let result = points.withUnsafeBufferPointer { p in logit.withUnsafeBufferPointer { decoder.decode([p, $0]) } }
        guard case .landmarks(_, let pts?, let presence?) = result else { Issue.record("\(result)"); return }
        let expected: [[Double]] = [[0.5, 0.5, 0.1], [0, 1, -0.05]]
        #expect(pts.count == 2 && zip(pts.joined(), expected.joined()).allSatisfy { abs($0 - $1) < 1e-6 }, "\(pts)")
        #expect(abs(presence - 1 / (1 + exp(-3.0))) < 1e-6)
        let absent: [Float] = [-3]
        let none = points.withUnsafeBufferPointer { p in absent.withUnsafeBufferPointer { decoder.decode([p, $0]) } }
        guard case .landmarks(_, nil, _) = none else { Issue.record("points written though the model says no object: \(none)"); return }
    }

    @Test func manifestsAreCheckedForWhereTheirPartsBelong() throws {
        #expect(throws: StageError("model manifest test: a classifier needs its labels (labels or labels_file)")) {
            try Self.manifest(#"{"schema_version": 1, "name": "c", "model": "m.tflite", \#(Self.input), "decoder": {"name": "classifier", "parameters": {"attribute": "mood"}}, "licence": "x"}"#)
        }
        #expect(throws: StageError("model manifest test: input color_order GRAY is for second models (decoders classifier, landmarks, ctc)")) {
            try Self.manifest(#"{"schema_version": 1, "name": "d", "model": "m.onnx", \#(Self.input), "decoder": {"name": "yolov8", "parameters": {}}, "labels": ["a"], "licence": "x"}"#)
        }
        #expect(throws: StageError("model manifest test: object_crop.rotation_keypoints must be two different keypoint indices, got [1, 1]")) {
            try Self.manifest(#"{"schema_version": 1, "name": "c", "model": "m.tflite", \#(Self.input), "object_crop": {"rotation_keypoints": [1, 1]}, "decoder": {"name": "classifier", "parameters": {"attribute": "mood"}}, "labels": ["a"], "licence": "x"}"#)
        }
    }
}
