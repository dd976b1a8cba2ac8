import Foundation
import StreamLensCore
import StreamLensBackends
import StreamLensGst
import StreamLensStages
import Testing

/// A stage that writes pixels: inverts GRAY8 frames in place (exercises the writable path).
final class InvertStage: Stage {
    static let descriptor = StageDescriptor(
        name: "lenstestinvert", summary: "invert GRAY8 (test)", example: "videotestsrc ! video/x-raw,format=GRAY8 ! lenstestinvert ! fakesink",
        sinkCaps: "video/x-raw,format=GRAY8", properties: [])
    init(settings: NoSettings) throws {}
    func process(_ frame: Frame) -> FrameOutcome {
        frame.pixels.withMutableBytes { bytes in
            for i in bytes.indices { bytes[i] = 255 &- bytes[i] }
        }
        return .forward
    }
}

/// A stage whose set-up fails, as a stage with a missing model would.
final class FailingStage: Stage {
    static let descriptor = StageDescriptor(name: "lenstestfail", summary: "fails (test)", example: "", properties: [])
    init(settings: NoSettings) throws { throw StageError("model file /nonexistent.onnx not found") }
    func process(_ frame: Frame) -> FrameOutcome { .forward }
}

/// Drops every other frame and records the formats it was told about.
final class OddDropStage: Stage {
    static let descriptor = StageDescriptor(name: "lenstestdropodd", summary: "drops odd frames (test)", example: "", properties: [])
    init(settings: NoSettings) throws {}
    func process(_ frame: Frame) -> FrameOutcome { frame.index % 2 == 1 ? .drop(reason: "odd") : .forward }
}

/// A sink stage: writes each frame's bytes to a file.
final class RawFileSinkStage: Stage {
    static let descriptor = StageDescriptor(
        name: "lenstestrawsink", summary: "writes frames to a file (test sink)", example: "", isSink: true,
        properties: Settings.table)
    struct Settings: StageSettings {
        var location = ""
        static let properties: [Property<Settings>] = [.string("location", \.location, help: "file")]
    }
    let handle: FileHandle
    init(settings: Settings) throws {
        let path = settings.location
        guard FileManager.default.createFile(atPath: path, contents: nil), let h = FileHandle(forWritingAtPath: path) else {
            throw StageError("cannot write \(path)")
        }
        handle = h
    }
    func process(_ frame: Frame) -> FrameOutcome {
        frame.pixels.withBytes { handle.write(Data($0)) }
        return .forward
    }
}

func makePipeline(_ text: String) throws -> Pipeline {
    StandardBackends.register() // lensdetect's models run on OpenVINO
    try GStreamer.initialize(stages: builtinStages + [InvertStage.self, FailingStage.self, OddDropStage.self, RawFileSinkStage.self])
    let pipeline = try Pipeline(description: text)
    pipeline.log = { _ in }
    return pipeline
}

func quietOptions() -> Pipeline.Options {
    var o = Pipeline.Options()
    o.handleSignals = false
    return o
}

func temporaryFile(_ name: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("sl-\(UUID().uuidString)-\(name)").path
}

@Suite(.serialized) struct StageElementTests {
    @Test func passKeepsEveryFrameAndTimestamp() throws {
        let out = temporaryFile("pass.raw")
        defer { try? FileManager.default.removeItem(atPath: out) }
        // videotestsrc pattern=gradient is deterministic: the output must equal the input.
        let p = try makePipeline("videotestsrc num-buffers=50 pattern=gradient ! video/x-raw,format=GRAY8,width=32,height=16 ! lenspass name=pass ! filesink location=\(out)")
        #expect(p.run(quietOptions()) == .finished(interrupted: false))
        let reference = temporaryFile("ref.raw")
        defer { try? FileManager.default.removeItem(atPath: reference) }
        let q = try makePipeline("videotestsrc num-buffers=50 pattern=gradient ! video/x-raw,format=GRAY8,width=32,height=16 ! filesink location=\(reference)")
        #expect(q.run(quietOptions()) == .finished(interrupted: false))
        let a = try Data(contentsOf: URL(fileURLWithPath: out)), b = try Data(contentsOf: URL(fileURLWithPath: reference))
        #expect(a.count == 50 * 32 * 16)
        #expect(a == b)
        #expect(p.stageReports.contains { $0.kind == "stats" && $0.text.hasPrefix("pass: 50 frames in, 50 out, 0 dropped, ") && $0.text.hasSuffix(" fps (lossless, in-line)") })
    }

