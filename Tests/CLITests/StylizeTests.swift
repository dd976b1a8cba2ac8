import Foundation
import Testing

/// Magenta's networks are not redistributed: `streamlens models fetch magenta` installs them into
/// the model store (make setup does, from ../shared/models when that folder is there). Only the
/// tests of arbitrary-style transfer itself need them; the rest use the shipped styles.
let magentaAvailable = ["style_predict_quantized_256.tflite", "style_transfer_f16_384.tflite", "style_transfer_quantized_384.tflite"]
    .allSatisfy { FileManager.default.fileExists(atPath: CLI.installedModel("magenta", $0)) }
let magentaMissing = "Magenta's networks are not installed (streamlens models fetch magenta [--from MIRROR]; make setup takes them from ../shared/models when that folder exists): arbitrary-style test skipped"

/// lensstylize through the built CLI on real photos: raw RGB in, raw RGB out, pixel statistics.
@Suite(.serialized) struct StylizeTests {
    /// `count` frames of a photo from .deps/media at `width`×`height`, as a source spec.
    static func photo(_ name: String = "astronaut.png", width: Int, height: Int, count: Int, rate: String = "10/1") -> String {
        let decoder = name.hasSuffix(".png") ? "pngdec" : "jpegdec"
        return "filesrc location=.deps/media/\(name) ! \(decoder) ! videoconvert ! videoscale ! video/x-raw,format=RGB,width=\(width),height=\(height),pixel-aspect-ratio=1/1 ! imagefreeze num-buffers=\(count) ! video/x-raw,framerate=\(rate)"
    }

