import Foundation
import Testing

/// What a run does to the file it writes when things go wrong (Sources/StreamLensGst/OutputFiles.swift):
/// a file the user could not write is refused as filesink refuses it; an existing file is
/// replaced only by a finished output, so a full disk or an aborted run leaves it as it was and
/// no temporary file beside it; a final move that fails is a failed run that says where the
/// output is. (Rows P4–P7 of docs/bad-inputs.md.)
@Suite(.serialized) struct OutputFileTests {
    /// A scratch folder others may enter (the run as `nobody` must reach what is in it).
    static func openScratch() throws -> URL {
        let dir = try scratchDirectory()
        chmod(dir.path, 0o755)
        return dir
    }

    /// Waits (at most 6 s) for a run's temporary output to appear in `dir`: filesink has opened
    /// it, and the run's interrupt handlers are installed by then.
    static func waitForTemporary(in dir: URL) -> Bool {
        for _ in 0..<600 {
            if !temporaries(in: dir).isEmpty { return true }
            usleep(10_000)
        }
        return false
    }

    static func temporaries(in dir: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).filter { $0.hasSuffix(".partial") }
    }

    static func writeClip(_ path: String, frames: Int) throws {
        let r = try CLI.run(["run", "-q", "videotestsrc num-buffers=\(frames) ! video/x-raw,width=160,height=120 ! lenspass ! x264enc ! mp4mux ! filesink location=\(path)"])
        try #require(r.status == 0 && countFrames(path) == frames, "exit \(r.status): \(r.stderr)")
    }

    /// A mode-444 file (as root, a file of someone else's in a folder everyone may write: root
    /// ignores file modes, so the run is made as `nobody`). gst-launch-1.0's filesink refuses
    /// both ("Could not open file for writing"); renaming over them would not have.
    @Test func aFileTheUserCannotWriteIsNotReplaced() throws {
        let dir = try Self.openScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let folder = dir.appendingPathComponent("shared"), home = dir.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        chmod(folder.path, 0o777)
        chmod(home.path, 0o777)
        let kept = folder.appendingPathComponent("keep.jpg").path, fresh = folder.appendingPathComponent("new.jpg").path
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: kept))
        chmod(kept, 0o444)
        var program = CLI.binary, prefix: [String] = []
        if geteuid() == 0 {
            // As nobody, with a copy of the binary it can reach.
            let bin = dir.appendingPathComponent("streamlens")
            try FileManager.default.copyItem(at: CLI.binary, to: bin)
            chmod(bin.path, 0o755)
            program = URL(fileURLWithPath: "/usr/bin/setpriv")
            prefix = ["--reuid=65534", "--regid=65534", "--clear-groups", "env", "HOME=\(home.path)", bin.path]
        }
        func run(into path: String) throws -> CLI.Result {
            try CLI.spawn(program, prefix + ["run", "-q", "videotestsrc num-buffers=3 ! video/x-raw,width=64,height=48 ! lenspass ! jpegenc ! filesink location=\(path)"])
        }
        let allowed = try run(into: fresh)
        try #require(allowed.status == 0 && ((try? Data(contentsOf: URL(fileURLWithPath: fresh)))?.count ?? 0) > 0,
                     "a plain run into the same folder must work, or the refusal proves nothing: exit \(allowed.status): \(allowed.stderr)")
        let refused = try run(into: kept)
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains(#"error: filesink0: could not open file "\#(kept)" for writing: Permission denied"#), "\(refused.stderr)")
        #expect(try String(contentsOfFile: kept, encoding: .utf8) == "keep me")
        #expect(Self.temporaries(in: folder).isEmpty)
    }

    /// A disk that fills mid-run (a file size limit: writes fail with EFBIG as with ENOSPC): the
    /// existing clip is kept byte for byte, the unfinished one removed, the run fails saying so.
    @Test func aFullDiskKeepsTheEarlierOutput() throws {
        let dir = try Self.openScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("clip.mp4").path
        try Self.writeClip(out, frames: 30)
        let before = try Data(contentsOf: URL(fileURLWithPath: out))
        // 64 KB at most per file; SIGXFSZ ignored so the write fails instead of killing the run.
        let script = "trap '' XFSZ; ulimit -f 64; exec \"$0\" \"$@\""
        let r = try CLI.spawn(URL(fileURLWithPath: "/bin/bash"), ["-c", script, CLI.binary.path, "run", "-q",
                                                                   "videotestsrc num-buffers=600 ! video/x-raw,width=320,height=240 ! lenspass ! x264enc ! mp4mux ! filesink location=\(out)"])
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("warning: filesink0: writing the new \(out) failed; the earlier file is kept as it was"), "\(r.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == before)
        #expect(Self.temporaries(in: dir).isEmpty, "\(Self.temporaries(in: dir))")
    }

    /// Ctrl-C before any frame came through the stage (the source sends none: a valve drops
    /// them): the muxer would finalize an empty file over the existing one. The run is aborted
    /// instead (exit 130), the existing file as it was, no temporary file left beside it.
    @Test func anInterruptBeforeAnyFrameKeepsTheEarlierOutput() throws {
        let dir = try Self.openScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("clip.mp4").path
        try Self.writeClip(out, frames: 10)
        let before = try Data(contentsOf: URL(fileURLWithPath: out))
        let run = try Background.streamlens(["run", "videotestsrc is-live=true ! valve drop=true ! videoconvert ! lenspass ! videoconvert ! x264enc ! mp4mux ! filesink location=\(out)"])
        try #require(Self.waitForTemporary(in: dir), "no temporary file appeared: \(run.stderr)")
        kill(run.pid, SIGINT)
        #expect(run.waitForExit(timeout: 30))
        #expect(run.process.terminationStatus == 130, "\(run.stderr)")
        #expect(run.stderr.contains("interrupt: no frame had come through lenspass0 yet; nothing is written"), "\(run.stderr)")
        #expect(run.stderr.contains("warning: filesink0: the earlier \(out) is kept as it was"), "\(run.stderr)")
        #expect(Self.temporaries(in: dir).isEmpty, "\(Self.temporaries(in: dir))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == before)
    }

    /// Ctrl-C twice while the detector's model is still being loaded: the process ends at once
    /// (exit 130), the existing file as it was, no temporary file left beside it.
    @Test func aSecondInterruptLeavesNoTemporaryFile() throws {
        let dir = try Self.openScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("clip.mp4").path
        try Self.writeClip(out, frames: 10)
        let before = try Data(contentsOf: URL(fileURLWithPath: out))
        let run = try Background.streamlens(["run", "-q", "videotestsrc is-live=true ! videoconvert ! lensdetect ! videoconvert ! x264enc ! mp4mux ! filesink location=\(out)"])
        try #require(Self.waitForTemporary(in: dir), "no temporary file appeared: \(run.stderr)")
        kill(run.pid, SIGINT)
        // The second as soon as the first was taken (a fixed 20 ms let a loaded machine finish
        // the run in between, 1 run in ~10 with a core busy).
        for _ in 0..<500 where !run.stderr.contains("interrupt: sending end-of-stream") { usleep(2_000) }
        kill(run.pid, SIGINT)
        #expect(run.waitForExit(timeout: 30))
        #expect(run.process.terminationStatus == 130, "\(run.stderr)")
        #expect(Self.temporaries(in: dir).isEmpty, "\(Self.temporaries(in: dir))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == before)
    }

    /// The final move fails (the target became a folder with something in it during the run):
    /// the run exits 1 and names the file the finished output is in, which plays.
    @Test func aFailedFinalMoveFailsTheRunAndSaysWhereTheOutputIs() throws {
        let dir = try Self.openScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("clip.mp4").path
        try Self.writeClip(out, frames: 10)
        let run = try HostileInputTests.fileRun(out)
        try #require(run.waitFor("lenspass0: video/x-raw", timeout: 60), "\(run.stderr)")
        try FileManager.default.removeItem(atPath: out)
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        try Data("x".utf8).write(to: URL(fileURLWithPath: out).appendingPathComponent("inside"))
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(!r.timedOut && r.status == 1, "exit \(r.status): \(r.stderr)")
        let partial = try #require(Self.temporaries(in: dir).first, "no output left: \(r.stderr)")
        let path = dir.appendingPathComponent(partial).path
        #expect(r.stderr.contains("error: filesink0: could not move \(path) onto \(out): ") && r.stderr.contains("; the output is in \(path)"), "\(r.stderr)")
        #expect((countFrames(path) ?? 0) > 0, "the output left there does not play")
    }
}
