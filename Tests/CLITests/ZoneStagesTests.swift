import Foundation
import Testing

/// lenszone through the built binary: a real face found by lensdetect, given an id by lenstrack,
/// counted at a line and in areas, written by lensmetadata; and its counts read over --control.
@Suite(.serialized) struct ZoneStagesTests {
    /// 90 frames at 30 fps on grey 640x360: the astronaut's face (a 200² crop scaled to 160², the
    /// face ~74 px, its centre 80 px right of the crop's left edge) moves right from x ≈ 60 to
    /// x ≈ 555, centred at y ≈ 180.
    static func crossingFaceClip(in dir: URL) throws -> String {
        let clip = dir.appendingPathComponent("cross.mp4").path
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x505050:s=640x360:r=30:d=3", "-loop", "1", "-i", DetectTests.astronaut,
                            "-filter_complex", "[1]crop=200:200:125:28,scale=160:160[a];[0][a]overlay=x='-20+500*t/3':y=100:shortest=1,format=yuv420p",
                            "-frames:v", "90", "-c:v", "libx264", "-preset", "veryfast", clip]
        try ffmpeg.run()
        ffmpeg.waitUntilExit()
        try #require(ffmpeg.terminationStatus == 0)
        return clip
    }

    /// Needs lenstrack (issue 21's tracker) for the ids; lenszone counts nothing without them.
    @Test func aFaceMovingAcrossTheFrameCrossesTheLineOnce() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = try Self.crossingFaceClip(in: dir), jsonl = dir.appendingPathComponent("zones.jsonl").path
        // The line is drawn upwards (from the bottom): moving right crosses it "in". The face's
        // centre passes through "pass" (x 200…300) between about 0.84 s and 1.44 s, and ends in "right".
        let zones = "lines=mid:320,360,320,0 areas=\"pass:200,0,300,0,300,360,200,360;right:320,0,640,0,640,360,320,360\""
        let spec = "filesrc location=\(clip) ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! lensdetect model=Models/face-full-range.json threshold=0.5 draw=false ! lenstrack ! lenszone \(zones) ! lensoverlay ! lensmetadata location=\(jsonl) ! fakesink"
        let r = try CLI.run(["run", "-v", spec], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("mid in 1 out 0, pass entered 1 left 1 inside 0, right entered 1 left 0 inside 1"), "\(r.stderr)")
        // The events reached the bus as element messages (the CLI says them with -v).
        let said = r.stderr.split(separator: "\n").filter { $0.hasPrefix("lenszone0: ") && $0.contains(" (face #") }
        #expect(said.count == 4 && said.filter { $0.hasPrefix("lenszone0: crossed mid in (face #") }.count == 1, "\(said)")
        let lines = try RegionStagesTests.lines(jsonl)
        #expect(lines.count == 90)
        let events = lines.flatMap { ($0["events"] as? [[String: Any]]) ?? [] }
        let crossed = events.filter { $0["type"] as? String == "crossed" }
        try #require(crossed.count == 1, "\(events)")
        #expect(crossed[0]["zone"] as? String == "mid" && crossed[0]["direction"] as? String == "in" && crossed[0]["label"] as? String == "face", "\(crossed)")
        // The centre reaches x 320 about 1.56 s after the first frame (x264's mp4 starts at 2 frames, 0.067 s).
        let t = try #require(crossed[0]["time"] as? Double), start = try #require(lines.first?["time"] as? Double)
        #expect(abs(t - start - 1.56) < 0.2, "\(t) (first frame \(start))")
        let visits = events.filter { $0["zone"] as? String != "mid" }.map { "\($0["zone"] as? String ?? "?") \($0["type"] as? String ?? "?")" }
        #expect(visits == ["pass entered", "pass left", "right entered"], "\(events)")
        let dwell = try #require(events.first { $0["type"] as? String == "left" }?["dwell"] as? Double)
        #expect(abs(dwell - 0.6) < 0.2, "\(dwell)")
        // Every line carries the zones; the last one's counts are the run's.
        let last = try #require(lines.last?["zones"] as? [[String: Any]])
        #expect(last.map { $0["name"] as? String } == ["mid", "pass", "right"])
        #expect(last[0]["counts"] as? [String: Int] == ["in": 1, "out": 0] && last[2]["counts"] as? [String: Int] == ["entered": 1, "left": 0, "inside": 1], "\(last)")
    }

    /// `get lenszone0 counts` answers one line of JSON (all zero: videotestsrc, no tracker).
    @Test func countsAreReadOverTheControlChannel() throws {
        let spec = "videotestsrc is-live=true num-buffers=60 ! video/x-raw,width=320,height=240,framerate=30/1 ! lenszone lines=mid:0.5,1,0.5,0 areas=left:0,0,0.5,0,0.5,1,0,1 coordinates=normalized ! fakesink"
        let r = try CLI.run(["run", "-v", "--control", "-", spec], timeout: 60, input: [(0.5, "get lenszone0 counts")], inputClock: "lenszone0: video/x-raw")
        #expect(r.status == 0, "\(r.stderr)")
        let reply = try #require(r.stderr.split(separator: "\n").first { $0.hasPrefix("control: {") }, "\(r.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(reply.dropFirst("control: ".count).utf8)) as? [String: [String: Int]])
        #expect(json == ["mid": ["in": 0, "out": 0], "left": ["entered": 0, "inside": 0, "left": 0]], "\(reply)")
        #expect(r.stderr.contains("mid in 0 out 0, left entered 0 left 0 inside 0"), "the summary: \(r.stderr)")
    }

    @Test func badZonesAreNamedAtStart() throws {
        let cases = [
            ("lenszone lines=door:1,2,3", "property lines: 'door:1,2,3' needs name:x1,y1,x2,y2"),
            ("lenszone areas=shop:0,0,1,1", "property areas: 'shop:0,0,1,1' needs name:x1,y1,x2,y2,x3,y3,…"),
            ("lenszone", "nothing to count: set lines"),
        ]
        for (stage, message) in cases {
            let r = try CLI.run(["run", "-q", "videotestsrc num-buffers=2 ! \(stage) ! fakesink"], timeout: 30)
            #expect(r.status == 1 && r.stderr.contains(message), "\(stage): \(r.stderr)")
        }
    }
}

