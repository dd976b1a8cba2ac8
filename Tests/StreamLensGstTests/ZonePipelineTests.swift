import Foundation
import StreamLensCore
import StreamLensGst
import StreamLensStages
import Testing

/// A tracked object walking right: one region, id 1, 8 px further on every frame (a detector
/// and a tracker in one, for a pipeline without models).
final class WalkerStage: Stage {
    static let descriptor = StageDescriptor(name: "lenstestwalker", summary: "one tracked region walking right (test)", example: "", properties: [])
    init(settings: StageSettings) throws {}
    func process(_ frame: Frame) -> FrameOutcome {
        frame.pixels.addRegionOfInterest(RegionOfInterest(label: "walker", x: 20 + Double(frame.index) * 8, y: 100, width: 20, height: 40, objectId: 1))
        return .forward
    }
}

/// lenszone in a real pipeline: its events and zones travel on the buffers (the custom meta)
/// through lensoverlay to lensmetadata.
@Suite(.serialized) struct ZonePipelineTests {
    @Test func eventsAndZonesTravelOnTheBuffers() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-zones-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("z.jsonl").path
        try GStreamer.initialize(stages: builtinStages + [WalkerStage.self])
        // The walker's centre: 30 + 8i; it crosses x 160 between frames 16 and 17 and is in
        // "right" (x ≥ 200) from frame 22.
        let pipeline = try Pipeline(description: "videotestsrc num-buffers=30 ! video/x-raw,format=BGRx,width=320,height=240,framerate=30/1 ! lenstestwalker ! lenszone lines=mid:160,240,160,0 areas=right:200,0,320,0,320,240,200,240 ! lensoverlay ! lensmetadata location=\(path) ! fakesink")
        pipeline.log = { _ in }
        #expect(pipeline.run().exitCode == 0)
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        try #require(lines.count == 30)
        let events = lines.enumerated().flatMap { i, line in ((line["events"] as? [[String: Any]]) ?? []).map { (i, $0) } }
        #expect(events.map { "\($0.0) \($0.1["type"] as? String ?? "") \($0.1["zone"] as? String ?? "") \($0.1["direction"] as? String ?? "-")" }
                == ["17 crossed mid in", "22 entered right -"], "\(events)")
        for line in lines {
            let zones = try #require(line["zones"] as? [[String: Any]], "\(line)")
            #expect(zones.map { $0["name"] as? String } == ["mid", "right"])
        }
        let last = try #require(lines.last?["zones"] as? [[String: Any]])
        #expect(last[0]["counts"] as? [String: Int] == ["in": 1, "out": 0] && last[1]["counts"] as? [String: Int] == ["entered": 1, "left": 0, "inside": 1])
        let dwell = try #require((last[1]["dwell"] as? [String: Double])?["1"])
        #expect(abs(dwell - 7.0 / 30) < 0.01, "\(dwell)")
    }
}
