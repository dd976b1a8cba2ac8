import Foundation
import StreamLensTesting
import Testing

/// Real pipelines through the built binary. Serialized: they share two cores, and the live
/// tests measure frame age.
@Suite(.serialized) struct RunTests {
    @Test func losslessFileKeepsEveryFrame() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("a.mp4").path
        let r = try CLI.run(["run", "videotestsrc num-buffers=300 ! video/x-raw,format=RGB,width=640,height=360,framerate=30/1 ! lenspass name=pass ! videoconvert ! video/x-raw,format=I420 ! x264enc ! mp4mux ! filesink location=\(out)"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(countFrames(out) == 300)
        #expect(r.stderr.contains("pass: 300 frames in, 300 out, 0 dropped, "), "\(r.stderr)")
        // A pass-through is quicker than a hand-over to its worker: it runs on upstream's thread.
        #expect(r.stderr.contains(" fps (lossless, in-line)"), "\(r.stderr)")
    }

    /// A stage's input keeps no reference to a frame it handed over (stage_sink.c), so stages
    /// that draw into frames nobody else holds copy nothing; when imagefreeze holds every frame
    /// the first stage that writes copies each one, once. The pixels come out the same.
    @Test func stagesWriteIntoFramesNobodyElseHolds() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let photo = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path
        let stages = "lensdetect name=d precision=f32 ! lensblur name=b ! lensoverlay name=o"
        func run(_ name: String, _ frames: String, through: String?) throws -> (stderr: String, pixels: Data) {
            let out = dir.appendingPathComponent(name).path
            let r = try CLI.run(["run", "-v", "filesrc location=\(photo) ! pngdec ! \(frames) ! \(through.map { "\($0) ! " } ?? "")filesink location=\(out)"])
            #expect(r.status == 0, "\(r.stderr)")
            return (r.stderr, try Data(contentsOf: URL(fileURLWithPath: out)))
        }
        // videoconvert makes a new buffer of every frame imagefreeze repeats; after it, nobody holds them.
        let own = try run("own.bgrx", "imagefreeze num-buffers=10 ! videoconvert ! video/x-raw,format=BGRx", through: stages)
        let held = try run("held.bgrx", "videoconvert ! video/x-raw,format=BGRx ! imagefreeze num-buffers=10", through: stages)
        let plain = try run("plain.bgrx", "imagefreeze num-buffers=10 ! videoconvert ! video/x-raw,format=BGRx", through: nil)
        for stage in ["d", "b", "o"] {
            #expect(own.stderr.contains("\(stage): 10 frames in, 10 out, 0 dropped, 0 copies, "), "\(own.stderr)")
        }
        #expect(held.stderr.contains("d: 10 frames in, 10 out, 0 dropped, 10 copies, "), "\(held.stderr)")
        #expect(held.stderr.contains("b: 10 frames in, 10 out, 0 dropped, 0 copies, "), "\(held.stderr)")
        #expect(held.stderr.contains("o: 10 frames in, 10 out, 0 dropped, 0 copies, "), "\(held.stderr)")
        #expect(own.pixels.count == 512 * 512 * 4 * 10)
        #expect(own.pixels == held.pixels, "the stages drew differently into frames they owned")
        #expect(own.pixels != plain.pixels, "the stages drew nothing")
    }

