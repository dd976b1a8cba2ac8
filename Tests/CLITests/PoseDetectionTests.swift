import Foundation
import Testing

/// lensdetect with MediaPipe's pose detector (Models/pose-detection.json: the `blazeface` family,
/// a manifest and no code) through the built binary, judged by MediaPipe's own decoding math:
/// Tests/Python/pose_detection_reference.py runs the same model file with OpenVINO's Python API on
/// the picture sampled as MediaPipe's ImageToTensorCalculator does (in numpy, not by StreamLens)
/// and decodes it with MediaPipe's anchors, box decoding and weighted suppression, its options
/// written there from MediaPipe's pose_detection_cpu.pbtxt, not read from the manifest. It runs at
/// test time, so the reference follows the model and the picture, never a stored number.
/// (MediaPipe 0.10.21 itself, its PoseDetectionCpu graph on TFLite, was run once by hand on the
/// astronaut: box (159.0, 133.3)-(261.3, 235.6), score 0.807; the reference says (161.6,
/// 134.9)-(263.9, 237.2), 0.815: the runtimes differ by that much, the decoders do not.)
@Suite(.serialized) struct PoseDetectionTests {
    static let astronaut = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path

    struct Person { var box: [Double]; var score: Double; var meanScore: Double; var keypoints: [[Double]] }

    /// MediaPipe's detections on `image`, in picture pixels.
    static func reference(_ image: String) throws -> [Person] {
        let r = try ImportTests.spawn("python3", ["Tests/Python/pose_detection_reference.py", image], timeout: 120)
        try #require(r.status == 0, "reference: \(r.stderr)")
        return try r.stdout.split(separator: "\n").map { line in
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return Person(box: try #require(ImportTests.numbers(o["box"])), score: try #require((o["score"] as? NSNumber)?.doubleValue),
                          meanScore: try #require((o["mean_score"] as? NSNumber)?.doubleValue),
                          keypoints: try #require((o["keypoints"] as? [Any])?.compactMap(ImportTests.numbers)))
        }
    }

    /// lensdetect's people on each frame of `source`, as box corners in frame pixels.
    static func detect(_ source: String) throws -> [[Person]] {
        let r = try CLI.run(["run", "-q", "\(source) ! lensdetect model=Models/pose-detection.json precision=f32 metadata=- ! fakesink"], timeout: 120)
        try #require(r.status == 0, "\(r.stderr)")
        return try r.stdout.split(separator: "\n").map { line in
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return try (try #require(o["detections"] as? [[String: Any]])).map { d in
                let n = { (k: String) throws -> Double in try #require((d[k] as? NSNumber)?.doubleValue, "\(k) in \(line)") }
                let (x, y, w, h) = (try n("x"), try n("y"), try n("width"), try n("height"))
                #expect(d["label"] as? String == "person" && d["label_id"] as? Int == 0, "\(line)")
                let score = try n("score")
                return Person(box: [x, y, x + w, y + h], score: score, meanScore: score,
                              keypoints: (d["keypoints"] as? [Any])?.compactMap(ImportTests.numbers) ?? [])
            }
        }
    }

    static func picture(_ path: String, frames: Int, format: String = "RGB") -> String {
        "filesrc location=\(path) ! pngdec ! imagefreeze num-buffers=\(frames) ! videoconvert ! video/x-raw,format=\(format)"
    }

    /// The astronaut photo padded with black by ffmpeg (exact pixels, no resize) to `pad`.
    static func padded(_ pad: String, in dir: URL) throws -> String {
        let out = dir.appendingPathComponent("astronaut-\(pad.replacingOccurrences(of: ":", with: "-")).png").path
        let r = try ImportTests.spawn("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", astronaut, "-vf", "pad=\(pad):black", out], timeout: 60)
        try #require(r.status == 0, "ffmpeg: \(r.stderr)")
        return out
    }

    /// One person, where MediaPipe's decoding puts them: the box's corners and the four keypoints
    /// (mid hip, full-body point, mid shoulder, upper-body point; some lie outside the picture,
    /// as MediaPipe's do) within 3 px, the score within 0.02 of the group's mean score (what the
    /// weighted suppression reports; MediaPipe keeps the best's). The square photo, and the photo
    /// padded wide and tall, where lensdetect's letterbox is the model's and the picture's
    /// position in it matters; RGB and BGRx frames.
    @Test(arguments: [("", "RGB"), ("910:512:199:0", "BGRx"), ("512:800:0:100", "RGB")])
    func personMatchesMediaPipesDecoding(_ pad: String, _ format: String) throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let image = pad.isEmpty ? Self.astronaut : try Self.padded(pad, in: dir)
        let reference = try Self.reference(image)
        try #require(reference.count == 1, "MediaPipe's decoding found \(reference.count) people: \(reference.map(\.box))")
        let want = reference[0]
        // By eye: the face at x 179…271 of the photo, the shoulders' middle below it, inside the photo.
        let (dx, dy) = pad.isEmpty ? (0.0, 0.0) : pad == "910:512:199:0" ? (199.0, 0.0) : (0.0, 100.0)
        let centreX = (want.box[0] + want.box[2]) / 2 - dx
        #expect(centreX > 179 && centreX < 271 && want.score > 0.5, "reference \(want.box) \(want.score)")
        let shoulder = want.keypoints[2]
        #expect(shoulder[1] - dy > (want.box[1] + want.box[3]) / 2 - dy && shoulder[1] - dy < 512 && shoulder[0] - dx > 150 && shoulder[0] - dx < 300,
                "mid shoulder \(shoulder)")

        let frames = try Self.detect(Self.picture(image, frames: 3, format: format))
        try #require(frames.count == 3)
        for (i, people) in frames.enumerated() {
            try #require(people.count == 1, "frame \(i): \(people.count) people")
            let got = people[0]
            for k in 0..<4 { #expect(abs(got.box[k] - want.box[k]) < 3, "frame \(i) pad \(pad): box \(got.box) vs MediaPipe's \(want.box)") }
            #expect(abs(got.score - want.meanScore) < 0.02, "score \(got.score) vs the group's mean \(want.meanScore) (MediaPipe's \(want.score))")
            try #require(got.keypoints.count == 4, "keypoints \(got.keypoints)")
            for (p, q) in zip(got.keypoints, want.keypoints) {
                #expect(abs(p[0] - q[0]) < 3 && abs(p[1] - q[1]) < 3, "pad \(pad): keypoint \(p) vs MediaPipe's \(q)")
            }
        }
    }

    /// Nobody on a flat grey 720p frame, nor on the cat (scikit-image's chelsea); the reference
    /// finds nobody on the cat either.
    @Test func nobodyOnFlatGreyOrACat() throws {
        let grey = "videotestsrc pattern=solid-color foreground-color=0xff808080 num-buffers=5 ! video/x-raw,width=1280,height=720 ! videoconvert ! video/x-raw,format=RGB"
        let frames = try Self.detect(grey)
        #expect(frames.count == 5)
        #expect(frames.allSatisfy { $0.isEmpty }, "people on flat grey, per frame: \(frames.map(\.count))")
        let cat = CLI.packageRoot.appendingPathComponent(".deps/media/chelsea.png").path
        let referenceOnCat = try Self.reference(cat)
        #expect(referenceOnCat.isEmpty, "MediaPipe's decoding on the cat: \(referenceOnCat.map(\.box))")
        let onCat = try Self.detect(Self.picture(cat, frames: 1))
        #expect(onCat.count == 1 && onCat.allSatisfy { $0.isEmpty }, "people on the cat: \(onCat.map(\.count))")
    }
}
