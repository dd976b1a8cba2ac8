import Foundation
import Testing

/// lensdetect on real photos and a real clip, through the built binary. The astronaut photo
/// (NASA, public domain; scikit-image's copy, taken by set-up) has one face, checked by eye at
/// x 179…271, y 82…174 in the 512x512 photo (the box the short-range model gives at 512²).
@Suite(.serialized) struct DetectTests {
    static let astronaut = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path
    static let faceInPhoto = (x: 179.3, y: 81.7, size: 92.1)

    struct Face { var x, y, w, h, score: Double; var centerX: Double { x + w / 2 }; var centerY: Double { y + h / 2 } }

    /// Lines of a JSON Lines metadata file: frame number and faces.
    static func readMetadata(_ text: String) throws -> [(frame: Int, faces: [Face])] {
        try text.split(separator: "\n").map { line in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let detections = try #require(object["detections"] as? [[String: Any]])
            let faces = try detections.map { d -> Face in
                return Face(x: try #require(d["x"] as? Double), y: try #require(d["y"] as? Double),
                            w: try #require(d["width"] as? Double), h: try #require(d["height"] as? Double),
                            score: try #require(d["score"] as? Double))
            }
            return (try #require(object["frame"] as? Int), faces)
        }
    }

    /// The photo letterboxed into a W×H frame (videoscale add-borders), through lensdetect.
    func detect(width: Int, height: Int, model: String, extra: String = "") throws -> [Face] {
        let spec = "filesrc location=\(Self.astronaut) ! pngdec ! imagefreeze num-buffers=1 ! videoconvert ! videoscale add-borders=true " +
            "! video/x-raw,width=\(width),height=\(height),pixel-aspect-ratio=1/1 ! videoconvert ! video/x-raw,format=BGRx " +
            "! lensdetect model=Models/\(model).json precision=f32 metadata=- \(extra) ! fakesink"
        let r = try CLI.run(["run", "-q", spec])
        #expect(r.status == 0, "\(r.stderr)")
        return try Self.readMetadata(r.stdout).first?.faces ?? []
    }

    /// Where the face lands in a W×H frame holding the letterboxed photo.
    static func expectedFace(width: Int, height: Int) -> Face {
        let scale = Double(min(width, height)) / 512
        let offX = (Double(width) - 512 * scale) / 2, offY = (Double(height) - 512 * scale) / 2
        let f = faceInPhoto
        return Face(x: offX + f.x * scale, y: offY + f.y * scale, w: f.size * scale, h: f.size * scale, score: 1)
    }

    func expectNear(_ found: Face, _ expected: Face, _ context: String) {
        // Centre within 12% of the face's size, size within 25%: the two models box faces a
        // little differently, and a 720p frame gives them a ~25 px face.
        #expect(abs(found.centerX - expected.centerX) < 0.12 * expected.w, "\(context): centre x \(found.centerX) vs \(expected.centerX)")
        #expect(abs(found.centerY - expected.centerY) < 0.12 * expected.h, "\(context): centre y \(found.centerY) vs \(expected.centerY)")
        #expect(abs(found.w - expected.w) < 0.25 * expected.w, "\(context): width \(found.w) vs \(expected.w)")
    }

    @Test(arguments: [(512, 512, "face-short-range"), (640, 480, "face-short-range"),
                      (1280, 720, "face-full-range"), (720, 1280, "face-full-range"), (640, 480, "face-full-range")])
    func findsTheFaceAtEverySize(_ width: Int, _ height: Int, _ model: String) throws {
        let faces = try detect(width: width, height: height, model: model, extra: "threshold=0.5")
        try #require(faces.count == 1, "\(width)x\(height) \(model): \(faces.count) faces")
        expectNear(faces[0], Self.expectedFace(width: width, height: height), "\(width)x\(height) \(model)")
    }

    @Test func noFaceOnATestPattern() throws {
        for model in ["face-short-range", "face-full-range"] {
            let r = try CLI.run(["run", "-q", "videotestsrc num-buffers=30 ! video/x-raw,width=1280,height=720 ! videoconvert ! video/x-raw,format=BGRx ! lensdetect model=Models/\(model).json metadata=- ! fakesink"])
            #expect(r.status == 0, "\(r.stderr)")
            let lines = try Self.readMetadata(r.stdout)
            #expect(lines.count == 30)
            #expect(lines.allSatisfy { $0.faces.isEmpty }, "\(model) found faces in a test pattern")
        }
    }

    @Test func twoFacesSideBySide() throws {
        let a = Self.astronaut
        let spec = "compositor name=c sink_1::xpos=512 ! video/x-raw,width=1024,height=512 ! videoconvert ! video/x-raw,format=BGRx " +
            "! lensdetect model=Models/face-full-range.json precision=f32 threshold=0.5 metadata=- ! fakesink " +
            "filesrc location=\(a) ! pngdec ! imagefreeze num-buffers=1 ! videoconvert ! c. " +
            "filesrc location=\(a) ! pngdec ! imagefreeze num-buffers=1 ! videoconvert ! c."
        let r = try CLI.run(["run", "-q", spec])
        #expect(r.status == 0, "\(r.stderr)")
        let faces = try #require(try Self.readMetadata(r.stdout).first?.faces).sorted { $0.x < $1.x }
        try #require(faces.count == 2, "\(faces.count) faces")
        let f = Self.faceInPhoto
        expectNear(faces[0], Face(x: f.x, y: f.y, w: f.size, h: f.size, score: 1), "left")
        expectNear(faces[1], Face(x: 512 + f.x, y: f.y, w: f.size, h: f.size, score: 1), "right")
    }

    /// 60 frames at 30 fps: the face (a 240² crop of the photo scaled to 300²) moves right at
    /// 150 px/s over a grey 640x360 frame.
    static func movingFaceClip(in dir: URL) throws -> String {
        let clip = dir.appendingPathComponent("move.mp4").path
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=gray:s=640x360:r=30:d=2", "-loop", "1", "-i", astronaut,
                            "-filter_complex", "[1]crop=240:240:140:0,scale=300:300[a];[0][a]overlay=x='20+t*150':y=30:shortest=1,format=yuv420p",
                            "-frames:v", "60", "-c:v", "libx264", "-preset", "veryfast", clip]
        try ffmpeg.run()
        ffmpeg.waitUntilExit()
        try #require(ffmpeg.terminationStatus == 0)
        return clip
    }

    @Test func movingFaceIsFollowedOnEveryFrame() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = try Self.movingFaceClip(in: dir), out = dir.appendingPathComponent("boxed.mp4").path
        let jsonl = dir.appendingPathComponent("faces.jsonl").path
        let r = try CLI.run(["run", "filesrc location=\(clip) ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! lensdetect name=d model=Models/face-full-range.json metadata=\(jsonl) ! videoconvert ! x264enc ! mp4mux ! filesink location=\(out)"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(countFrames(out) == 60)
        #expect(r.stderr.contains("d: 60 frames in, 60 out, 0 dropped, "), "\(r.stderr)")
        #expect(r.stderr.contains("inference") && r.stderr.contains("(60 runs)"), "\(r.stderr)")
        let lines = try Self.readMetadata(String(contentsOfFile: jsonl, encoding: .utf8))
        #expect(lines.count == 60)
        #expect(lines.map(\.frame) == Array(0..<60))
        let scale = 300.0 / 240
        for (i, line) in lines.enumerated() {
            guard line.faces.count == 1 else { Issue.record("frame \(i): \(line.faces.count) faces"); continue }
            let t = Double(i) / 30
            let expected = Face(x: 20 + t * 150 + (Self.faceInPhoto.x - 140) * scale, y: 30 + Self.faceInPhoto.y * scale,
                                w: Self.faceInPhoto.size * scale, h: Self.faceInPhoto.size * scale, score: 1)
            expectNear(line.faces[0], expected, "frame \(i)")
        }
    }

    @Test func drawsTheSameBoxesOnEveryPixelFormat() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // Each output is converted to RGB before it is written, so they compare byte for byte.
        func render(_ format: String, detect: Bool = true) throws -> [UInt8] {
            let out = dir.appendingPathComponent("\(format)-\(detect).raw").path
            let r = try CLI.run(["run", "-q", "filesrc location=\(Self.astronaut) ! pngdec ! imagefreeze num-buffers=1 ! videoconvert ! video/x-raw,format=\(format) " +
                                 (detect ? "! lensdetect precision=f32 " : "") + "! videoconvert ! video/x-raw,format=RGB ! filesink location=\(out)"])
            #expect(r.status == 0, "\(r.stderr)")
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))
        }
        let plain = try render("RGB", detect: false), bgrx = try render("BGRx")
        #expect(plain.count == 512 * 512 * 3)
        // The box's left edge, 3 px wide, is green where the photo was not.
        let f = Self.faceInPhoto
        let edge = ((Int(f.y + f.size / 2)) * 512 + Int(f.x) + 1) * 3
        #expect(Array(bgrx[edge..<(edge + 3)]) == [0, 255, 0], "\(Array(bgrx[edge..<(edge + 3)]))")
        #expect(Array(plain[edge..<(edge + 3)]) != [0, 255, 0])
        for format in ["RGB", "BGR", "RGBx", "RGBA", "BGRA"] {
            #expect(try render(format) == bgrx, "\(format) differs from BGRx")
        }
    }

    @Test func intervalRunsTheModelEveryNthFrameAndKeepsTheBoxes() throws {
        let r = try CLI.run(["run", "videotestsrc num-buffers=1 ! fakesink"]) // warm
        #expect(r.status == 0)
        let spec = "filesrc location=\(Self.astronaut) ! pngdec ! imagefreeze num-buffers=20 ! videoconvert ! video/x-raw,format=BGRx " +
            "! lensdetect name=d interval=5 metadata=- ! fakesink"
        let run = try CLI.run(["run", spec])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("(4 runs), 20 face boxes"), "\(run.stderr)")
        // The default precision is measured (or the CPU's only one), and the summary says which.
        #expect(run.stderr.range(of: #"precision auto → (f32|bf16|f16) \("#, options: .regularExpression) != nil, "\(run.stderr)")
        let lines = try Self.readMetadata(run.stdout)
        #expect(lines.count == 20)
        #expect(lines.allSatisfy { $0.faces.count == 1 })
    }

    @Test func faceBlurExamplePixelatesOnlyTheFace() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let original = dir.appendingPathComponent("original.raw").path, blurred = dir.appendingPathComponent("blurred.raw").path
        let source = "filesrc location=\(Self.astronaut) ! pngdec ! imagefreeze num-buffers=1 ! videoconvert ! video/x-raw,format=BGRx"
        let a = try CLI.run(["\(source) ! filesink location=\(original)"], executable: "face-blur")
        let b = try CLI.run(["\(source) ! lensdetect draw=false ! lenspixelate block=16 margin=0 ! filesink location=\(blurred)"], executable: "face-blur")
        #expect(a.status == 0 && b.status == 0, "\(a.stderr) \(b.stderr)")
        let before = [UInt8](try Data(contentsOf: URL(fileURLWithPath: original)))
        let after = [UInt8](try Data(contentsOf: URL(fileURLWithPath: blurred)))
        try #require(before.count == 512 * 512 * 4 && after.count == before.count)
        let f = Self.faceInPhoto
        func inFace(_ x: Int, _ y: Int) -> Bool {
            Double(x) >= f.x - 8 && Double(x) <= f.x + f.size + 8 && Double(y) >= f.y - 8 && Double(y) <= f.y + f.size + 8
        }
        var changedOutside = 0, changedInside = 0, insidePixels = 0
        for y in 0..<512 {
            for x in 0..<512 {
                let i = (y * 512 + x) * 4
                let changed = before[i] != after[i] || before[i + 1] != after[i + 1] || before[i + 2] != after[i + 2]
                if inFace(x, y) { insidePixels += 1; if changed { changedInside += 1 } } else if changed { changedOutside += 1 }
            }
        }
        #expect(changedOutside == 0, "\(changedOutside) pixels changed outside the face")
        #expect(Double(changedInside) > 0.6 * Double(insidePixels), "only \(changedInside) of \(insidePixels) face pixels changed")
        // Pixelated: inside a 16-pixel block at the face's centre, every pixel is the same.
        let cx = Int(f.x + f.size / 2), cy = Int(f.y + f.size / 2)
        let bx = Int(f.x) + ((cx - Int(f.x)) / 16) * 16 + 1, by = Int(f.y) + ((cy - Int(f.y)) / 16) * 16 + 1
        let first = Array(after[((by * 512 + bx) * 4)..<((by * 512 + bx) * 4 + 3)])
        for y in by..<(by + 8) { for x in bx..<(bx + 8) {
            #expect(Array(after[((y * 512 + x) * 4)..<((y * 512 + x) * 4 + 3)]) == first, "pixel \(x),\(y) differs within a block")
        } }
    }

    @Test func badModelsAndDevices() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let base = "videotestsrc num-buffers=3 ! videoconvert ! video/x-raw,format=BGRx ! lensdetect name=d "
        // A manifest whose decoder is unknown, and one whose anchors do not match the model's outputs.
        let manifest = try String(contentsOfFile: CLI.packageRoot.appendingPathComponent("Models/face-short-range.json").path, encoding: .utf8)
        let wrongDecoder = dir.appendingPathComponent("wrong-decoder.json").path
        try manifest.replacingOccurrences(of: "\"blazeface\"", with: "\"yolo\"").write(toFile: wrongDecoder, atomically: true, encoding: .utf8)
        let mismatched = dir.appendingPathComponent("mismatched.json").path
        try manifest.replacingOccurrences(of: "face_detection_short_range.tflite", with: "face_detection_full_range_sparse.tflite")
            .write(toFile: mismatched, atomically: true, encoding: .utf8)
        // A catalogue reference that is not two plain names, and a model that is not in the store.
        let badReference = dir.appendingPathComponent("bad-reference.json").path
        try manifest.replacingOccurrences(of: "catalogue:mediapipe-face-detection/face_detection_short_range.tflite", with: "catalogue:../../etc/passwd")
            .write(toFile: badReference, atomically: true, encoding: .utf8)
        let notInstalled = dir.appendingPathComponent("not-installed.json").path
        try manifest.replacingOccurrences(of: "catalogue:mediapipe-face-detection/", with: "catalogue:no-such-model/")
            .write(toFile: notInstalled, atomically: true, encoding: .utf8)
        let cases: [(String, String)] = [
            ("model=/nonexistent/face.json", "d: model manifest /nonexistent/face.json not found"),
            ("model=\(wrongDecoder)", "decoder 'yolo'"),
            ("model=\(mismatched)", "the model's image input is [1,192,192,3] but the manifest says 128x128 NHWC"),
            ("device=NPU", "device NPU is not available here (available: CPU"),
            ("color=green", "property color=green is not a #rrggbb colour"),
            ("model=\(badReference)", "catalogue:../../etc/passwd is not a catalogue reference: write catalogue:NAME/FILE"),
            ("model=\(notInstalled)", "model no-such-model is not installed ("),
            ("model=\(notInstalled)", "run `streamlens models fetch no-such-model`"),
        ]
        var all = cases
        // A model that is not a detector (Magenta's style predictor, when it is installed).
        if magentaAvailable {
            let notDetector = dir.appendingPathComponent("not-a-detector.json").path
            try manifest.replacingOccurrences(of: "catalogue:mediapipe-face-detection/face_detection_short_range.tflite",
                                              with: "catalogue:magenta/style_predict_quantized_256.tflite")
                .write(toFile: notDetector, atomically: true, encoding: .utf8)
            all.append(("model=\(notDetector)", "error: d: \(notDetector): the model's image input is [1,256,256,3] but the manifest says 128x128 NHWC"))
        }
        for (props, message) in all {
            let r = try CLI.run(["run", "-q", base + props + " ! fakesink"], timeout: 30)
            #expect(r.status == 1, "\(props): \(r.stderr)")
            #expect(r.stderr.contains(message), "\(props): \(r.stderr)")
        }
        // Frames the stage cannot take: refused when linking, naming the caps.
        let r = try CLI.run(["run", "-q", "videotestsrc num-buffers=3 ! video/x-raw,format=I420 ! lensdetect ! fakesink"], timeout: 30)
        #expect(r.status == 2)
        #expect(r.stderr.contains("lensdetect0 takes video/x-raw {BGRx, BGRA, RGBx, RGBA, RGB, BGR}; put a videoconvert between videotestsrc0 and lensdetect0"), "\(r.stderr)")
    }
}