    @Test func aSinkStageEndsThePipeline() throws {
        let out = temporaryFile("sink.raw"), reference = temporaryFile("sinkref.raw")
        defer { try? FileManager.default.removeItem(atPath: out); try? FileManager.default.removeItem(atPath: reference) }
        let source = "videotestsrc num-buffers=30 pattern=gradient ! video/x-raw,format=GRAY8,width=32,height=16"
        let p = try makePipeline("\(source) ! lenstestrawsink name=sink location=\(out)")
        #expect(p.run(quietOptions()) == .finished(interrupted: false))
        let q = try makePipeline("\(source) ! filesink location=\(reference)")
        #expect(q.run(quietOptions()) == .finished(interrupted: false))
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == Data(contentsOf: URL(fileURLWithPath: reference)))
        #expect(p.stageReports.contains { $0.kind == "stats" && $0.text.hasPrefix("sink: 30 frames in, 30 out, 0 dropped") })
        // Nothing can follow a sink stage.
        #expect(throws: HostError.self) { try makePipeline("\(source) ! lenstestrawsink location=\(out) ! fakesink") }
    }

    @Test func stageWritesPixels() throws {
        let out = temporaryFile("inv.raw")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let p = try makePipeline("videotestsrc num-buffers=5 pattern=black ! video/x-raw,format=GRAY8,width=16,height=16 ! lenstestinvert ! filesink location=\(out)")
        #expect(p.run(quietOptions()) == .finished(interrupted: false))
        let data = try Data(contentsOf: URL(fileURLWithPath: out))
        #expect(data.count == 5 * 16 * 16)
        // videotestsrc black is 16 in GRAY8 (video range); inverted: 239.
        #expect(data.allSatisfy { $0 == 239 })
    }

    @Test func dropsAreCountedAndFramesLeave() throws {
        let out = temporaryFile("odd.raw")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let p = try makePipeline("videotestsrc num-buffers=10 ! video/x-raw,format=GRAY8,width=8,height=8 ! lenstestdropodd name=odd ! filesink location=\(out)")
        #expect(p.run(quietOptions()) == .finished(interrupted: false))
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)).count == 5 * 64)
        #expect(p.stageReports.contains { $0.text.hasPrefix("odd: 10 frames in, 5 out, 5 dropped, ") && $0.text.hasSuffix(" fps (lossless)") })
    }

    @Test func capsChangeMidStreamReachesTheStageAndDownstream() throws {
        let out = temporaryFile("caps.raw")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let p = try makePipeline("""
            concat name=c ! lenspass ! filesink location=\(out) \
            videotestsrc num-buffers=3 ! video/x-raw,format=GRAY8,width=8,height=8,framerate=30/1 ! c. \
            videotestsrc num-buffers=4 ! video/x-raw,format=GRAY8,width=16,height=4,framerate=30/1 ! c.
            """)
        #expect(p.run(quietOptions()) == .finished(interrupted: false))
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)).count == 3 * 64 + 4 * 64)
        let caps = p.stageReports.filter { $0.kind == "caps" }.map(\.text)
        #expect(caps.count == 2)
        #expect(caps.first?.contains("width=(int)8") == true && caps.last?.contains("width=(int)16") == true)
    }

    @Test func capsAreNegotiatedThroughAPassThroughStage() throws {
        // Without the caps query going through lenspass, videotestsrc would not know that
        // downstream wants I420 at 100 pixels wide, and negotiation would fail.
        let p = try makePipeline("videotestsrc num-buffers=3 ! lenspass ! video/x-raw,format=I420,width=100,height=50 ! fakesink")
        #expect(p.run(quietOptions()) == .finished(interrupted: false))
        #expect(p.stageReports.first { $0.kind == "caps" }?.text.contains("format=(string)I420, width=(int)100, height=(int)50") == true)
    }

    @Test func setupErrorStopsThePipelineWithTheStageMessage() throws {
        let p = try makePipeline("videotestsrc num-buffers=3 ! lenstestfail name=f ! fakesink")
        var lines: [String] = []
        p.log = { lines.append($0) }
        #expect(p.run(quietOptions()) == .failed("f: model file /nonexistent.onnx not found"))
        #expect(lines == ["error: f: model file /nonexistent.onnx not found"])
    }

    @Test func specErrorsNameTheProblem() throws {
        func specError(_ text: String) -> String? {
            do { _ = try makePipeline(text); return nil } catch let e as HostError { return e.kind == .spec ? e.message : "runtime: \(e.message)" } catch { return "\(error)" }
        }
        #expect(specError("videotestsrc ! lensnosuch ! fakesink") == "unknown stage 'lensnosuch' (`streamlens stages` lists the stages)")
        #expect(specError("videotestsrc ! nosuchelement ! fakesink") == "unknown element 'nosuchelement' (not installed? `gst-inspect-1.0 nosuchelement` tells)")
        #expect(specError("videotestsrc ! lenspass dealy=4 ! fakesink") == "no property \"dealy\" in element \"lenspass\"")
        #expect(specError("videotestsrc ! ! fakesink")?.hasPrefix("syntax error in pipeline spec") == true)
        #expect(specError("videotestsrc ! audioconvert ! fakesink")?.hasPrefix("cannot link") == true)
    }

    @Test func propertiesAreValidatedOnStart() throws {
        let p = try makePipeline("videotestsrc num-buffers=3 ! lenspass name=slow delay=-4 ! fakesink")
        #expect(p.run(quietOptions()) == .failed("slow: property delay=-4 is out of range 0…10000"))
    }

    @Test func startTimeoutEndsAStuckPipeline() throws {
        // An appsrc nobody feeds never prerolls: the host must give up, not hang.
        let p = try makePipeline("appsrc ! fakesink")
        var options = quietOptions()
        options.startTimeout = 1
        #expect(p.run(options) == .failed("the pipeline did not reach PLAYING within 1 s (stuck in READY)") ||
                p.run(options) == .failed("the pipeline did not reach PLAYING within 1 s (stuck in PAUSED)"))
    }
}
