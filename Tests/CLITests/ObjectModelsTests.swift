import Foundation
import Testing

/// lensclassify through the built binary, judged by references StreamLens did not compute:
/// MediaPipe's own face mesh (mediapipe 0.10.21's solutions.face_mesh, run once: the command,
/// venv and versions are in Tests/Fixtures/face-mesh-astronaut.json beside its 468 points), and
/// FER's emotion model run at test time by Tests/Python/emotion_reference.py (fer 25.10.3's
/// pre-processing in numpy, OpenVINO's Python API; checked against fer's own code and
/// TensorFlow Lite's runtime in Tests/Fixtures/emotion-astronaut.json).
@Suite(.serialized) struct ObjectModelsTests {
    static let astronaut = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path
    static func photo(frames: Int) -> String {
        "filesrc location=\(astronaut) ! pngdec ! imagefreeze num-buffers=\(frames) ! videoconvert ! video/x-raw,format=RGB"
    }

    /// Each line's regions, as JSON objects.
    static func regions(_ spec: String, extra: [String] = []) throws -> (lines: [[[String: Any]]], stderr: String) {
        let r = try CLI.run(["run"] + extra + ["\(spec) ! lensmetadata location=- ! fakesink"], timeout: 180)
        try #require(r.status == 0, "\(r.stderr)")
        let lines = try r.stdout.split(separator: "\n").map { line in
            try #require((try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["detections"] as? [[String: Any]])
        }
        return (lines, r.stderr)
    }

    static func points(_ region: [String: Any]) -> [[Double]] {
        ((region["landmarks"] as? [String: Any])?["points"] as? [Any])?.compactMap(ImportTests.numbers) ?? []
    }

    @Test func faceMeshAgreesWithMediaPipesOwnResult() throws {
        let fixture = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: CLI.packageRoot.appendingPathComponent("Tests/Fixtures/face-mesh-astronaut.json"))) as? [String: Any])
        let reference = try #require((fixture["landmarks"] as? [Any])?.compactMap(ImportTests.numbers))
        try #require(reference.count == 468)
        let (lines, stderr) = try Self.regions("\(Self.photo(frames: 2)) ! lensdetect model=Models/face-short-range.json draw=false ! lensclassify name=mesh model=Models/face-mesh.json precision=f32")
        #expect(stderr.contains("mesh: 2 frames in, 2 out, 0 dropped") && stderr.contains("2 crops"), "\(stderr)")
        for line in lines {
            let face = try #require(line.first)
            let points = Self.points(face)
            try #require(points.count == 468 && points.allSatisfy { $0.count == 3 }, "\(points.count) points")
            let presence = try #require((face["landmarks"] as? [String: Any])?["presence"] as? Double)
            #expect(presence > 0.9)
            let distances = zip(points, reference).map { hypot($0[0] - $1[0], $0[1] - $1[1]) }
            // Eye corners, nose tip, lips, mouth corners (the acceptance check's nine), and all.
            let nine = [1, 13, 14, 33, 61, 133, 263, 291, 362].map { distances[$0] }
            #expect(nine.max()! <= 3, "at the nine landmarks: \(nine.map { String(format: "%.1f", $0) })")
            #expect(distances.reduce(0, +) / 468 <= 2, "mean distance \(distances.reduce(0, +) / 468) px")
        }
    }

    @Test func emotionMatchesTheModelInItsOwnPreprocessingAndSheIsHappy() throws {
        let (lines, _) = try Self.regions("\(Self.photo(frames: 1)) ! lensdetect model=Models/face-short-range.json draw=false ! lensclassify model=Models/emotion.json precision=f32")
        let face = try #require(lines.first?.first)
        let c = try #require((face["classifications"] as? [[String: Any]])?.first)
        #expect(c["name"] as? String == "emotion" && c["label"] as? String == "happy" && c["label_id"] as? Int == 3, "\(c)")
        let box = try ["x", "y", "width", "height"].map { try #require(face[$0] as? Double) }
        let r = try ImportTests.spawn("python3", ["Tests/Python/emotion_reference.py", Self.astronaut] + box.map { "\($0)" }, timeout: 120)
        try #require(r.status == 0, "reference: \(r.stderr)")
        let reference = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let scores = try #require(ImportTests.numbers(reference["scores"]))
        #expect(reference["label"] as? String == "happy")
        // The crops differ a little (fer cuts whole pixels with 10-pixel offsets; lensclassify
        // samples the square 1.22× box bilinearly): the same class, a confidence close to it.
        let confidence = try #require(c["confidence"] as? Double)
        #expect(abs(confidence - scores[3]) < 0.02, "lensclassify \(confidence), the reference \(scores)")
    }

    @Test func bothModelsInOnePipelineAndTheirResultsOnTheMeta() throws {
        // Two second models one after the other; the overlay draws both (a pixel check of its
        // dots would test cairo: here, that it runs and the results survive it).
        // BGRx frames (the crops read their channels in that order); no videoconvert after the
        // stages: GStreamer 1.22's videoconvert keeps a region's rectangle but drops its params.
        let bgrx = Self.photo(frames: 3).replacingOccurrences(of: "format=RGB", with: "format=BGRx")
        let (lines, stderr) = try Self.regions("\(bgrx) ! lensdetect draw=false ! lensclassify model=Models/face-mesh.json ! lensclassify model=Models/emotion.json ! lensoverlay", extra: ["-v"])
        #expect(lines.count == 3, "\(stderr)")
        for line in lines {
            let face = try #require(line.first)
            #expect(Self.points(face).count == 468 && (face["classifications"] as? [[String: Any]])?.first?["label"] as? String == "happy", "\(face.keys)")
        }
    }

    @Test func withATrackerIntervalRunsEachObjectEveryNthFrame() throws {
        // Ids from the third frame (lenstrack's min-hits 3): frames 0, 1, 2 run the model, then
        // every 5th: 2, 7 — 0, 1, 2, 7 are the four runs of ten frames, the six others reuse.
        let (lines, stderr) = try Self.regions("\(Self.photo(frames: 10)) ! lensdetect draw=false ! lenstrack ! lensclassify name=mesh model=Models/face-mesh.json interval=5")
        #expect(stderr.contains("4 crops") && stderr.contains("6 results kept between runs"), "\(stderr)")
        #expect(lines.count == 10 && lines.allSatisfy { Self.points($0.first ?? [:]).count == 468 })
    }

    @Test func aDetectorManifestIsNotASecondModel() throws {
        let r = try CLI.run(["run", "videotestsrc num-buffers=3 ! videoconvert ! lensclassify model=Models/face-short-range.json ! fakesink"])
        #expect(r.status == 1)
        #expect(r.stderr.contains("error: lensclassify0: Models/face-short-range.json describes a model with decoder 'blazeface', not a second model (classifier, landmarks or ctc); use it with lensdetect"), "\(r.stderr)")
    }
}