    /// Runs `source ! middle ! RGB filesink` and returns the frames written.
    static func frames(_ source: String, _ middle: String?, width: Int, height: Int, input: [(after: Double, line: String)] = [],
                       inputClock: String? = nil, extraArgs: [String] = [], output: String? = nil) throws -> (frames: [[UInt8]], result: CLI.Result) {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = output ?? dir.appendingPathComponent("out.rgb").path
        let spec = [source, middle, "videoconvert ! video/x-raw,format=RGB ! filesink location=\(out)"].compactMap { $0 }.joined(separator: " ! ")
        let r = try CLI.run(["run"] + extraArgs + [spec], timeout: 120, input: input, inputClock: inputClock)
        let data = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data())
        let size = width * height * 3
        let frames = stride(from: 0, to: data.count - size + 1, by: size).map { Array(data[$0..<$0 + size]) }
        return (frames, r)
    }

    static func meanAbsoluteDifference(_ a: [UInt8], _ b: [UInt8]) -> Double {
        Double(zip(a, b).reduce(0) { $0 + abs(Int($1.0) - Int($1.1)) }) / Double(max(1, a.count))
    }

    static func meanColor(_ rgb: [UInt8]) -> [Double] {
        (0..<3).map { c in Double(stride(from: c, to: rgb.count, by: 3).reduce(0) { $0 + Int(rgb[$1]) }) / Double(rgb.count / 3) }
    }

    /// Correlation of the gradient magnitudes of two RGB images: structure kept or not.
    static func edgeCorrelation(_ a: [UInt8], _ b: [UInt8], width: Int, height: Int) -> Double {
        func gradient(_ img: [UInt8]) -> [Double] {
            func grey(_ x: Int, _ y: Int) -> Double { let p = (y * width + x) * 3; return Double(Int(img[p]) + Int(img[p + 1]) + Int(img[p + 2])) / 3 }
            var g: [Double] = []
            for y in 1..<(height - 1) { for x in 1..<(width - 1) {
                g.append(hypot(grey(x + 1, y) - grey(x - 1, y), grey(x, y + 1) - grey(x, y - 1)))
            } }
            return g
        }
        let ga = gradient(a), gb = gradient(b)
        let ma = ga.reduce(0, +) / Double(ga.count), mb = gb.reduce(0, +) / Double(gb.count)
        var sab = 0.0, saa = 0.0, sbb = 0.0
        for (x, y) in zip(ga, gb) { sab += (x - ma) * (y - mb); saa += (x - ma) * (x - ma); sbb += (y - mb) * (y - mb) }
        return sab / (saa * sbb).squareRoot()
    }

    /// Magenta copies the style of a picture it was never trained on: here the manifest's default,
    /// Models/styles/waves.jpg (one of the shipped style pictures).
    @Test(.enabled(if: magentaAvailable, Comment(rawValue: magentaMissing)))
    func arbitraryStyleMovesColoursTowardTheStylePictureAndKeepsTheEdges() throws {
        let (w, h) = (512, 512)
        let src = Self.photo(width: w, height: h, count: 2)
        let (input, _) = try Self.frames(src, nil, width: w, height: h)
        // f32: the CPU's default precision (bf16 on some) moves the figures; pinned, they hold anywhere.
        let (styled, r) = try Self.frames(src, "lensstylize model=Models/magenta-style.json precision=f32", width: w, height: h)
        #expect(r.status == 0, "\(r.stderr)")
        try #require(input.count == 2 && styled.count == 2, "frames in \(input.count), out \(styled.count): \(r.stderr)")
        // The style image's own colours, decoded the same way.
        let picture = CLI.packageRoot.appendingPathComponent("Models/styles/waves.jpg").path
        let (style, _) = try Self.frames("filesrc location=\(picture) ! jpegdec ! videoconvert ! videoscale ! video/x-raw,format=RGB,width=256,height=256",
                                         nil, width: 256, height: 256)
        try #require(style.count == 1)
        // Colour statistics: a coarse 4x4x4 colour histogram (overlap with the painting's) and
        // per-channel mean and spread (distance to the painting's).
        func histogram(_ rgb: [UInt8]) -> [Double] {
            var h = [Double](repeating: 0, count: 64)
            for i in stride(from: 0, to: rgb.count, by: 3) { h[Int(rgb[i] >> 6) * 16 + Int(rgb[i + 1] >> 6) * 4 + Int(rgb[i + 2] >> 6)] += 1 }
            return h.map { $0 / Double(rgb.count / 3) }
        }
        func overlap(_ a: [Double], _ b: [Double]) -> Double { zip(a, b).map { min($0, $1) }.reduce(0, +) }
        func meanAndSpread(_ rgb: [UInt8]) -> [Double] {
            let mean = Self.meanColor(rgb)
            let spread = (0..<3).map { c in
                (Double(stride(from: c, to: rgb.count, by: 3).reduce(0.0) { $0 + pow(Double(rgb[$1]) - mean[c], 2) }) / Double(rgb.count / 3)).squareRoot()
            }
            return mean + spread
        }
        func distance(_ a: [Double], _ b: [Double]) -> Double { zip(a, b).map { ($0 - $1) * ($0 - $1) }.reduce(0, +).squareRoot() }
        let painting = histogram(style[0]), paintingStats = meanAndSpread(style[0])
        let overlapBefore = overlap(histogram(input[0]), painting), overlapAfter = overlap(histogram(styled[0]), painting)
        let before = distance(meanAndSpread(input[0]), paintingStats), after = distance(meanAndSpread(styled[0]), paintingStats)
        // At f32 here: overlap 0.11 -> 0.82, distance 113 -> 13, change 70, edge correlation 0.35.
        #expect(overlapAfter > overlapBefore + 0.4, "colour histogram overlap with the painting: \(overlapBefore) before, \(overlapAfter) after")
        #expect(after < 0.5 * before, "colour mean+spread distance to the painting: \(before) before, \(after) after")
        let change = Self.meanAbsoluteDifference(input[0], styled[0])
        let edges = Self.edgeCorrelation(input[0], styled[0], width: w, height: h)
        #expect(change > 20, "mean absolute change \(change)")
        #expect(edges > 0.3, "edge correlation \(edges)")
        // A deterministic model on a still picture: both frames the same.
        #expect(styled[0] == styled[1])
    }

    @Test func strengthZeroIsTheInputAndHalfIsHalfway() throws {
        let (w, h) = (200, 120)
        let src = Self.photo("chelsea.png", width: w, height: h, count: 3)
        let (input, _) = try Self.frames(src, nil, width: w, height: h)
        let (zero, r0) = try Self.frames(src, "lensstylize model=Models/mosaic.json inference-size=128 strength=0", width: w, height: h)
        let (full, r1) = try Self.frames(src, "lensstylize model=Models/mosaic.json inference-size=128 strength=1", width: w, height: h)
        let (half, r2) = try Self.frames(src, "lensstylize model=Models/mosaic.json inference-size=128 strength=0.5", width: w, height: h)
        for r in [r0, r1, r2] { #expect(r.status == 0, "\(r.stderr)") }
        try #require(input.count == 3 && zero.count == 3 && full.count == 3 && half.count == 3)
        #expect(zero == input, "strength 0 must give the input back exactly")
        #expect(Self.meanAbsoluteDifference(full[0], input[0]) > 20)
        let worst = (0..<input[0].count).map { i in abs(2 * Int(half[0][i]) - Int(full[0][i]) - Int(input[0][i])) }.max() ?? 99
        #expect(worst <= 2, "strength 0.5 is halfway between input and full style (within rounding); worst 2x error \(worst)")
    }

    /// Two stylizers on one model in one process compile it once (one stream each) and give
    /// what one alone gives; each summary says the precision and threads it runs with.
    @Test func twoStagesOnOneModelShareItInOneProcess() throws {
        let (w, h) = (160, 96)
        let src = Self.photo("chelsea.png", width: w, height: h, count: 3)
        let (alone, r0) = try Self.frames(src, "lensstylize model=Models/mosaic.json inference-size=96 precision=f32", width: w, height: h)
        #expect(r0.status == 0, "\(r0.stderr)")
        #expect(r0.stderr.contains("precision f32, \(ProcessInfo.processInfo.activeProcessorCount) thread"), "\(r0.stderr)")
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let second = dir.appendingPathComponent("second.rgb").path
        let (first, r) = try Self.frames(src + " ! tee name=t ! queue", "lensstylize model=Models/mosaic.json inference-size=96 precision=f32 "
            + "! videoconvert ! video/x-raw,format=RGB ! queue ! tee name=done  t. ! queue ! lensstylize model=Models/mosaic.json inference-size=96 precision=f32 "
            + "! videoconvert ! video/x-raw,format=RGB ! filesink location=\(second)  done.", width: w, height: h)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stderr.split(separator: "\n").filter { $0.hasPrefix("lensstylize") && $0.contains(" frames in, ") }
        #expect(lines.count == 2 && lines.allSatisfy { $0.contains("precision f32, ") && $0.contains(" in 2 streams (its share of the cores, not pinned)") }, "\(r.stderr)")
        let data = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: second))) ?? Data())
        #expect(first.count == 3 && data.count == 3 * w * h * 3)
        #expect(first == alone, "the shared model gives what a model of its own gives")
        #expect(Array(data.prefix(w * h * 3)) == alone.first ?? [])
    }

    @Test(arguments: [(320, 240), (640, 360), (240, 400), (100, 60)])
    func anyFrameSizeAndAspectRatio(_ w: Int, _ h: Int) throws {
        let src = Self.photo(width: w, height: h, count: 3)
        let (input, _) = try Self.frames(src, nil, width: w, height: h)
        let (styled, r) = try Self.frames(src, "lensstylize model=Models/mosaic.json inference-size=128", width: w, height: h)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(styled.count == 3, "\(w)x\(h): \(styled.count) frames out")
        if let a = input.first, let b = styled.first {
            #expect(Self.meanAbsoluteDifference(a, b) > 15)
            #expect(Self.edgeCorrelation(a, b, width: w, height: h) > 0.2)
        }
    }

    /// stylize-file with its defaults (the shipped mosaic style).
    @Test func fileInEveryFrameOutAudioKept() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.mp4").path, output = dir.appendingPathComponent("out.mp4").path
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = ["-v", "error", "-y", "-loop", "1", "-framerate", "15", "-t", "2", "-i", CLI.packageRoot.appendingPathComponent(".deps/media/coffee.png").path,
                            "-f", "lavfi", "-t", "2", "-i", "sine=frequency=440:sample_rate=44100",
                            "-vf", "scale=320:240,format=yuv420p", "-c:v", "libx264", "-preset", "veryfast", "-c:a", "aac", "-shortest", input]
        try ffmpeg.run()
        ffmpeg.waitUntilExit()
        try #require(ffmpeg.terminationStatus == 0)
        let r = try CLI.run(["run", "stylize-file", "INPUT=\(input)", "OUTPUT=\(output)", "SIZE=128"], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(countFrames(output) == countFrames(input))
        #expect(countFrames(output) == 30)
        let streams = probeStreams(output), inStreams = probeStreams(input)
        #expect(streams.map(\.codec) == ["h264", "aac"])
        #expect(streams.first?.rate == "15/1")
        for (a, b) in zip(streams, inStreams) {
            #expect(abs(a.duration - b.duration) < 0.05, "\(a.codec): \(a.duration) s out vs \(b.duration) s in")
        }
    }

    @Test func fileWithoutAudio() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.mp4").path, output = dir.appendingPathComponent("out.mp4").path
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = ["-v", "error", "-y", "-loop", "1", "-framerate", "10", "-t", "1", "-i", CLI.packageRoot.appendingPathComponent(".deps/media/chelsea.png").path,
                            "-vf", "scale=160:120,format=yuv420p", "-c:v", "libx264", "-preset", "veryfast", input]
        try ffmpeg.run()
        ffmpeg.waitUntilExit()
        try #require(ffmpeg.terminationStatus == 0)
        let r = try CLI.run(["run", "stylize-video", "INPUT=\(input)", "OUTPUT=\(output)", "SIZE=128"], timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(countFrames(output) == 10)
        // The pipeline that keeps audio, given a file without: a clear error, not a hang.
        let noAudio = try CLI.run(["run", "--timeout", "4", "stylize-file", "INPUT=\(input)", "OUTPUT=\(output)", "SIZE=128"], timeout: 60)
        #expect(noAudio.status == 1, "\(noAudio.stderr)")
        // Said as soon as the demuxer's streams are known, naming what it has.
        #expect(noAudio.stderr.contains("error: demux: no stream of demux can link to queue"), "\(noAudio.stderr)")
        #expect(noAudio.stderr.contains("the input has no audio stream (only video)"), "\(noAudio.stderr)")
    }

    @Test func controlCommandChangesStrengthMidStream() throws {
        let (w, h) = (160, 120)
        // identity sync=true plays the 40 frames in real time (4 s) so the command, sent 1 s
        // after the first frame reached the stage (its caps line, -v), lands mid-stream; it
        // also answers the latency query as live, hence --mode lossless.
        let src = Self.photo(width: w, height: h, count: 40) + " ! identity sync=true"
        let (input, _) = try Self.frames(Self.photo(width: w, height: h, count: 1), nil, width: w, height: h)
        let (out, r) = try Self.frames(src, "lensstylize model=Models/mosaic.json name=style inference-size=128", width: w, height: h,
                                       input: [(1.0, "set style strength=7"), (1.1, "set strength=0"), (1.2, "get style strength")],
                                       inputClock: "style: video/x-raw", extraArgs: ["-v", "--mode", "lossless", "--control", "-"])
        #expect(r.status == 0, "\(r.stderr)")
        try #require(out.count == 40 && input.count == 1, "\(out.count) frames out: \(r.stderr)")
        #expect(r.stderr.contains("control: error: style: property strength=7.0 is out of range 0.0…1.0"), "\(r.stderr)")
        #expect(r.stderr.contains("control: set strength=0"), "\(r.stderr)")
        #expect(r.stderr.contains("control: 0\n"), "\(r.stderr)")
        let changed = out.map { Self.meanAbsoluteDifference($0, input[0]) > 10 }
        // Stylized before the command, the input itself after it, and one switch between.
        #expect(changed.prefix(5).allSatisfy { $0 } && changed.suffix(5).allSatisfy { !$0 }, "\(changed)")
        #expect(zip(changed, changed.dropFirst()).filter { $0 != $1 }.count == 1, "\(changed)")
        #expect(out.last == input[0])
    }

    @Test func controlSocketSwitchesDeviceAndStyleWithoutStopping() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("control.sock").path
        let script = dir.appendingPathComponent("client.py").path
        // A manifest that checks out (its file is there) whose model does not compile: taken,
        // then refused by the load in the background and set back.
        let broken = dir.appendingPathComponent("broken.json").path
        try Data("not a network".utf8).write(to: dir.appendingPathComponent("mosaic.onnx"))
        try String(contentsOfFile: CLI.packageRoot.appendingPathComponent("Models/mosaic.json").path, encoding: .utf8).write(toFile: broken, atomically: true, encoding: .utf8)
        // A client as a user would write one: Python's socket module, one reply per line.
        try """
            import os, socket, sys, time
            path = sys.argv[1]
            # Wait for stylized frames in the output (the model is loaded and frames flow), then
            # a little more: changes sent before the first frame are applied together. Connect
            # then: a client idle for 10 s is closed.
            while not os.path.exists(sys.argv[2]) or os.path.getsize(sys.argv[2]) < \(160 * 120 * 3):
                time.sleep(0.1)
            time.sleep(1)
            for _ in range(100):
                try:
                    s = socket.socket(socket.AF_UNIX); s.connect(path); break
                except OSError:
                    time.sleep(0.1)
            f = s.makefile("rw")
            def send(line):
                f.write(line + "\\n"); f.flush()
                return f.readline().strip()
            for line in ["set device=AUTO", "set model=Models/nope.json", "set model=\(broken)", "set bogus=1", "get device"]:
                print(line, "->", send(line), flush=True)
                time.sleep(0.8 * \(CLI.slowdown))
            # A model that is not there is refused before anything is set (the stage's check).
            for _ in range(100):
                if send("get model") == "Models/mosaic.json": break
                time.sleep(0.2 * \(CLI.slowdown))
            print("list ->", send("list"), flush=True)
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let client = Process()
        client.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        let output = dir.appendingPathComponent("out.rgb").path
        client.arguments = [script, socket, output]
        let clientOut = dir.appendingPathComponent("client.out")
        _ = FileManager.default.createFile(atPath: clientOut.path, contents: nil)
        client.standardOutput = try FileHandle(forWritingTo: clientOut)
        try client.run()
        let (w, h) = (160, 120)
        // Frames at 10 a second until the client is done (the background loads finish while they
        // flow), then Ctrl-C: how long that takes is the client's business, not a schedule.
        let source = "filesrc location=.deps/media/astronaut.png ! pngdec ! videoconvert ! videoscale ! video/x-raw,format=RGB,width=\(w),height=\(h),pixel-aspect-ratio=1/1 ! imagefreeze ! video/x-raw,framerate=10/1 ! identity sync=true"
        let run = try Background.streamlens(["run", "--mode", "lossless", "--control", socket,
                                             "\(source) ! lensstylize model=Models/mosaic.json inference-size=128 ! videoconvert ! video/x-raw,format=RGB ! filesink location=\(output)"])
        let deadline = Date().addingTimeInterval(120)
        while client.isRunning, Date() < deadline { usleep(100_000) }
        let r = run.stop(signal: SIGINT, timeout: 30)
        if client.isRunning { kill(client.processIdentifier, SIGKILL) }
        client.waitUntilExit()
        let replies = try String(contentsOf: clientOut, encoding: .utf8)
        #expect(!r.timedOut && r.status == 0, "\(r.stderr)")
        // Lossless: every frame that reached the stage while models were swapped came out.
        let written = ((try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int) ?? 0) / (w * h * 3)
        let line = r.stderr.split(separator: "\n").first { $0.hasPrefix("lensstylize0:") && $0.contains(" frames in") }.flatMap { StageSummary(line: String($0)) }
        #expect(written > 0 && line?.framesIn == written && line?.dropped == 0, "\(written) frames written, the stage: \(line.map { "\($0.framesIn) in, \($0.framesOut) out, \($0.dropped) dropped" } ?? "no summary"): \(r.stderr)")
        #expect(replies.contains("set device=AUTO -> ok"), "\(replies)")
        #expect(replies.contains("set bogus=1 -> error: lensstylize0 has no property bogus"), "\(replies)")
        #expect(replies.contains("get device -> AUTO"), "\(replies)")
        #expect(replies.contains("list -> lensstylize0 (lensstylize): model=Models/mosaic.json style-image= strength=1"), "\(replies)")
        #expect(r.stderr.contains("now using Models/mosaic.json on AUTO"), "\(r.stderr)")
        #expect(replies.contains("set model=Models/nope.json -> error: lensstylize0: model manifest Models/nope.json not found"), "\(replies)")
        #expect(replies.contains("set model=\(broken) -> ok"), "\(replies)")
        #expect(r.stderr.contains("warning: lensstylize0: ") && r.stderr.contains("keeping Models/mosaic.json on AUTO"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: socket), "the socket is removed at the end")
    }

    /// A still scene is temporal=blend's case of no motion (the noise is what the confidence
    /// tolerates).
    @Test func smoothingReducesFlickerOnAStillNoisyScene() throws {
        let (w, h, n) = (160, 120, 20)
        let (still, _) = try Self.frames(Self.photo(width: w, height: h, count: 1), nil, width: w, height: h)
        try #require(still.count == 1)
        // A still scene with sensor-like noise: ±12 levels, different in every frame.
        var seed: UInt64 = 42
        func noise() -> Int {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return Int((seed >> 33) % 25) - 12
        }
        var raw = [UInt8]()
        for _ in 0..<n { raw += still[0].map { UInt8(clamping: Int($0) + noise()) } }
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("noisy.rgb").path
        try Data(raw).write(to: URL(fileURLWithPath: input))
        let src = "filesrc location=\(input) ! rawvideoparse width=\(w) height=\(h) format=rgb framerate=10/1"
        func flicker(_ frames: [[UInt8]]) -> Double {
            zip(frames, frames.dropFirst()).map { Self.meanAbsoluteDifference($0, $1) }.reduce(0, +) / Double(frames.count - 1)
        }
        let (plain, r0) = try Self.frames(src, "lensstylize model=Models/mosaic.json inference-size=128 temporal=off", width: w, height: h)
        let (smooth, r1) = try Self.frames(src, "lensstylize model=Models/mosaic.json inference-size=128 temporal=blend smoothing=0.8", width: w, height: h)
        #expect(r0.status == 0 && r1.status == 0, "\(r0.stderr)\(r1.stderr)")
        try #require(plain.count == n && smooth.count == n)
        let a = flicker(plain), b = flicker(smooth)
        #expect(b < 0.6 * a, "flicker (mean absolute change between frames): \(a) without smoothing, \(b) with 0.8")
        // Still stylized, not frozen on the first frame's noise.
        #expect(Self.meanAbsoluteDifference(smooth[n - 1], still[0]) > 15)
    }

    // MARK: bad input

    /// A copy of the Magenta manifest in `dir` with `edit` applied (its networks are catalogue
    /// references, valid anywhere; the default style picture is made absolute).
    static func magentaManifest(in dir: URL, _ edit: (inout [String: Any]) -> Void) throws -> String {
        let data = try Data(contentsOf: CLI.packageRoot.appendingPathComponent("Models/magenta-style.json"))
        var json = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        var style = json["style"] as! [String: Any]
        style["image"] = CLI.packageRoot.appendingPathComponent("Models").appendingPathComponent(style["image"] as! String).path
        json["style"] = style
        edit(&json)
        let path = dir.appendingPathComponent("m\(UUID().uuidString.prefix(6)).json").path
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Each case a run of lensstylize with `properties` that must fail with `message`, one error line.
    static func expectRefused(_ cases: [(properties: String, message: String)]) throws {
        for (properties, message) in cases {
            let r = try CLI.run(["run", "videotestsrc num-buffers=3 ! video/x-raw,width=64,height=48 ! videoconvert ! lensstylize \(properties) ! fakesink"])
            #expect(r.status == 1, "\(properties): \(r.stderr)")
            #expect(r.stderr.contains(message), "\(properties): expected '\(message)' in \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }.count == 1, "one error line: \(r.stderr)")
        }
    }

    /// Refused before any network is loaded: these need no Magenta.
    @Test func badModelsAndStyleImages() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let noDefault = try Self.magentaManifest(in: dir) { json in
            var style = json["style"] as! [String: Any]
            style.removeValue(forKey: "image")
            json["style"] = style
        }
        let notAnImage = dir.appendingPathComponent("notes.jpg").path
        try "not a picture".write(toFile: notAnImage, atomically: true, encoding: .utf8)
        try Self.expectRefused([
            ("model=\(noDefault)", "\(noDefault) is an arbitrary-style model: set style-image=PATH to the picture whose style to copy"),
            ("model=\(noDefault) style-image=/nope/scream.jpg", "image /nope/scream.jpg not found"),
            ("model=Models/magenta-style.json style-image=\(notAnImage)", "image \(notAnImage) cannot be decoded as a picture"),
            ("style-image=\(notAnImage)", "style-image is for arbitrary-style models; Models/mosaic.json has its style built in"),
            ("model=Models/face-short-range.json", "Models/face-short-range.json describes a detector (decoder 'blazeface'), not an image-to-image model; use it with lensdetect"),
            ("model=Models/nope.json", "model manifest Models/nope.json not found"),
            ("inference-size=big", "inference-size=big: sides must be whole numbers in 16…4096"),
            ("device=TPU", "device TPU is not available here"),
        ])
        // Magenta's transfer network given as a detector: refused by lensdetect with the reverse advice.
        let r = try CLI.run(["run", "videotestsrc num-buffers=3 ! videoconvert ! lensdetect model=Models/magenta-style.json ! fakesink"])
        #expect(r.status == 1 && r.stderr.contains("describes an image-to-image model (decoder 'image'), not a detector; use it with lensstylize"), "\(r.stderr)")
    }

    /// Magenta not installed (an empty model store): one message naming the command that installs it.
    @Test func magentaNotInstalledNamesTheFetchCommand() throws {
        let store = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: store) }
        var environment = ProcessInfo.processInfo.environment
        environment["STREAMLENS_MODELS"] = store.path
        let r = try CLI.spawn(CLI.binary, ["run", "videotestsrc num-buffers=3 ! videoconvert ! lensstylize model=Models/magenta-style.json ! fakesink"],
                              environment: environment)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("error: lensstylize0: model magenta is not installed (\(store.path)/magenta/"), "\(r.stderr)")
        #expect(r.stderr.contains("run `streamlens models fetch magenta`"), "\(r.stderr)")
    }

    /// A manifest whose input layout does not match the network: found when it is loaded.
    @Test(.enabled(if: magentaAvailable, Comment(rawValue: magentaMissing)))
    func aManifestThatDoesNotMatchItsNetwork() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let wrongLayout = try Self.magentaManifest(in: dir) { json in
            var input = json["input"] as! [String: Any]
            input["layout"] = "NCHW"
            json["input"] = input
        }
        try Self.expectRefused([
            ("model=\(wrongLayout)", "the model's image input has 384 channels in NCHW layout; the manifest's RGB gives 3 (is its layout or color_order right?)"),
        ])
    }
}
