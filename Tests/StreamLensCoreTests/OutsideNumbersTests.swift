import Testing
@testable import StreamLensCore

/// Numbers from outside are checked where they enter (OutsideNumbers.swift): shapes count
/// without overflow, coordinates end bounded, so nothing after them can trap converting or
/// multiplying them.
struct OutsideNumbersTests {
    @Test func shapesCountWithoutOverflow() {
        #expect(TensorShape.elementCount([1, 896, 16]) == 14336)
        #expect(TensorShape.elementCount([]) == 1)
        #expect(TensorShape.elementCount([1, 0, 7]) == 0)
        #expect(TensorShape.elementCount([1, -7, 16]) == nil)
        #expect(TensorShape.elementCount([1, 3037000500, 3037000500, 16]) == nil, "3037000500² overflows 64 bits")
        #expect(TensorShape.elementCount([Int.max, 2]) == nil)
        #expect(TensorShape.elementCount([1, 896, 16], atMost: 14336) == 14336)
        #expect(TensorShape.elementCount([1, 896, 16], atMost: 14335) == nil)
    }

    /// The decoders' own shape checks (BlazeFace at load, SSD at bind) refuse what does not
    /// count, with a message, instead of trapping in the product.
    @Test func decodersRefuseShapesThatDoNotCount() throws {
        let decoder = try DecoderTests.shortRange()
        #expect(throws: StageError("the boxes output has shape [1, 3037000500, 3037000500, 16]: a negative dimension or more values than memory holds")) {
            try decoder.validate(boxesShape: [1, 3037000500, 3037000500, 16], scoresShape: [1, 896, 1])
        }
        #expect(throws: (any Error).self) { try decoder.resolveOutputs(names: ["a", "b"], shapes: [[1, 3037000500, 3037000500, 16], [-1, -896]]) }
    }

    @Test func pointsAreBoundedToTheFrameGrownByItsSize() throws {
        let bounds = FrameBounds(width: 320, height: 240)
        #expect(bounds.clamp(Point(x: 1e20, y: -1e300)) == Point(x: 640, y: -240))
        #expect(bounds.clamp(Point(x: .infinity, y: 10)) == Point(x: 640, y: 10))
        #expect(bounds.clamp(Point(x: -5, y: 250)) == Point(x: -5, y: 250), "an ear just past the edge keeps its place")
        #expect(bounds.clamp(Point(x: .nan, y: 0)) == nil)
        #expect(bounds.clamp(Box(xMin: -1e19, yMin: 10, xMax: 1e19, yMax: 20)) == Box(xMin: 0, yMin: 10, xMax: 320, yMax: 20))
    }

    @Test func regionsKeepTheirPlaceAndLoseOnlyWhatIsNotANumber() {
        let bounds = FrameBounds(width: 100, height: 50)
        var region = RegionOfInterest(label: "face", x: .nan, y: 10, width: 1e300, height: 5, confidence: .nan,
                                      keypoints: [Point(x: 1, y: 2), Point(x: .nan, y: 3)])
        region.landmarks = .init(name: "mesh", points: [[1e9, 1, -1e9], [2, 2, 2]])
        let r = bounds.clamp(region)
        #expect(r.box == Box(xMin: 0, yMin: 10, xMax: 0, yMax: 15), "x and x + width are not numbers: 0")
        #expect(bounds.clamp(RegionOfInterest(label: "", x: -1e300, y: 0, width: 1e300, height: 1e300)).box == Box(xMin: 0, yMin: 0, xMax: 0, yMax: 50))
        #expect(r.keypoints.isEmpty, "one keypoint that is not a number drops them all (their order is their meaning)")
        #expect(r.confidence == nil)
        #expect(r.landmarks?.points == [[200, 1, -200], [2, 2, 2]])
    }

    /// A server's keypoint of 1e20 (normalised) lands on the bound, not at 1.28e22 pixels.
    @Test func modelKeypointsAreBoundedOnTheWayToTheFrame() {
        let geometry = FrameGeometry(frameWidth: 320, frameHeight: 240, modelWidth: 128, modelHeight: 128, mode: .letterbox)
        let d = Detection(box: Box(xMin: 0.4, yMin: 0.4, xMax: 0.6, yMax: 0.6), score: 1,
                          keypoints: [Point(x: 1e20, y: 1e20), Point(x: -1e20, y: 0.5)])
        let f = geometry.toFrame(d)
        #expect(f.keypoints == [Point(x: 640, y: 480), Point(x: -320, y: 120)])
        #expect(f.box.xMin == 128 && f.box.xMax == 192)
    }

    @Test func zoneCoordinatesAreBounded() throws {
        #expect(throws: StageError("property lines: 'a:0,0,1e19,100': 1e19 is out of range (coordinates are within ±1000000)")) {
            try ZoneSyntax.lines("a:0,0,1e19,100")
        }
        #expect(throws: StageError("property areas: 'b:0,0,10,0,-1e300,5': -1e300 is out of range (coordinates are within ±1000000)")) {
            try ZoneSyntax.areas("b:0,0,10,0,-1e300,5")
        }
        #expect(try ZoneSyntax.lines("a:-1000000,0,1000000,100").count == 1)
    }
}