    @Test func teeNamedBranchesAndQuotedValues() throws {
        let dir = try scratchDirectory().appendingPathComponent("with space")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir.deletingLastPathComponent()) }
        let out = dir.appendingPathComponent("t.mp4").path
        let spec = """
            videotestsrc num-buffers=60 ! video/x-raw,format=RGB,width=320,height=240 ! lenspass \
            ! capsfilter caps="video/x-raw, format=(string)RGB, width=(int)320" ! tee name=t \
            t. ! queue ! fakesink \
            t. ! queue ! videoconvert ! video/x-raw,format=I420 ! x264enc tune=zerolatency ! mp4mux ! filesink location="\(out)"
            """
        let r = try CLI.run(["run", "-q", spec])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(countFrames(out) == 60)
        #expect(r.stderr.isEmpty, "quiet run printed: \(r.stderr)")
    }

    @Test func pipelineFileWithVariables() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("p.mp4").path
        let r = try CLI.run(["run", "-q", "testsrc-to-mp4", "OUTPUT=\(out)", "FRAMES=45", "WIDTH=320", "HEIGHT=240"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(countFrames(out) == 45)
        let inspect = try CLI.run(["inspect", "Pipelines/testsrc-to-mp4.pipeline", "OUTPUT=/tmp/x.mp4"])
        #expect(inspect.status == 0)
        #expect(inspect.stdout.hasPrefix("videotestsrc num-buffers=300 pattern=smpte ! video/x-raw,format=RGB,width=640,height=360,framerate=30/1 ! lenspass ! "))
        #expect(inspect.stdout.contains("lenspass0 (lenspass)  [StreamLens stage]"))
    }

    @Test func liveModeKeepsFrameAgeBoundedAndCountsDrops() throws {
        // A 30 fps live source into a stage that needs 100 ms a frame, on a thread of its own as
        // a model is: live mode works on the newest frame, so frames wait at most about one
        // frame interval before the stage.
        let spec = "videotestsrc is-live=true num-buffers=90 ! video/x-raw,width=320,height=240,framerate=30/1 ! lenspass name=slow delay=100 thread=own ! fakesink"
        let live = try CLI.run(["run", spec])
        #expect(live.status == 0, "\(live.stderr)")
        let line = try #require(live.stderr.split(separator: "\n").first { $0.hasPrefix("slow:") && $0.contains("frames in") })
        let s = try #require(StageSummary(line: String(line)))
        #expect(s.mode == "live")
        #expect(s.framesIn + s.dropped == 90, "\(line)")
        #expect(s.dropped >= 45, "\(line)")
        #expect(s.framesOut == s.framesIn)
        let p95 = try #require(s.p95Milliseconds)
        #expect(p95 < 250, "\(line)")

        // The same in lossless mode: every frame, and frames queue up behind the slow stage.
        let lossless = try CLI.run(["run", "--mode", "lossless", spec.replacingOccurrences(of: "num-buffers=90", with: "num-buffers=30")])
        #expect(lossless.status == 0, "\(lossless.stderr)")
        #expect(lossless.stderr.contains("slow: 30 frames in, 30 out, 0 dropped, "), "\(lossless.stderr)")
        // On its own thread, beside upstream's.
        #expect(lossless.stderr.contains(" fps (lossless)"), "\(lossless.stderr)")
    }

    @Test func interruptFinalizesTheFile() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("i.mp4").path
        let run = try Background.streamlens(["run", "-v", "videotestsrc is-live=true ! video/x-raw,width=320,height=240,framerate=30/1 ! lenspass ! videoconvert ! x264enc tune=zerolatency ! mp4mux ! filesink location=\(out)"])
        // Frames reach the file (the temporary one is moved onto it with the first), then Ctrl-C.
        try #require(run.waitFor("lenspass0: video/x-raw", timeout: 60), "\(run.stderr)")
        let deadline = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: out), Date() < deadline { usleep(50_000) }
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(!r.timedOut)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("interrupt: sending end-of-stream"))
        // Every frame that went through the stage is in the file, and the file plays.
        let frames = try #require(countFrames(out), "the mp4 is not playable")
        let line = r.stderr.split(separator: "\n").first { $0.hasPrefix("lenspass0:") && $0.contains(" frames in") }.flatMap { StageSummary(line: String($0)) }
        #expect(frames > 0 && frames == line?.framesOut, "\(frames) frames in the file: \(r.stderr)")
    }

    /// Ctrl-C in lossless mode behind a slow stage: the frames that reached the stage but were
    /// still queued in its bridge (four, as a fast source keeps the queue full) are processed
    /// and written too, not dropped: in = out = frames in the file, 0 dropped.
    @Test func interruptInLosslessModeLosesNoFrameTheStageTook() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("frames.rgb").path
        let (w, h) = (160, 120)
        let run = try Background.streamlens(["run", "-v", "--mode", "lossless",
            "videotestsrc ! video/x-raw,format=RGB,width=\(w),height=\(h),framerate=30/1 ! lenspass delay=50 thread=own ! filesink location=\(out)"])
        try #require(run.waitFor("lenspass0: video/x-raw", timeout: 60), "\(run.stderr)")
        // A few frames written (the stage works through its queue), then Ctrl-C.
        let deadline = Date().addingTimeInterval(60)
        while ((try? FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? 0) < 5 * w * h * 3, Date() < deadline { usleep(50_000) }
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(!r.timedOut && r.status == 0, "\(r.stderr)")
        let written = ((try? FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? 0) / (w * h * 3)
        let line = try #require(r.stderr.split(separator: "\n").first { $0.hasPrefix("lenspass0:") && $0.contains(" frames in") }.flatMap { StageSummary(line: String($0)) }, "\(r.stderr)")
        #expect(line.dropped == 0 && line.framesIn == line.framesOut && written == line.framesOut && written >= 5,
                "\(written) frames written; the stage: \(line.framesIn) in, \(line.framesOut) out, \(line.dropped) dropped: \(r.stderr)")
    }

    /// A filesink's file is replaced once data reaches it (a run that fails to start leaves it
    /// alone: docs/bad-inputs.md rows 73-77): the new file keeps the old one's permissions, a
    /// symbolic link stays a link to it, and no temporary file is left.
    @Test func anOutputIsReplacedWhenDataArrives() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let real = dir.appendingPathComponent("real.mp4").path, link = dir.appendingPathComponent("link.mp4").path
        try Data("old".utf8).write(to: URL(fileURLWithPath: real))
        chmod(real, 0o640)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "real.mp4")
        let r = try CLI.run(["run", "-q", "videotestsrc num-buffers=10 ! video/x-raw,width=160,height=120 ! lenspass ! x264enc ! mp4mux ! filesink location=\(link)"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(countFrames(real) == 10)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == "real.mp4")
        let mode = (try FileManager.default.attributesOfItem(atPath: real)[.posixPermissions] as? Int) ?? 0
        #expect(mode == 0o640, "mode \(String(mode, radix: 8))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["link.mp4", "real.mp4"])
    }

    @Test func anErrorMidStreamStillFinalizesTheFile() throws {
        // identity error-after=50 fails the stream after 50 frames; what is downstream of it gets
        // end-of-stream, so the MP4 gets its index and holds the frames that made it through.
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, middle) in [("plain", "x264enc"), ("stage", "lenspass name=p ! videoconvert ! x264enc")] {
            let out = dir.appendingPathComponent("\(name).mp4").path
            let r = try CLI.run(["run", "videotestsrc num-buffers=100 ! video/x-raw,width=320,height=240,framerate=30/1 ! identity error-after=50 ! \(middle) ! mp4mux ! filesink location=\(out)"], timeout: 30)
            #expect(r.status == 1, "\(name): \(r.stderr)")
            #expect(r.stderr.contains("error: identity0: Failed after iterations as requested."), "\(name): \(r.stderr)")
            // With a stage, the pipeline's own EOS does not come (its bin still counts the
            // stage's appsink), so the host only knows after the 5 s wait: no message then.
            if name == "plain" { #expect(r.stderr.contains("the output written so far was finalized"), "\(r.stderr)") }
            #expect(countFrames(out) == 49, "\(name)")
        }
    }

    /// Downstream of a stage ends the stream early (a sink that wants one picture, an element
    /// that stops after N frames): the stage passes the EOS answer upstream like any element,
    /// so the run ends instead of waiting for ever.
    @Test func downstreamEndOfStreamEndsTheRun() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let png = dir.appendingPathComponent("snap.png").path
        let snap = try CLI.run(["run", "videotestsrc num-buffers=200 ! videoconvert ! lenspass ! pngenc snapshot=true ! filesink location=\(png)"], timeout: 30)
        #expect(!snap.timedOut && snap.status == 0, "\(snap.stderr)")
        #expect(((try? FileManager.default.attributesOfItem(atPath: png)[.size] as? Int) ?? 0) > 1000)
        // An endless source: only the EOS answer coming back through the stage can end it.
        let counted = try CLI.run(["run", "videotestsrc ! videoconvert ! lenspass ! identity eos-after=10 ! fakesink"], timeout: 30)
        #expect(!counted.timedOut && counted.status == 0, "\(counted.stderr)")
        // The frames already in the bridge's queues when the answer came are processed too.
        let summary = counted.stderr.split(separator: "\n").first { $0.hasPrefix("lenspass0:") }.flatMap { StageSummary(line: String($0)) }
        #expect(summary.map { (10...10 + 2 * 4 + 1).contains($0.framesIn) } == true, "\(counted.stderr)")
    }

    /// A filesrc on a FIFO nobody writes blocks its start for as long as no writer comes (opening
    /// a FIFO waits for one): Ctrl-C ends the run at once, 130, nothing to finalize, and the
    /// output's temporary file goes (docs/bad-inputs.md row P12).
    @Test func interruptWhileStuckOpeningAFIFOEndsAtOnce() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let fifo = dir.appendingPathComponent("in.fifo").path
        try #require(mkfifo(fifo, 0o600) == 0)
        let socket = dir.appendingPathComponent("ctl.sock").path
        let run = try Background.streamlens(["run", "--control", socket,
            "filesrc location=\(fifo) ! decodebin ! videoconvert ! x264enc ! mp4mux ! filesink location=\(dir.path)/out.mp4"])
        // The control socket is made after the interrupt handlers and just before the start.
        try #require(ServeTests.waitForSocket(socket, run), "\(run.stderr)")
        let r = run.stop(signal: SIGINT, timeout: 10)
        #expect(!r.timedOut && r.status == 130, "\(r.stderr)")
        #expect(r.stderr.contains("interrupt: the pipeline had not started"), "\(r.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["in.fifo"])
    }

    @Test func secondInterruptAborts() throws {
        // End-of-stream has to wait 3 s behind the slow stage; the second Ctrl-C must not.
        let run = try Background.streamlens(["run", "-v", "videotestsrc is-live=true ! lenspass delay=3000 ! fakesink"])
        try #require(run.waitFor("lenspass0: video/x-raw", timeout: 60), "\(run.stderr)")
        kill(run.pid, SIGINT)
        try #require(run.waitFor("interrupt: sending end-of-stream", timeout: 30), "\(run.stderr)")
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(!r.timedOut)
        #expect(r.status == 130, "\(r.stderr)")
        #expect(r.stderr.contains("aborted"))
    }

    @Test func demoPipelineKeepsFramesRateAndAudio() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.mp4").path, output = dir.appendingPathComponent("out.mp4").path
        let make = Process()
        make.executableURL = CLI.packageRoot.appendingPathComponent("tools/make-demo-clip.sh")
        make.arguments = [input]
        try make.run()
        make.waitUntilExit()
        try #require(make.terminationStatus == 0, "make-demo-clip.sh failed (run make setup)")
        let faces = dir.appendingPathComponent("faces.jsonl").path
        // Three stylizers and a detector on 180 frames: a debug build takes ~40 s here on a quiet
        // machine (AMD EPYC, f32), about twice that with a core kept busy, ~2 fps under
        // AddressSanitizer: the limit only catches a hang, so it is generous and grows with the
        // sanitizer's slowdown. (Speed is measured by the benchmarks, not here.)
        let r = try CLI.run(["run", "demo", "INPUT=\(input)", "OUTPUT=\(output)", "METADATA=\(faces)"], timeout: 240 * CLI.slowdown)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(countFrames(output) == 180)
        // The clip holds the astronaut for its first 45 frames, then a coffee cup, a cat and a
        // rocket: one face boxed on each of the first 45 frames, none after.
        let lines = try String(contentsOfFile: faces, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 180)
        let withFace = lines.enumerated().filter { $0.element.contains("\"score\"") }.map(\.offset)
        #expect(withFace == Array(0..<45), "frames with a face: \(withFace)")
        let streams = probeStreams(output)
        #expect(streams.map(\.codec) == ["h264", "aac"])
        #expect(streams.first?.rate == "30/1")
        let inStreams = probeStreams(input)
        for (a, b) in zip(streams, inStreams) {
            #expect(abs(a.duration - b.duration) < 0.05, "\(a.codec): \(a.duration) s out vs \(b.duration) s in")
        }
    }

    @Test func tagsCrossTheStage() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("tags.mp4").path
        let r = try CLI.run(["run", "-q", "videotestsrc num-buffers=10 ! video/x-raw,width=160,height=120 ! taginject tags=\"title=crossed\" ! lenspass ! videoconvert ! x264enc ! mp4mux ! filesink location=\(out)"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("misordering"), "\(r.stderr)")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffprobe")
        p.arguments = ["-v", "error", "-show_entries", "format_tags=title", "-of", "csv=p=0", out]
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let title = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(title.trimmingCharacters(in: .whitespacesAndNewlines) == "crossed")
    }

    @Test func verbosePrintsNegotiatedCaps() throws {
        let r = try CLI.run(["run", "-v", "videotestsrc num-buffers=5 ! video/x-raw,format=BGRx,width=64,height=48 ! lenspass name=p ! fakesink"])
        #expect(r.status == 0)
        #expect(r.stderr.contains("p: video/x-raw, format=(string)BGRx, width=(int)64, height=(int)48"), "\(r.stderr)")
    }
}

