import Foundation
import Testing
@testable import StreamLensCore

/// A second model's mask: the crop made from two keypoints (`alignment-points`, BlazePose's body
/// crop), the `landmarks` decoder's `mask_output`, and the crop's mask mapped back onto the frame.
@Suite struct CropMaskTests {
    /// A person region: the face's box, a hip centre and a full-body point.
    static func person(hip: Point, top: Point) -> RegionOfInterest {
        RegionOfInterest(label: "person", x: 90, y: 10, width: 20, height: 20, keypoints: [hip, top])
    }

    @Test func alignmentPointsCentreTheSquareOnTheFirstPoint() throws {
        let crop = ObjectCrop(mode: .alignmentPoints, scale: 1.25, rotationKeypoints: [0, 1], targetAngle: 90)
        // Upright: the full-body point straight above the hip, 100 px: a 250 px square, no turn.
        let upright = try #require(crop.placement(of: Self.person(hip: Point(x: 100, y: 200), top: Point(x: 100, y: 100)), inputWidth: 256, inputHeight: 256))
        #expect(upright == .init(centerX: 100, centerY: 200, width: 250, height: 250, rotation: 0))
        // Leaning right by 30°: turned by +30° (the body's line becomes the crop's vertical).
        let lean = Point(x: 100 + 100 * sin(.pi / 6), y: 200 - 100 * cos(.pi / 6))
        let turned = try #require(crop.placement(of: Self.person(hip: Point(x: 100, y: 200), top: lean), inputWidth: 256, inputHeight: 256))
        #expect(abs(turned.rotation - .pi / 6) < 1e-9 && abs(turned.width - 250) < 1e-9, "\(turned)")
        let head = turned.frame(0.5, 0.1)
        #expect(abs(atan2(head.x - 100, 200 - head.y) - .pi / 6) < 1e-9, "the crop's up is the body's: \(head)")
        #expect(crop.placement(of: RegionOfInterest(label: "person", x: 0, y: 0, width: 9, height: 9), inputWidth: 256, inputHeight: 256) == nil)
        #expect(throws: StageError("object_crop.mode alignment-points needs rotation_keypoints (the crop's centre, and the point that sets its size and turn)")) {
            try ObjectCrop(mode: .alignmentPoints).validate()
        }
    }

    @Test func cropIsFramesInverseAndTheEnclosingBoxHoldsTheTurnedSquare() {
        let p = ObjectCrop.Placement(centerX: 50, centerY: 40, width: 20, height: 20, rotation: .pi / 4)
        for (u, v) in [(0.0, 0.0), (0.3, 0.9), (1.0, 0.5)] {
            let back = p.crop(p.frame(u, v))
            #expect(abs(back.x - u) < 1e-12 && abs(back.y - v) < 1e-12)
        }
        let half = 10 * 2.0.squareRoot()
        let box = p.enclosingBox
        #expect(abs(box.xMin - (50 - half)) < 1e-9 && abs(box.xMax - (50 + half)) < 1e-9 && abs(box.yMin - (40 - half)) < 1e-9 && abs(box.yMax - (40 + half)) < 1e-9)
    }

    @Test func theCropsMaskLandsWhereTheCropWasAndIsZeroOutsideIt() throws {
        // A crop mask whose left half is the object, on a square turned by 90° (its left is the
        // frame's top), over a box twice the crop's size around it.
        let n = 8
        let left = try #require(ObjectMask(width: n, height: n, values: (0..<(n * n)).map { $0 % n < n / 2 ? 255 : 0 }))
        let p = ObjectCrop.Placement(centerX: 20, centerY: 20, width: 8, height: 8, rotation: .pi / 2)
        let box = Box(xMin: 12, yMin: 12, xMax: 28, yMax: 28)
        let m = try #require(p.frameMask(left, over: box))
        #expect(m.width == 16 && m.height == 16, "one pixel a frame pixel at most: \(m.width)x\(m.height)")
        func at(_ x: Double, _ y: Double) -> Bool { m.contains(Int(x - box.xMin), Int(y - box.yMin)) }
        #expect(at(20, 17) && at(18, 17) && at(22, 17), "the crop's left half, turned, is the frame's top half of the crop")
        #expect(!at(20, 23) && !at(18, 23), "the crop's right half")
        #expect(!at(13, 13) && !at(27, 13) && !at(20, 13), "outside the crop: 0")
        // A coarse mask over a large crop keeps its own density.
        let big = ObjectCrop.Placement(centerX: 500, centerY: 500, width: 1000, height: 1000, rotation: 0)
        let coarse = try #require(big.frameMask(left, over: Box(xMin: 0, yMin: 0, xMax: 1000, yMax: 500)))
        #expect(coarse.width == 8 && coarse.height == 4)
        #expect(p.frameMask(left, over: Box(xMin: 5, yMin: 5, xMax: 5, yMax: 9)) == nil)
    }

    static func decoder(mask: String) throws -> any RegionDecoder {
        let json = #"{"schema_version": 1, "name": "p", "model": "m.tflite", "input": {"width": 4, "height": 2, "color_order": "RGB", "value_range": [0, 1], "layout": "NHWC"}, "decoder": {"name": "landmarks", "parameters": {"count": 1, "values_per_point": 5, "output": "pts", "presence_output": "flag", "min_presence": 0.5, "mask_output": "seg"\#(mask)}}, "licence": "x"}"#
        let m = try ModelManifest.decode(Data(json.utf8), origin: "test")
        return try #require(m.decoder.region).makeDecoder(input: m.input, labels: [])
    }

    @Test func maskOutputIsBoundByTheInputsAspectAndSquashedWhenLogits() throws {
        let d = try Self.decoder(mask: #", "mask_values": "logits""#)
        // Two points of five in the named output, one taken; the mask at twice the input's size.
        #expect(try d.bind([ModelOutput(name: "seg", shape: [1, 4, 8, 1]), ModelOutput(name: "pts", shape: [1, 10]), ModelOutput(name: "flag", shape: [1, 1])]) == [1, 2, 0])
        #expect(throws: StageError.self) { try d.bind([ModelOutput(name: "seg", shape: [1, 4, 4, 1]), ModelOutput(name: "pts", shape: [1, 5]), ModelOutput(name: "flag", shape: [1, 1])]) }
        #expect(throws: StageError.self) { try d.bind([ModelOutput(name: "seg", shape: [1, 2, 4, 3]), ModelOutput(name: "pts", shape: [1, 5]), ModelOutput(name: "flag", shape: [1, 1])]) }
        let points: [Float] = [2, 1, 0.4, 9, 9], seen: [Float] = [0.9], unseen: [Float] = [0.1]
        let logits: [Float] = [-100, 0, 100, .nan] + [Float](repeating: 3, count: 28)
        let result = points.withUnsafeBufferPointer { p in seen.withUnsafeBufferPointer { f in logits.withUnsafeBufferPointer { d.decode([p, f, $0]) } } }
        guard case .masked(.landmarks(_, let pts?, let presence), let mask) = result else { Issue.record("\(result)"); return }
        #expect(pts.count == 1 && zip(pts[0], [0.5, 0.5, 0.1]).allSatisfy { abs($0 - $1) < 1e-6 } && abs((presence ?? 0) - 0.9) < 1e-6, "x, y, z of the five: \(pts)")
        #expect(mask.width == 8 && mask.height == 4 && Array(mask.values.prefix(5)) == [0, 128, 255, 0, 243], "\(mask.values.prefix(5))")
        // The model says nobody: neither points nor mask.
        let absent = points.withUnsafeBufferPointer { p in unseen.withUnsafeBufferPointer { f in logits.withUnsafeBufferPointer { d.decode([p, f, $0]) } } }
        guard case .landmarks(_, nil, _) = absent else { Issue.record("\(absent)"); return }
    }

    @Test func probabilitiesAreTakenAsTheyAre() throws {
        let d = try Self.decoder(mask: "")
        #expect(try d.bind([ModelOutput(name: "pts", shape: [1, 5]), ModelOutput(name: "flag", shape: [1]), ModelOutput(name: "seg", shape: [1, 1, 2, 4])]) == [0, 1, 2])
        let points: [Float] = [0, 0, 0, 0, 0], flag: [Float] = [1], probabilities: [Float] = [0, 0.5, 1, 2, -1, 0.25, 0.75, 1]
        let result = points.withUnsafeBufferPointer { p in flag.withUnsafeBufferPointer { f in probabilities.withUnsafeBufferPointer { d.decode([p, f, $0]) } } }
        guard case .masked(_, let mask) = result else { Issue.record("\(result)"); return }
        #expect(mask.width == 4 && mask.height == 2 && mask.values == [0, 128, 255, 255, 0, 64, 191, 255])
    }
}
