import Foundation
import Testing

/// lenstrack and lensblur on a clip made here: two faces (the astronaut's, one mirrored) whose
/// paths cross, the lower one drawn over the upper one so that it hides its lower half for
/// about a dozen frames — the case where trackers switch ids and where a blur that follows
/// detections only shows the face.
@Suite(.serialized) struct TrackBlurTests {
    static let astronaut = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path
    static let (width, height, frames) = (640, 360, 90)
    /// Face A (top) moves right, face B (lower, drawn over A) moves left, 500 px in 3 s: their
    /// x at frame n (the face box is about [x + 42, x + 118]).
    static func xA(_ n: Int) -> Double { -20 + 500 * Double(n) / 90 }
    static func xB(_ n: Int) -> Double { 480 - 500 * Double(n) / 90 }

    static func crossingClip(in dir: URL) throws -> String {
        let clip = dir.appendingPathComponent("cross.mp4").path
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x505050:s=\(width)x\(height):r=30:d=3", "-i", astronaut, "-i", astronaut,
                            "-filter_complex", "[1]crop=200:200:125:28,scale=160:160[a];[2]crop=200:200:125:28,scale=160:160,hflip[b];" +
                            "[0][a]overlay=x='-20+500*t/3':y=40[v1];[v1][b]overlay=x='480-500*t/3':y=110,format=yuv420p",
                            "-frames:v", "\(frames)", "-c:v", "libx264", "-preset", "veryfast", clip]
        try ffmpeg.run()
        ffmpeg.waitUntilExit()
        try #require(ffmpeg.terminationStatus == 0)
        return clip
    }

    static func source(_ clip: String) -> String {
        "filesrc location=\(clip) ! decodebin ! videoconvert ! video/x-raw,format=RGB"
    }

    /// Each line's regions: object id, x, estimate.
    static func regions(_ path: String) throws -> [[(id: Int, x: Double, estimate: String?)]] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map { line in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let detections = try #require(object["detections"] as? [[String: Any]])
            return detections.map { ($0["object_id"] as? Int ?? -99, $0["x"] as? Double ?? .nan, $0["estimate"] as? String) }
        }
    }

    @Test func crossingFacesKeepTheirTwoIdsThroughTheOcclusion() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = try Self.crossingClip(in: dir), jsonl = dir.appendingPathComponent("t.jsonl").path
        let run = try CLI.run(["run", "\(Self.source(clip)) ! lensdetect model=Models/face-full-range.json threshold=0.5 draw=false " +
                               "! lenstrack name=t ! lensmetadata location=\(jsonl) ! fakesink"], timeout: 120)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("t: 90 frames in, 90 out, 0 dropped") && run.stderr.contains("2 ids given"), "\(run.stderr)")
        let lines = try Self.regions(jsonl)
        try #require(lines.count == Self.frames)
        var tracks: [Int: [(frame: Int, x: Double, estimate: String?)]] = [:]
        for (n, line) in lines.enumerated() { for r in line where r.id >= 0 { tracks[r.id, default: []].append((n, r.x, r.estimate)) } }
        #expect(tracks.count == 2, "ids \(tracks.keys.sorted())")
        for (id, track) in tracks {
            // Appears from the third frame (min-hits 3) to the last, never twice on a frame.
            #expect(track.count >= 85 && Set(track.map(\.frame)).count == track.count, "id \(id): \(track.count) frames")
            // Never steps backwards: an id swap would jump it to the other face's side.
            let direction: Double = track.last!.x > track.first!.x ? 1 : -1
            let reversals = zip(track, track.dropFirst()).filter { ($1.x - $0.x) * direction < -4 }
            #expect(reversals.isEmpty, "id \(id) stepped back: \(reversals.map { "\($0.0.frame): \($0.0.x) → \($0.1.x)" })")
        }
        let right = tracks.values.filter { $0.last!.x > $0.first!.x }, left = tracks.values.filter { $0.last!.x < $0.first!.x }
        #expect(right.count == 1 && left.count == 1)
        // A (moving right) was hidden: the tracker carried it at its predicted place, close to
        // where the clip drew it (its box's left edge is ~35 px right of the photo's).
        let predicted = (right.first ?? []).filter { $0.estimate == "predicted" }
        #expect(predicted.count >= 5, "the occlusion never made the tracker predict: \(predicted.count) frames")
        for p in predicted { #expect(abs(p.x - (Self.xA(p.frame) + 35)) < 15, "frame \(p.frame): predicted at \(p.x), drawn at \(Self.xA(p.frame) + 35)") }
    }

    /// Mean absolute difference of horizontal neighbours in a rectangle of an RGB frame.
    static func detail(_ frame: ArraySlice<UInt8>, x0: Int, x1: Int, y0: Int, y1: Int) -> Double {
        let base = frame.startIndex
        var sum = 0, n = 0
        for y in y0..<y1 {
            for x in x0..<(x1 - 1) {
                for c in 0..<3 {
                    let i = base + (y * width + x) * 3 + c
                    sum += abs(Int(frame[i + 3]) - Int(frame[i])); n += 1
                }
            }
        }
        return Double(sum) / Double(n)
    }

    @Test func withTheDetectorEveryThirdFrameTheBlurCoversTheMovingFaceOnEveryFrame() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = try Self.crossingClip(in: dir)
        let original = dir.appendingPathComponent("in.rgb").path, blurred = dir.appendingPathComponent("blur.rgb").path
        let a = try CLI.run(["run", "\(Self.source(clip)) ! filesink location=\(original)"])
        let b = try CLI.run(["run", "\(Self.source(clip)) ! lensdetect model=Models/face-full-range.json threshold=0.5 interval=3 draw=false " +
                             "! lenstrack ! lensblur name=b ! filesink location=\(blurred)"], timeout: 120)
        #expect(a.status == 0 && b.status == 0, "\(a.stderr) \(b.stderr)")
        #expect(b.stderr.contains("b: 90 frames in, 90 out"), "\(b.stderr)")
        let before = [UInt8](try Data(contentsOf: URL(fileURLWithPath: original)))
        let after = [UInt8](try Data(contentsOf: URL(fileURLWithPath: blurred)))
        let size = Self.width * Self.height * 3
        try #require(before.count == Self.frames * size && after.count == before.count)
        var exposed: [String] = []
        for n in 6..<Self.frames { // from the tracker's third detector run (min-hits 3) on
            let frameA = before[(n * size)..<((n + 1) * size)], frameB = after[(n * size)..<((n + 1) * size)]
            let x = Int(Self.xB(n))
            let (x0, x1, y0, y1) = (x + 50, x + 110, 160, 220)   // inside face B
            let ratio = Self.detail(frameB, x0: x0, x1: x1, y0: y0, y1: y1) / Self.detail(frameA, x0: x0, x1: x1, y0: y0, y1: y1)
            if ratio > 0.35 { exposed.append("\(n): \(String(format: "%.2f", ratio))") }
            // The bottom band has no face: untouched.
            #expect(frameA[(300 * Self.width * 3 + frameA.startIndex)...] == frameB[(300 * Self.width * 3 + frameB.startIndex)...], "frame \(n): pixels changed away from the faces")
        }
        #expect(exposed.isEmpty, "face B kept its detail on frames \(exposed)")
    }
}

