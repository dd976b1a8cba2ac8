import Foundation
import StreamLensCore
import StreamLensStages
import StreamLensTesting
import Testing

/// lenstrack on in-memory frames: ids written on the regions, held boxes moved, missed tracks
/// reported predicted.
@Suite(.serialized) struct TrackStageTests {
    static let format = VideoFormat.packed("RGB", width: 320, height: 240)
    static let blank = [UInt8](repeating: 0, count: 320 * 240 * 3)
    static func face(_ x: Double, estimate: RegionOfInterest.Estimate? = nil) -> RegionOfInterest {
        RegionOfInterest(label: "face", labelId: 0, x: x, y: 50, width: 40, height: 40, confidence: 0.9, estimate: estimate)
    }

    @Test func heldBoxesMoveAndMissedTracksArePredicted() throws {
        let driver = try StageDriver(TrackStage.self)
        try driver.start(Self.format)
        var last = RegionOfInterest(label: "", x: 0, y: 0, width: 0, height: 0)
        for n in 0..<12 {   // the detector every 2nd frame, the face moving 4 px a frame
            let measured = n % 2 == 0
            let x = measured ? 20 + 4 * Double(n) : 20 + 4 * Double(n - 1)
            let out = try #require(driver.push(Self.blank, regions: [Self.face(x, estimate: measured ? nil : .held)]).first)
            let r = try #require(out.pixels.regions.first)
            if n >= 4 { #expect(r.objectId == 1, "frame \(n): id \(r.objectId)") }
            if !measured && n >= 5 {
                #expect(r.estimate == .predicted && abs(r.x - (20 + 4 * Double(n))) < 2, "frame \(n): held box at \(r.x), \(String(describing: r.estimate))")
            }
            if measured { #expect(r.estimate == nil && r.x == x, "a measured box was changed") }
            last = r
        }
        // The detector stops finding it: reported at its predicted place, marked so, same id.
        for k in 1...3 {
            let out = try #require(driver.push(Self.blank, regions: []).first)
            let r = try #require(out.pixels.regions.first, "no predicted region \(k) frames after the last detection")
            #expect(r.objectId == last.objectId && r.estimate == .predicted && r.x > last.x)
        }
        #expect(driver.stage.summary?.contains("1 ids given") == true, "\(driver.stage.summary ?? "")")
    }

    @Test func badSettingsAreNamed() {
        #expect(throws: StageError("property low-score=0.8 is above high-score=0.5")) {
            _ = try StageDriver(TrackStage.self, settings: ["low-score": .double(0.8)])
        }
        #expect(throws: StageError("property tracker=sort is not one of bytetrack, iou")) {
            _ = try StageDriver(TrackStage.self, settings: ["tracker": .string("sort")])
        }
    }

    /// tracker=iou: a face that stays put gets one id after min-hits; a frame the detector
    /// skipped keeps its box where it was, and a missed frame reports it there.
    @Test func theIoUTrackerKeepsAStillFacesId() throws {
        let driver = try StageDriver(TrackStage.self, settings: ["tracker": .string("iou")])
        try driver.start(Self.format)
        var ids: [Int] = []
        for n in 0..<8 {
            // Frame 5 the detector skipped: its box is frame 4's again, marked held.
            let x = n == 5 ? 100 : 100 + Double(n % 2)
            let out = try #require(driver.push(Self.blank, regions: [Self.face(x, estimate: n == 5 ? .held : nil)]).first)
            let r = try #require(out.pixels.regions.first)
            ids.append(r.objectId)
            if n == 5 { #expect(r.x == 100 && r.estimate == .predicted, "held box at \(r.x)") }
        }
        #expect(ids == [-1, -1, 1, 1, 1, 1, 1, 1], "\(ids)")
        let missed = try #require(driver.push(Self.blank, regions: []).first?.pixels.regions.first)
        #expect(missed.objectId == 1 && missed.x == 101 && missed.estimate == .predicted)
        #expect(driver.stage.summary?.contains("1 ids given") == true, "\(driver.stage.summary ?? "")")
    }
}