@Suite struct CommandTests {
    @Test func helpAndStages() throws {
        let help = try CLI.run(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("usage: streamlens run"))
        let stages = try CLI.run(["stages"])
        #expect(stages.status == 0)
        #expect(stages.stdout.contains("lenspass: "))
        #expect(stages.stdout.contains("delay=0  [int 0…10000, live]"))
        #expect(stages.stdout.contains("mode=auto  [auto|lossless|live]"))
        let none = try CLI.run([])
        #expect(none.status == 2)
    }

    /// Every file in Pipelines/ expands and parses (every element and property exists).
    @Test func everyPipelineFileParses() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: CLI.packageRoot.appendingPathComponent("Pipelines").path)
            .filter { $0.hasSuffix(".pipeline") }
        #expect(files.count >= 7, "\(files)")
        for file in files {
            // (URI and NAME: serve's templates.)
            let r = try CLI.run(["inspect", String(file.dropLast(".pipeline".count)), "INPUT=/tmp/in.mp4", "OUTPUT=/tmp/out.mp4",
                                 "URI=rtsp://127.0.0.1/cam", "NAME=cam"])
            #expect(r.status == 0, "\(file): \(r.stderr)")
        }
    }

    /// Every stage's example (shown by `streamlens stages` and in its doc comment) runs.
    @Test func everyStagesExampleRuns() throws {
        let stages = try CLI.run(["stages"])
        let examples = stages.stdout.split(separator: "\n").compactMap { line -> String? in
            guard let r = line.range(of: "example: streamlens run '") else { return nil }
            return String(line[r.upperBound...].dropLast())
        }
        #expect(examples.count >= 3, "\(stages.stdout)")
        for example in examples {
            // An example that listens (lensrtsp's port=) does so here on a port the kernel had
            // free: no test takes a fixed port.
            let runnable = example.replacingOccurrences(of: #"\bport=[0-9]+"#, with: "port=\(freeLoopbackPort())", options: .regularExpression)
            let r = try CLI.run(["run", "-q", runnable])
            #expect(r.status == 0, "\(runnable): \(r.stderr)")
        }
    }
}
