import Foundation
import Testing
@testable import StreamLensCore

/// Masks as part of regions: ObjectMask's sampling, cropping, blending and COCO run lengths;
/// the segmentation decoder on maps whose answer is known; OutlineRaster's outline and feathered
/// edge.
struct MaskTests {
    /// A mask whose left half is the object.
    static let half = ObjectMask(width: 4, height: 2, values: [255, 255, 0, 0, 255, 255, 0, 0])!

    @Test func runLengthsAreCOCOsColumnMajorAndReadBack() throws {
        // Columns 0, 1 inside (2 pixels each), columns 2, 3 outside: starts with an empty outside run.
        #expect(Self.half.runLengths == [0, 4, 4])
        let back = try #require(ObjectMask(width: 4, height: 2, runLengths: [0, 4, 4]))
        #expect(back == Self.half)
        // A lone pixel at (x 1, y 0) of a 3×2 mask: column-major index 2.
        let one = try #require(ObjectMask(width: 3, height: 2, values: [0, 200, 0, 0, 0, 0]))
        #expect(one.runLengths == [2, 1, 3])
        #expect(ObjectMask(width: 3, height: 2, runLengths: [2, 1, 3])?.values == [0, 255, 0, 0, 0, 0])
        // Runs that do not add up, negative ones, sizes out of bounds: no mask.
        #expect(ObjectMask(width: 3, height: 2, runLengths: [2, 1]) == nil)
        #expect(ObjectMask(width: 3, height: 2, runLengths: [7, -1]) == nil)
        #expect(ObjectMask(width: 0, height: 2, values: []) == nil)
        #expect(ObjectMask(width: 2, height: 2, values: [1, 2, 3]) == nil)
        #expect(ObjectMask(width: ObjectMask.maxSide + 1, height: 1, values: [UInt8](repeating: 0, count: ObjectMask.maxSide + 1)) == nil)
    }

    @Test func coverageIsBilinearBetweenPixelCentres() {
        #expect(Self.half.coverage(u: 0.125, v: 0.5) == 1)   // column 0's centre
        #expect(Self.half.coverage(u: 0.5, v: 0.5) == 0.5)   // between columns 1 and 2
        #expect(Self.half.coverage(u: 0.875, v: 0.25) == 0)
        #expect(Self.half.coverage(u: -3, v: 9) == 1)        // outside: the edge's
    }

    @Test func croppingToAClampedBoxKeepsTheOutlineInPlace() throws {
        // The mask covers x 0…40; the frame ends at 20: the kept half is all object.
        let box = Box(xMin: 0, yMin: 0, xMax: 40, yMax: 10)
        let cropped = try #require(Self.half.cropped(from: box, to: Box(xMin: 0, yMin: 0, xMax: 16, yMax: 10)))
        #expect(cropped.width == 2 && cropped.height == 2)
        #expect(cropped.values.allSatisfy { $0 == 255 })
        #expect(Self.half.cropped(from: box, to: box) == Self.half)
        #expect(Self.half.cropped(from: box, to: Box(xMin: 5, yMin: 5, xMax: 5, yMax: 9)) == nil)
    }

