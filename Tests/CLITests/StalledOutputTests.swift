import Foundation
import Testing

/// No writer may block a frame: metadata records go to a stalled reader from their own bounded
/// queue (dropped and counted, one warning), the video goes on, and one Ctrl-C ends the run with
/// the MP4 finalized. A named pipe nobody reads is refused at start. (docs/bad-inputs.md, P8–P10.)
@Suite(.serialized) struct StalledOutputTests {
    static let dropWarning = "is not being read fast enough: records are dropped"

    /// A live 320x240 stream through lensdetect and lensmetadata into `metadata`, encoded to `out`.
    static func pipeline(metadata: String, out: String) -> String {
        "videotestsrc is-live=true ! video/x-raw,width=320,height=240,framerate=30/1 ! videoconvert ! video/x-raw,format=BGRx ! lensdetect ! lensmetadata location=\(metadata) ! videoconvert ! x264enc tune=zerolatency ! mp4mux ! filesink location=\(out)"
    }

    /// The summary line of `stage` ("lensmetadata0: N frames in, …").
    static func summaryLine(_ stderr: String, _ stage: String) -> String? {
        stderr.split(separator: "\n").first { $0.hasPrefix("\(stage):") && $0.contains(" frames in") }.map(String.init)
    }

    /// "… metadata to X: W records written, D dropped (…), L still unwritten …": W + D + L.
    static func recordsAccountedFor(_ line: String) -> (written: Int, dropped: Int, total: Int)? {
        func number(before word: String) -> Int? {
            guard let r = line.range(of: " " + word) else { return nil }
            return Int(line[..<r.lowerBound].split(separator: " ").last ?? "")
        }
        guard let written = number(before: "records written"), let dropped = number(before: "dropped (not read") else { return nil }
        return (written, dropped, written + dropped + (number(before: "still unwritten") ?? 0))
    }

    /// What a stalled run must show once stopped by one SIGINT: exit 0, the warning once, every
    /// frame accounted for as a record written, dropped or given up, and the MP4 holding every
    /// frame that went through.
    static func expectRecordsNotFramesLost(status: Int32, timedOut: Bool, stderr: String, out: String) {
        #expect(!timedOut && status == 0, "exit \(status)\(timedOut ? " (killed: one Ctrl-C did not end the run)" : ""): \(stderr)")
        #expect(stderr.components(separatedBy: dropWarning).count - 1 == 1, "the drop warning once: \(stderr)")
        let metadata = summaryLine(stderr, "lensmetadata0")
        let frames = metadata.flatMap { StageSummary(line: $0) }
        let records = metadata.flatMap(recordsAccountedFor)
        #expect(records != nil && records!.dropped > 0 && records!.total == frames?.framesIn, "\(metadata ?? stderr)")
        let inFile = countFrames(out)
        #expect(inFile != nil && inFile == frames?.framesOut, "\(inFile.map(String.init) ?? "not playable") frames in the MP4: \(stderr)")
        // More frames than the queue and the 4 KB pipe hold records: the video went past the stall.
        #expect((frames?.framesOut ?? 0) > 100 + 4096 / 100, "\(stderr)")
    }

    /// A reader that opens the FIFO and never reads (a 4 KB pipe): the records fill it, then the
    /// queue; further records are dropped, the frames go on, and one Ctrl-C finalizes the MP4.
    @Test func aFIFOReaderThatNeverReadsCostsRecordsNotFrames() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let fifo = dir.appendingPathComponent("m.fifo").path, out = dir.appendingPathComponent("fifo.mp4").path
        try #require(mkfifo(fifo, 0o600) == 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        try #require(reader >= 0)
        defer { close(reader) }
        _ = fcntl(reader, 1031 /* F_SETPIPE_SZ */, 4096)
        let run = try Background.streamlens(["run", Self.pipeline(metadata: fifo, out: out)])
        try #require(run.waitFor(Self.dropWarning, timeout: 90), "no drop warning: \(run.stderr)")
        // A little more stream past the first drop, then one Ctrl-C.
        Thread.sleep(forTimeInterval: 1)
        let r = run.stop(signal: SIGINT, timeout: 30)
        Self.expectRecordsNotFramesLost(status: r.status, timedOut: r.timedOut, stderr: r.stderr, out: out)
    }

    /// `streamlens run … lensmetadata location=- … | a program that never reads`: the same.
    @Test func standardOutputNobodyReadsCostsRecordsNotFrames() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("stdout.mp4").path, errPath = dir.appendingPathComponent("stderr").path
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        defer { try? err.close() }
        let pipe = Pipe()   // its reading end stays open here and is never read
        _ = fcntl(pipe.fileHandleForWriting.fileDescriptor, 1031 /* F_SETPIPE_SZ */, 4096)
        let process = Process()
        process.executableURL = CLI.binary
        process.arguments = ["run", Self.pipeline(metadata: "-", out: out)]
        process.currentDirectoryURL = CLI.packageRoot
        process.standardOutput = pipe
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try? pipe.fileHandleForWriting.close()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
        func stderr() -> String { (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "" }
        func wait(_ seconds: Double, until done: () -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline { if done() { return true }; usleep(50_000) }
            return done()
        }
        try #require(wait(90) { stderr().contains(Self.dropWarning) || !process.isRunning }, "no drop warning: \(stderr())")
        Thread.sleep(forTimeInterval: 1)
        kill(process.processIdentifier, SIGINT)
        let ended = wait(30) { !process.isRunning }
        if !ended { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        Self.expectRecordsNotFramesLost(status: process.terminationStatus, timedOut: !ended, stderr: stderr(), out: out)
    }

    /// A FIFO nobody has open for reading: writing into it could only wait (its open(2) did, at
    /// the first frame, and Ctrl-C could not end the run). Refused at start, exit 1.
    @Test func aFIFONobodyOpensIsRefusedAtStart() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let fifo = dir.appendingPathComponent("n.fifo").path
        try #require(mkfifo(fifo, 0o600) == 0)
        for stage in ["lensdetect ! lensmetadata location=\(fifo)", "lensdetect metadata=\(fifo)"] {
            let r = try CLI.run(["run", "videotestsrc num-buffers=30 ! videoconvert ! video/x-raw,format=BGRx ! \(stage) ! fakesink"], timeout: 60)
            let name = stage.contains("lensmetadata") ? "lensmetadata0" : "lensdetect0"
            #expect(!r.timedOut && r.status == 1, "\(stage): exit \(r.status)\(r.timedOut ? " (killed)" : ""): \(r.stderr)")
            #expect(r.stderr.contains("error: \(name): metadata file \(fifo) is a named pipe (FIFO) that nobody has open for reading; start its reader first"), "\(r.stderr)")
        }
    }
}