extension TrackBlurTests {
    /// Pipelines/blur-faces.pipeline on the crossing clip: every frame out, the faces hidden.
    @Test func blurFacesPipelineWritesEveryFrame() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = try Self.crossingClip(in: dir), out = dir.appendingPathComponent("private.mp4").path
        let run = try CLI.run(["run", "blur-faces", "INPUT=\(clip)", "OUTPUT=\(out)", "INTERVAL=2"], timeout: 120)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(countFrames(out) == Self.frames)
        #expect(run.stderr.contains("regions hidden") && run.stderr.contains("2 ids given"), "\(run.stderr)")
    }

    /// tracker=iou on one still face (the astronaut, 20 frames): every record's face carries
    /// the same id from min-hits on, and no other id appears.
    @Test func theIoUTrackerGivesAStillFaceOneId() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let jsonl = dir.appendingPathComponent("t.jsonl").path
        let run = try CLI.run(["run", "-q", "filesrc location=\(Self.astronaut) ! pngdec ! imagefreeze num-buffers=20 ! videoconvert ! video/x-raw,format=RGB ! " +
                               "lensdetect draw=false ! lenstrack tracker=iou ! lensmetadata location=\(jsonl) ! fakesink"], timeout: 120)
        #expect(run.status == 0, "\(run.stderr)")
        let lines = try Self.regions(jsonl)
        try #require(lines.count == 20)
        let ids = Set(lines.flatMap { $0.map(\.id) }.filter { $0 >= 0 })
        #expect(ids.count == 1, "ids \(ids.sorted())")
        #expect(lines.dropFirst(2).allSatisfy { $0.count == 1 && $0[0].id >= 0 }, "\(lines.map { $0.map(\.id) })")
    }
}
