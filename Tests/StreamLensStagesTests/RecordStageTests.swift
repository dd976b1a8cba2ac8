import Foundation
import StreamLensCore
import StreamLensStages
import StreamLensTesting
import Testing

/// lensrecord driven in memory: H.264 access units made by ffmpeg (libx264, a keyframe every 15
/// frames, an access unit delimiter before each) are pushed as encoded frames; a clip requested
/// mid-stream must hold exactly the source's frames from the keyframe `pre` seconds before to
/// `post` seconds after, as ffmpeg decodes them (the clip and the source stream alike).
@Suite(.serialized) struct RecordStageTests {
    static let (width, height, count) = (160, 120, 60)

    /// The stream's access units (split at each delimiter, NAL type 9) and which are keyframes
    /// (holding an IDR slice, NAL type 5); and the raw file, for the reference decode.
    static func accessUnits(in dir: URL) throws -> (units: [[UInt8]], keyframes: [Bool], file: String) {
        let file = dir.appendingPathComponent("stream.h264").path
        let ffmpeg = try run("/usr/bin/ffmpeg", ["-v", "error", "-f", "lavfi", "-i", "testsrc=size=\(width)x\(height):rate=30", "-frames:v", "\(count)",
                                                 "-c:v", "libx264", "-g", "15", "-bf", "0", "-x264-params", "aud=1", "-pix_fmt", "yuv420p", "-f", "h264", "-y", file])
        try #require(ffmpeg.status == 0, "ffmpeg could not encode the test stream")
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        var nals: [(start: Int, type: UInt8)] = []   // start: the start code's first byte
        var i = 0
        while i + 3 < bytes.count {
            if bytes[i] == 0, bytes[i + 1] == 0, bytes[i + 2] == 1 {
                nals.append((i > 0 && bytes[i - 1] == 0 ? i - 1 : i, bytes[i + 3] & 0x1f))
                i += 3
            } else {
                i += 1
            }
        }
        let delimiters = nals.filter { $0.type == 9 }.map(\.start)
        let units = delimiters.indices.map { k in Array(bytes[delimiters[k]..<(k + 1 < delimiters.count ? delimiters[k + 1] : bytes.count)]) }
        let keyframes = delimiters.indices.map { k in
            nals.contains { $0.type == 5 && $0.start >= delimiters[k] && (k + 1 == delimiters.count || $0.start < delimiters[k + 1]) }
        }
        return (units, keyframes, file)
    }

    static func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: Data) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = arguments
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, data)
    }

    /// Every frame of a file, decoded by ffmpeg to gray bytes.
    static func decoded(_ path: String) throws -> [[UInt8]] {
        let r = try run("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "gray", "-"])
        try #require(r.status == 0, "ffmpeg could not decode \(path)")
        let bytes = [UInt8](r.output), size = width * height
        return stride(from: 0, to: bytes.count - size + 1, by: size).map { Array(bytes[$0..<$0 + size]) }
    }

    @Test func aRequestedClipHoldsTheSourcesFramesFromTheKeyframeBeforeToPostAfter() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sl-record-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let stream = try Self.accessUnits(in: dir)
        try #require(stream.units.count == Self.count, "\(stream.units.count) access units")
        #expect(stream.keyframes.enumerated().filter(\.element).map(\.offset) == [0, 15, 30, 45])

        let driver = try StageDriver(RecordStage.self, settings: ["pre": .double(0.5), "post": .double(0.51),
                                                                 "location": .string(dir.path + "/clip-%05d.mp4")])
        try driver.start(VideoFormat(encoded: "video/x-h264", width: Self.width, height: Self.height, framerate: (30, 1),
                                     caps: "video/x-h264,stream-format=byte-stream,alignment=au,width=\(Self.width),height=\(Self.height),framerate=30/1"))
        var out: [StageDriver<RecordStage>.Delivered] = []
        for (n, unit) in stream.units.enumerated() {
            // At 1.3 s (frame 39): the clip starts at the keyframe at or before 0.8 s (frame 15).
            if n == 39 { try driver.change(["record": .string("manual")]) }
            out += driver.push(unit, keyframe: stream.keyframes[n])
        }
        out += driver.finish()
        #expect(out.map(\.index) == Array(0..<Self.count) && out.allSatisfy { $0.outcome == .forward })
        #expect(out.map(\.pixels.bytes) == stream.units, "lensrecord changed the frames it passes on")
        #expect(driver.notices.map(\.text).contains("clip requested (manual)"))
        #expect(driver.restored["record"] == .string(""))

        // The finisher names the clip and writes its JSON on a thread of its own.
        let json = dir.appendingPathComponent("clip-00001.json")
        let deadline = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: json.path), Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let record = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: json)) as? [String: Any], "no \(json.lastPathComponent)")
        #expect(record["trigger"] as? [String] == ["manual"] && record["complete"] as? Bool == true, "\(record)")

        let source = try Self.decoded(stream.file), clip = try Self.decoded(dir.appendingPathComponent("clip-00001.mp4").path)
        try #require(source.count == Self.count)
        // Frames 15 (the keyframe) to the last before 1.3 + 0.51 s: 15…54.
        #expect(clip.count == 40 && record["frames"] as? Int == 40, "clip of \(clip.count) frames, JSON \(record["frames"] ?? "none")")
        #expect(clip == Array(source[15..<(15 + clip.count)]), "the clip's frames are not the source's from frame 15")
    }
}
