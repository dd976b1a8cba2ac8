import Foundation
import StreamLensCore
import StreamLensBackends
import StreamLensGst
import StreamLensStages
import Testing

/// A tracked object walking right: one region, id 1, 8 px further on every frame (a detector
/// and a tracker in one, for a pipeline without models).
final class WalkerStage: Stage {
    static let descriptor = StageDescriptor(name: "lenstestwalker", summary: "one tracked region walking right (test)", example: "", properties: [])
    init(settings: NoSettings) throws {}
    func process(_ frame: Frame) -> FrameOutcome {
        frame.pixels.addRegionOfInterest(RegionOfInterest(label: "walker", x: 20 + Double(frame.index) * 8, y: 100, width: 20, height: 40, objectId: 1))
        return .forward
    }
}

/// A stand-in tracker for a clip with one object: every region gets its index as its id.
final class IndexIdStage: Stage {
    static let descriptor = StageDescriptor(name: "lenstestindexid", summary: "ids regions by their index (test)", example: "", properties: [])
    init(settings: NoSettings) throws {}
    func process(_ frame: Frame) -> FrameOutcome {
        for (i, var region) in frame.pixels.regionsOfInterest().enumerated() {
            region.objectId = i
            frame.pixels.updateRegionOfInterest(region, at: i)
        }
        return .forward
    }
}

private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// lenszone in a real pipeline: its events and zones travel on the buffers (the custom meta)
/// through lensoverlay to lensmetadata.
@Suite(.serialized) struct ZonePipelineTests {
    @Test func eventsAndZonesTravelOnTheBuffers() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-zones-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("z.jsonl").path
        StandardBackends.register() // lensdetect's models run on OpenVINO
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

    /// CLITests' lenstrack test (ZoneStagesTests) with a stand-in for the tracker: the astronaut's
    /// face found by lensdetect on every frame of a clip where it moves right across the frame.
    @Test func aDetectedFaceCrossesTheLineOnce() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-zoneface-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = dir.appendingPathComponent("cross.mp4").path, path = dir.appendingPathComponent("z.jsonl").path
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x505050:s=640x360:r=30:d=3", "-loop", "1",
                            "-i", packageRoot.appendingPathComponent(".deps/media/astronaut.png").path, "-filter_complex",
                            "[1]crop=200:200:125:28,scale=160:160[a];[0][a]overlay=x='-20+500*t/3':y=100:shortest=1,format=yuv420p",
                            "-frames:v", "90", "-c:v", "libx264", "-preset", "veryfast", clip]
        try ffmpeg.run()
        ffmpeg.waitUntilExit()
        try #require(ffmpeg.terminationStatus == 0)
        StandardBackends.register() // lensdetect's models run on OpenVINO
        try GStreamer.initialize(stages: builtinStages + [IndexIdStage.self])
        let model = packageRoot.appendingPathComponent("Models/face-full-range.json").path
        let pipeline = try Pipeline(description: "filesrc location=\(clip) ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! lensdetect model=\(model) threshold=0.5 draw=false ! lenstestindexid ! lenszone lines=mid:320,360,320,0 areas=\"pass:200,0,300,0,300,360,200,360;right:320,0,640,0,640,360,320,360\" ! lensmetadata location=\(path) ! fakesink")
        var log: [String] = []
        pipeline.log = { log.append($0) }
        // The model compiles while the pipeline prerolls: under a sanitizer on a busy machine that
        // took more than the 20 s default (a bound for a stuck start, not a schedule).
        var options = Pipeline.Options()
        options.startTimeout = 300
        #expect(pipeline.run(options).exitCode == 0, "\(log)")
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        try #require(lines.count == 90)
        let events = lines.flatMap { ($0["events"] as? [[String: Any]]) ?? [] }
        #expect(events.map { "\($0["zone"] as? String ?? "") \($0["type"] as? String ?? "") \($0["direction"] as? String ?? "")" }
                == ["pass entered ", "pass left ", "mid crossed in", "right entered "], "\(events)")
        let start = try #require(lines.first?["time"] as? Double)
        let crossed = try #require(events.first { $0["type"] as? String == "crossed" }?["time"] as? Double)
        #expect(abs(crossed - start - 1.56) < 0.2, "\(crossed) (first frame \(start))")
        let dwell = try #require(events.first { $0["type"] as? String == "left" }?["dwell"] as? Double)
        #expect(abs(dwell - 0.6) < 0.2, "\(dwell)")
        #expect(log.contains { $0.contains("mid in 1 out 0, pass entered 1 left 1 inside 0, right entered 1 left 0 inside 1") }, "\(log)")
    }
}
