import Foundation
import Testing

/// Every bad input gets one clear message naming the problem and a non-zero exit code, and
/// never a hang (each run has a time limit).
@Suite struct BadInputTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var args: [String]
        var status: Int32
        var message: String
        var testDescription: String { name }
    }

    static let audioFile: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-tone.wav").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/gst-launch-1.0")
        p.arguments = ["-q", "audiotestsrc", "num-buffers=20", "!", "wavenc", "!", "filesink", "location=\(path)"]
        try? p.run()
        p.waitUntilExit()
        return path
    }()

    static let garbageFile: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-garbage.mp4").path
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<20_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
        return path
    }()

    static let cases: [Case] = [
        Case(name: "unknown stage", args: ["run", "videotestsrc num-buffers=10 ! lensnosuchstage ! fakesink"], status: 2,
             message: "streamlens: unknown stage 'lensnosuchstage' (`streamlens stages` lists the stages)"),
        Case(name: "unknown element", args: ["run", "videotestsrc ! facedetectx ! fakesink"], status: 2,
             message: "streamlens: unknown element 'facedetectx'"),
        Case(name: "unknown property", args: ["run", "videotestsrc ! lenspass dealy=3 ! fakesink"], status: 2,
             message: "streamlens: no property \"dealy\" in element \"lenspass\""),
        Case(name: "stage internals", args: ["run", "videotestsrc num-buffers=3 ! lenspass stage_src::is-live=false ! fakesink"], status: 2,
             message: "streamlens: lenspass0: its inner stage_sink/stage_src are part of the bridge and cannot be set from the spec"),
        Case(name: "syntax error", args: ["run", "videotestsrc ! ! fakesink"], status: 2,
             message: "streamlens: syntax error in pipeline spec"),
        Case(name: "unlinkable", args: ["run", "videotestsrc ! audioconvert ! fakesink"], status: 2,
             message: "streamlens: cannot link"),
        Case(name: "out-of-range property", args: ["run", "videotestsrc num-buffers=3 ! lenspass name=p delay=-3 ! fakesink"], status: 1,
             message: "error: p: property delay=-3 is out of range 0…10000"),
        Case(name: "bad choice", args: ["run", "videotestsrc num-buffers=3 ! lenspass name=p mode=fast ! fakesink"], status: 1,
             message: "error: p: property mode=fast is not one of auto, lossless, live"),
        Case(name: "caps that cannot be negotiated", args: ["run", "videotestsrc num-buffers=3 ! video/x-raw,format=RGB ! lenspass ! video/x-raw,format=I420 ! fakesink"], status: 1,
             message: "error: videotestsrc0: caps could not be negotiated"),
        Case(name: "missing file", args: ["run", "filesrc location=/nonexistent/clip.mp4 ! decodebin ! lenspass ! fakesink"], status: 1,
             message: "No such file \"/nonexistent/clip.mp4\""),
        Case(name: "not a video", args: ["run", "filesrc location=\(audioFile) ! decodebin ! videoconvert ! lenspass ! fakesink"], status: 1,
             message: "a pad is not linked (for example decodebin found no video stream to link: is the input a video?)"),
        Case(name: "corrupt file", args: ["run", "filesrc location=\(garbageFile) ! decodebin ! videoconvert ! lenspass ! fakesink"], status: 1,
             message: "error: typefind: Could not determine type of stream."),
        Case(name: "unset variable", args: ["run", "testsrc-to-mp4"], status: 2,
             message: "streamlens: variable OUTPUT is not set: pass OUTPUT=value after the spec (used in Pipelines/testsrc-to-mp4.pipeline)"),
        Case(name: "missing pipeline file", args: ["run", "Pipelines/nothere.pipeline"], status: 2,
             message: "streamlens: no pipeline file Pipelines/nothere.pipeline"),
        Case(name: "stray argument", args: ["run", "videotestsrc", "!", "fakesink"], status: 2,
             message: "expected NAME=value after the spec, got '!' (quote the whole pipeline as one argument)"),
        Case(name: "unknown option", args: ["run", "--fast", "videotestsrc ! fakesink"], status: 2,
             message: "streamlens: unknown option --fast"),
        Case(name: "bad mode option", args: ["run", "--mode", "fast", "videotestsrc ! fakesink"], status: 2,
             message: "streamlens: --mode must be auto, lossless or live"),
        Case(name: "never starts", args: ["run", "--timeout", "1", "appsrc ! fakesink"], status: 1,
             message: "error: the pipeline did not reach PLAYING within 1 s"),
        Case(name: "unknown command", args: ["frobnicate"], status: 2, message: "streamlens: unknown command frobnicate"),
    ]

    @Test(arguments: cases) func badInput(_ c: Case) throws {
        let r = try CLI.run(c.args, timeout: 30)
        #expect(!r.timedOut, "hung")
        #expect(r.status == c.status, "\(r.stderr)")
        #expect(r.stderr.contains(c.message), "\(r.stderr)")
        #expect(!r.stderr.contains("Fatal error"), "crashed: \(r.stderr)")
    }

    @Test func portInUse() throws {
        let port = 47_000 + Int.random(in: 0..<2000)
        let spec = "videotestsrc is-live=true ! video/x-raw,width=64,height=48 ! lenspass ! tcpserversink host=127.0.0.1 port=\(port)"
        let holder = Process()
        holder.executableURL = CLI.binary
        holder.arguments = ["run", "-q", spec]
        holder.standardOutput = FileHandle.nullDevice
        holder.standardError = FileHandle.nullDevice
        try holder.run()
        defer {
            kill(holder.processIdentifier, SIGKILL)
            holder.waitUntilExit()
        }
        usleep(1_500_000)
        let r = try CLI.run(["run", "-q", spec], timeout: 30)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("error: tcpserversink0: the address or port is already in use"), "\(r.stderr)")
        #expect(r.stderr.contains("127.0.0.1:\(port)"), "\(r.stderr)")
    }

    @Test func missingCameraIsNamed() throws {
        let r = try CLI.run(["run", "v4l2src device=/dev/video-streamlens-test ! videoconvert ! lenspass ! fakesink"], timeout: 30)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("error: v4l2src0: camera /dev/video-streamlens-test not found"), "\(r.stderr)")
    }
}