extension ZoneStagesTests {
    /// A face that stays in an area: entered once, inside, its dwell growing with the frames'
    /// times (60 frames at 30 fps: ~2 s by the last frame, from its confirmation on).
    @Test func aFaceThatStaysInAnAreaAccumulatesDwell() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let jsonl = dir.appendingPathComponent("stay.jsonl").path
        let photo = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path
        let spec = "filesrc location=\(photo) ! pngdec ! imagefreeze num-buffers=60 ! video/x-raw,framerate=30/1 ! videoconvert ! video/x-raw,format=BGRx " +
            "! lensdetect draw=false ! lenstrack ! lenszone areas=\"seat:0,0,512,0,512,512,0,512\" ! lensmetadata location=\(jsonl) ! fakesink"
        let r = try CLI.run(["run", spec], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = try RegionStagesTests.lines(jsonl)
        try #require(lines.count == 60)
        let events = lines.flatMap { ($0["events"] as? [[String: Any]]) ?? [] }
        #expect(events.count == 1 && events.first?["type"] as? String == "entered", "\(events)")
        let zone = try #require((lines.last?["zones"] as? [[String: Any]])?.first)
        #expect(zone["counts"] as? [String: Int] == ["entered": 1, "left": 0, "inside": 1], "\(zone)")
        let dwell = try #require((zone["dwell"] as? [String: Double])?.values.first)
        #expect(abs(dwell - 57.0 / 30) < 0.1, "dwell \(dwell) s after 57 frames inside")
        // It grew frame by frame.
        let dwells = lines.compactMap { (($0["zones"] as? [[String: Any]])?.first?["dwell"] as? [String: Double])?.values.first }
        #expect(dwells.count >= 55 && zip(dwells, dwells.dropFirst()).allSatisfy { $1 > $0 }, "\(dwells)")
    }
}