    @Test func blendingAveragesOverTheUnionOfTheBoxes() throws {
        let full = ObjectMask(width: 2, height: 2, values: [255, 255, 255, 255])!
        // This frame's object at x 10…20, the earlier one at x 0…10: the union, half each side.
        let (box, mask) = full.blended(over: Box(xMin: 10, yMin: 0, xMax: 20, yMax: 10), with: full,
                                       over: Box(xMin: 0, yMin: 0, xMax: 10, yMax: 10), weight: 0.5)
        #expect(box == Box(xMin: 0, yMin: 0, xMax: 20, yMax: 10))
        #expect(mask.width == 4 && mask.height == 2)
        #expect(mask.values == [128, 128, 128, 128, 128, 128, 128, 128])
        let (_, same) = full.blended(over: Box(xMin: 0, yMin: 0, xMax: 10, yMax: 10), with: Self.half,
                                     over: Box(xMin: 0, yMin: 0, xMax: 10, yMax: 10), weight: 1)
        #expect(same == full)
        // What has faded away is cut off: the union's right half only, where this frame's is.
        let faded = ObjectMask(width: 4, height: 2, values: [0, 0, 200, 200, 0, 0, 200, 200])!
        let (box2, cut) = try #require(faded.trimmed(over: Box(xMin: 0, yMin: 0, xMax: 40, yMax: 10)))
        #expect(box2 == Box(xMin: 10, yMin: 0, xMax: 40, yMax: 10) && cut.width == 3 && cut.values == [0, 200, 200, 0, 200, 200])
        #expect(ObjectMask(width: 2, height: 1, values: [1, 2])!.trimmed(over: Box(xMin: 0, yMin: 0, xMax: 2, yMax: 1)) == nil)
    }

