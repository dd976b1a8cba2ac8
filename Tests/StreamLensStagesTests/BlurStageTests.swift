import Foundation
import StreamLensCore
import StreamLensStages
import StreamLensTesting
import Testing

/// lensblur on in-memory frames: which pixels change, and how long an object that stops
/// arriving stays hidden.
@Suite(.serialized) struct BlurStageTests {
    static let (w, h) = (96, 48)
    /// A checkerboard of single pixels: any blur or block changes every pixel.
    static let board: [UInt8] = (0..<(w * h)).flatMap { i -> [UInt8] in
        let (x, y) = (i % w, i / w)
        return (x + y) % 2 == 0 ? [200, 200, 200] : [20, 20, 20]
    }
    static func changed(_ out: [UInt8], x0: Int, x1: Int, y0: Int, y1: Int) -> Int {
        var n = 0
        for y in y0..<y1 { for x in x0..<x1 { let i = (y * w + x) * 3; if out[i] != board[i] { n += 1 } } }
        return n
    }
    static func face(x: Double, id: Int) -> RegionOfInterest {
        RegionOfInterest(label: "face", labelId: 0, x: x, y: 10, width: 12, height: 12, confidence: 0.9, objectId: id)
    }

    @Test func onlyTheRegionChangesAndFillIsSolid() throws {
        for method in ["pixelate", "gaussian", "fill"] {
            let driver = try StageDriver(BlurStage.self, settings: ["method": .string(method), "margin": .double(0), "color": .string("#0000ff")])
            try driver.start(.packed("RGB", width: Self.w, height: Self.h))
            let out = try #require(driver.push(Self.board, regions: [Self.face(x: 20, id: -1)]).first).pixels.bytes
            #expect(Self.changed(out, x0: 0, x1: Self.w, y0: 0, y1: Self.h) == Self.changed(out, x0: 20, x1: 32, y0: 10, y1: 22), "\(method) changed pixels outside the box")
            #expect(Self.changed(out, x0: 20, x1: 32, y0: 10, y1: 22) > 100, "\(method) left the box as it was")
            if method == "fill" { #expect(Array(out[((15 * Self.w + 25) * 3)..<((15 * Self.w + 25) * 3 + 3)]) == [0, 0, 255]) }
        }
    }

    @Test func anObjectThatStopsArrivingStaysHiddenForHoldFramesAtItsVelocity() throws {
        let driver = try StageDriver(BlurStage.self, settings: ["margin": .double(0), "hold": .int(4)])
        try driver.start(.packed("RGB", width: Self.w, height: Self.h))
        for n in 0..<5 { _ = driver.push(Self.board, regions: [Self.face(x: 10 + 3 * Double(n), id: 7)]) } // 3 px a frame
        for n in 5..<12 {
            let out = try #require(driver.push(Self.board).first).pixels.bytes
            let x = 10 + 3 * n   // where it would be now
            let inside = Self.changed(out, x0: x + 1, x1: x + 11, y0: 11, y1: 21)
            if n - 4 <= 4 {
                #expect(inside == 100, "frame \(n), \(n - 4) frames after the last sighting: \(inside) of 100 pixels hidden at x \(x)")
            } else {
                #expect(Self.changed(out, x0: 0, x1: Self.w, y0: 0, y1: Self.h) == 0, "frame \(n): still hiding after hold")
            }
        }
        // An untracked region held where it was, then released.
        let untracked = try StageDriver(BlurStage.self, settings: ["margin": .double(0), "hold": .int(2)])
        try untracked.start(.packed("RGB", width: Self.w, height: Self.h))
        _ = untracked.push(Self.board, regions: [Self.face(x: 40, id: -1)])
        let counts = try (0..<4).map { _ in Self.changed(try #require(untracked.push(Self.board).first).pixels.bytes, x0: 40, x1: 52, y0: 10, y1: 22) }
        #expect(counts[0] > 100 && counts[1] > 100 && counts[2] == 0 && counts[3] == 0, "\(counts)")
    }

    @Test func labelsChooseWhatIsHidden() throws {
        let driver = try StageDriver(BlurStage.self, settings: ["labels": .string("plate"), "margin": .double(0)])
        try driver.start(.packed("RGB", width: Self.w, height: Self.h))
        var plate = Self.face(x: 60, id: -1)
        plate.label = "plate"
        let out = try #require(driver.push(Self.board, regions: [Self.face(x: 20, id: -1), plate]).first).pixels.bytes
        #expect(Self.changed(out, x0: 20, x1: 32, y0: 10, y1: 22) == 0 && Self.changed(out, x0: 60, x1: 72, y0: 10, y1: 22) > 100)
    }
}