    static func decoder(_ parameters: String, labels: [String], shape: [Int]) throws -> SegmentationDecoder {
        let options = try JSONDecoder().decode(SegmentationDecoderOptions.self, from: Data(parameters.utf8))
        let input = try JSONDecoder().decode(ModelManifest.Input.self, from: Data(#"{"width": 8, "height": 4, "color_order": "RGB", "value_range": [0, 1], "layout": "NHWC"}"#.utf8))
        var d = try #require(try options.makeDecoder(input: input, classes: try DetectionClasses(labels: labels)) as? SegmentationDecoder)
        _ = try d.bind([ModelOutput(name: "map", shape: shape)])
        return d
    }

    @Test func aProbabilityMapBecomesOneRegionWithItsMask() throws {
        // 8×4: the object where x is 2…4 and y is 1…2.
        var map = [Float](repeating: 0.1, count: 32)
        for y in 1...2 { for x in 2...4 { map[y * 8 + x] = 0.9 } }
        map[0] = .nan   // garbage is no object
        let d = try Self.decoder("{}", labels: ["person"], shape: [1, 4, 8, 1])
        let found = map.withUnsafeBufferPointer { d.decode([$0]) }
        try #require(found.count == 1)
        let p = found[0]
        #expect(p.label == "person" && p.labelId == 0 && abs(p.score - 0.9) < 0.01)
        // The class's pixels and one more each side, in 0…1 of the input.
        #expect(p.box == Box(xMin: 1.0 / 8, yMin: 0, xMax: 6.0 / 8, yMax: 1))
        let mask = try #require(p.mask)
        #expect(mask.width == 5 && mask.height == 4)
        for y in 0..<4 { for x in 0..<5 { #expect(mask.contains(x, y) == ((1...3).contains(x) && (1...2).contains(y)), "\(x),\(y)") } }
        // Nothing above the threshold: no region.
        let none = [Float](repeating: 0.2, count: 32).withUnsafeBufferPointer { d.decode([$0]) }
        #expect(none.isEmpty)
        // Logits: the same after a sigmoid.
        let logits = try Self.decoder(#"{"values": "logits"}"#, labels: ["person"], shape: [1, 4, 8, 1])
        let fromLogits = map.map { $0 > 0.5 ? Float(3) : Float(-3) }.withUnsafeBufferPointer { logits.decode([$0]) }
        #expect(fromLogits.count == 1 && fromLogits[0].box == p.box)
    }

    @Test func classScoresGiveARegionPerClassPresentButTheBackground() throws {
        // NCHW, 3 classes over 8×4: class 1 on the left half, class 2 on the right, 0 nowhere.
        var map = [Float](repeating: 0, count: 3 * 32)
        for y in 0..<4 { for x in 0..<8 { map[(x < 4 ? 1 : 2) * 32 + y * 8 + x] = 5 } }
        let d = try Self.decoder(#"{"layout": "NCHW", "background_classes": [0]}"#, labels: ["background", "cat", "dog"], shape: [1, 3, 4, 8])
        let found = map.withUnsafeBufferPointer { d.decode([$0]) }
        #expect(found.map(\.label) == ["cat", "dog"])
        #expect(found[0].box == Box(xMin: 0, yMin: 0, xMax: 5.0 / 8, yMax: 1) && found[1].box == Box(xMin: 3.0 / 8, yMin: 0, xMax: 1, yMax: 1))
        #expect(found[0].mask?.contains(3, 0) == true && found[0].mask?.contains(4, 0) == false)
        #expect(abs(found[0].score - 0.5) < 1e-9)
        // Class ids per pixel, one channel.
        let ids = try Self.decoder(#"{"values": "class_ids"}"#, labels: ["a", "b"], shape: [1, 4, 8])
        let two = (0..<32).map { Float($0 % 8 < 2 ? 1 : 0) }.withUnsafeBufferPointer { ids.decode([$0]) }
        #expect(two.map(\.label) == ["a", "b"])
    }

    @Test func mapsThatDoNotFitAreRefusedWithTheirShape() throws {
        #expect(throws: StageError.self) { try Self.decoder(#"{"values": "class_scores"}"#, labels: ["a"], shape: [1, 4, 8, 1]) }
        #expect(throws: StageError.self) { try Self.decoder(#"{"values": "probability"}"#, labels: ["a", "b"], shape: [1, 4, 8, 2]) }
        #expect(throws: StageError.self) { try Self.decoder("{}", labels: ["a"], shape: [1, 0, 8, 1]) }
        #expect(throws: StageError.self) { try Self.decoder("{}", labels: ["a"], shape: [1, 5000, 8, 1]) }
        #expect(throws: StageError.self) { try Self.decoder(#"{"layout": "CHW"}"#, labels: ["a"], shape: [1, 4, 8, 1]) }
        #expect(throws: StageError.self) { try Self.decoder(#"{"min_area": 2}"#, labels: ["a"], shape: [1, 4, 8, 1]) }
    }

    @Test func anOutlineIsDrawnAndFeathered() {
        var r = OutlineRaster(width: 20, height: 10)
        // The half mask over x 4…12, y 2…6: the object is x 4…8.
        r.add(box: Box(xMin: 4, yMin: 2, xMax: 12, yMax: 6), mask: Self.half)
        #expect(r.x0 == 4 && r.x1 == 12 && r.y0 == 2 && r.y1 == 6)
        let row = Array(r.weights[(3 * 20)..<(4 * 20)])
        #expect(row[3] == 0 && row[4] == 255 && row[7] == 255 && row[8] == 0, "\(row)")
        // A box without a mask: the box.
        r.add(box: Box(xMin: 15, yMin: 0, xMax: 17, yMax: 1), mask: nil)
        #expect(r.weights[15] == 255 && r.weights[16] == 255 && r.weights[17] == 0)
        var soft = r
        soft.feather(4)
        let ramp = Array(soft.weights[(3 * 20)..<(3 * 20 + 12)])
        // Rising across the left edge (between x 3 and 4), falling across the right (7, 8);
        // nothing beyond half the feather from the outline.
        #expect(ramp[1] == 0 && ramp[2] < ramp[3] && ramp[3] < ramp[4] && ramp[4] < ramp[5], "\(ramp)")
        #expect(ramp[9] < ramp[8] && ramp[8] < ramp[7] && ramp[10] == 0, "\(ramp)")
        #expect(ramp[2] == ramp[9] && ramp[3] == ramp[8] && ramp[4] == ramp[7], "\(ramp)") // symmetric about the object
        // Not a number, empty boxes: nothing drawn.
        var nothing = OutlineRaster(width: 4, height: 4)
        nothing.add(box: Box(xMin: .nan, yMin: 0, xMax: 2, yMax: 2), mask: nil)
        nothing.add(box: Box(xMin: 1, yMin: 1, xMax: 1, yMax: 3), mask: Self.half)
        #expect(nothing.isEmpty && nothing.weights.allSatisfy { $0 == 0 })
    }
}
