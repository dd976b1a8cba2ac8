import Foundation
import Testing

/// Ordinary events and unfriendly peers during a run — a terminal that closes, a reader that goes
/// away, a control client that misbehaves or is someone else — end the run like Ctrl-C at worst
/// (the MP4 finalized), never kill it or widen access. Each waits for what the run says, not for
/// a fixed time. (Malformed inference answers: HostileServerTests; bad inputs at start-up: the
/// catalogue, docs/bad-inputs.md.)
@Suite(.serialized) struct HostileInputTests {
    /// A live 320x240 clip written to `out` through lenspass (its caps line on stderr with -v).
    static func fileRun(_ out: String, extra: [String] = [], frames: Int? = nil) throws -> Background {
        let count = frames.map { " num-buffers=\($0)" } ?? ""
        return try Background.streamlens(["run", "-v"] + extra + ["videotestsrc is-live=true\(count) ! video/x-raw,width=320,height=240,framerate=30/1 ! lenspass ! videoconvert ! x264enc tune=zerolatency ! mp4mux ! filesink location=\(out)"])
    }

    static func framesThrough(_ stderr: String) -> Int? {
        stderr.split(separator: "\n").first { $0.hasPrefix("lenspass0:") && $0.contains(" frames in") }.flatMap { StageSummary(line: String($0)) }?.framesOut
    }

    /// An ssh session dropping sends SIGHUP: the run ends like Ctrl-C, the MP4 finalized.
    @Test func aHangUpFinalizesTheFile() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("hup.mp4").path
        let run = try Self.fileRun(out)
        try #require(run.waitFor("lenspass0: video/x-raw", timeout: 60), "\(run.stderr)")
        let r = run.stop(signal: SIGHUP, timeout: 30)
        #expect(!r.timedOut && r.status == 0, "exit \(r.status): \(r.stderr)")
        #expect(r.stderr.contains("interrupt: sending end-of-stream"), "\(r.stderr)")
        let frames = countFrames(out)
        #expect(frames != nil && frames == Self.framesThrough(r.stderr), "\(frames.map(String.init) ?? "not playable"): \(r.stderr)")
    }

    /// `streamlens run … 2>&1 | head -1`: stderr becomes a pipe nobody reads. Writes to it fail
    /// (SIGPIPE is ignored), the run goes on and finalizes its file at end of stream.
    @Test func aClosedStderrIsNotTheEndOfTheRun() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("pipe.mp4").path
        let pipe = Pipe()
        let process = Process()
        process.executableURL = CLI.binary
        process.arguments = ["run", "-v", "videotestsrc num-buffers=60 ! video/x-raw,width=320,height=240,framerate=30/1 ! lenspass ! videoconvert ! x264enc ! mp4mux ! filesink location=\(out)"]
        process.currentDirectoryURL = CLI.packageRoot
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        try pipe.fileHandleForReading.close() // nobody will read: every write to stderr fails
        try process.run()
        try? pipe.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning, Date() < deadline { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0,
                "ended by \(process.terminationReason == .uncaughtSignal ? "signal" : "exit") \(process.terminationStatus)")
        #expect(countFrames(out) == 60)
    }

    /// A control client that shuts its reading side and sends commands: the replies cannot be
    /// written (EPIPE, not SIGPIPE), the run goes on to its end and the MP4 plays.
    @Test func aControlClientThatHangsUpIsNotTheEndOfTheRun() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("c.mp4").path, socket = dir.appendingPathComponent("c.sock").path
        let run = try Self.fileRun(out, extra: ["--control", socket], frames: 90)
        try #require(run.waitFor("lenspass0: video/x-raw", timeout: 60), "\(run.stderr)")
        let client = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.shutdown(socket.SHUT_RD)
            for _ in range(3):
                try: s.sendall(b"help\\nlist\\n")
                except OSError: pass
            s.close()
            print("sent")
            """, socket], timeout: 30)
        #expect(client.stdout.contains("sent"), "\(client.stderr)")
        #expect(run.waitForExit(timeout: 60), "\(run.stderr)")
        let r = run.stop()
        #expect(r.status == 0, "exit \(r.status): \(r.stderr)")
        #expect(countFrames(out) == 90)
    }

    /// The control socket is this user's alone whatever the umask; lines and clients are bounded.
    @Test func theControlSocketIsPrivateAndBounded() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("m.sock").path
        // umask 000 for the run: without care, bind() would make the socket 0777.
        let run = try Background(URL(fileURLWithPath: "/bin/sh"), ["-c", "umask 000; exec \"$0\" \"$@\"", CLI.binary.path,
                                                                     "run", "-v", "--control", socket, "videotestsrc is-live=true ! lenspass ! fakesink"])
        try #require(run.waitFor("lenspass0: video/x-raw", timeout: 60), "\(run.stderr)")
        let mode = (try FileManager.default.attributesOfItem(atPath: socket)[.posixPermissions] as? Int) ?? -1
        #expect(mode == 0o600, "socket mode \(String(mode, radix: 8))")
        let client = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", """
            import socket, sys, time
            def connect():
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); return s
            def reply(lines):
                s = connect(); f = s.makefile("rwb")
                for line in lines: f.write(line + b"\\n")
                f.flush(); answer = f.readline().decode().strip(); s.close(); return answer
            # Eight clients, each answered (so all eight are being served), then a ninth.
            held = []
            for i in range(8):
                s = connect(); s.sendall(b"get delay\\n"); s.makefile("rb").readline(); held.append(s)
            print("ninth:", connect().makefile("rb").readline().decode().strip())
            for s in held: s.close()
            # Once they are gone a client is served again (their threads end when they see the close).
            for _ in range(100):
                answer = reply([b"get delay"])
                if answer == "0": break
                time.sleep(0.1)
            print("again:", answer)
            print("long:", reply([b"get " + b"x" * 5000]))
            print("inner:", reply([b"get stage_sink max-buffers"]))
            """, socket], timeout: 60)
        #expect(client.stdout.contains("long: error: a command line longer than 4096 bytes"), "\(client.stdout) | \(client.stderr) | \(client.status)")
        #expect(client.stdout.contains("inner: error: no element named stage_sink"), "\(client.stdout)")
        #expect(client.stdout.contains("ninth: error: too many control clients at once (at most 8)"), "\(client.stdout)")
        #expect(client.stdout.contains("again: 0"), "\(client.stdout)")
        let r = run.stop()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: socket))
    }

    /// Twelve clients connect and say nothing (eight slots): the eight served are closed after
    /// 10 s idle with a line saying so, the four beyond got "too many" at once, and a new client's
    /// `list` is answered within 15 s of the crowd arriving (the check's part 6), the run going on.
    @Test func idleControlClientsDoNotLockOthersOut() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("i.sock").path
        let run = try Background.streamlens(["run", "-v", "--control", socket, "videotestsrc is-live=true ! lenspass ! fakesink"])
        try #require(run.waitFor("lenspass0: video/x-raw", timeout: 60), "\(run.stderr)")
        let client = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", """
            import socket, sys, time
            idle = []
            for _ in range(12):
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); idle.append(s)
            t0 = time.time(); answer = None; refused = 0
            while time.time() - t0 < 15 and answer is None:
                c = socket.socket(socket.AF_UNIX); c.settimeout(2); c.connect(sys.argv[1])
                try: c.sendall(b"list\\n")
                except OSError: pass  # refused and closed before the command: its line is there all the same
                try:
                    a = c.recv(4096).decode()
                    if "too many" in a: refused += 1
                    elif a: answer = a
                except (socket.timeout, OSError): pass
                c.close()
                if answer is None: time.sleep(1)
            print("refused %d times" % refused)
            print("answered after %.1f s: %s" % (time.time() - t0, answer.splitlines()[0]) if answer else "locked out")
            for s in idle:
                s.settimeout(5)
                try: print("idle client:", s.recv(4096).decode().strip() or "<closed>")
                except socket.timeout: print("idle client: <still open>")
            """, socket], timeout: 90)
        let lines = client.stdout.split(separator: "\n")
        let answered = try #require(lines.first { $0.hasPrefix("answered after") }, "\(client.stdout) \(client.stderr)")
        #expect(!answered.contains(": error"), "\(answered)")
        #expect(lines.filter { $0 == "idle client: closing: idle for 10 s" }.count == 8, "\(client.stdout)")
        #expect(lines.filter { $0.hasPrefix("idle client: error: too many control clients at once (at most 8") }.count == 4, "\(client.stdout)")
        #expect(!client.stdout.contains("refused 0 times"), "the slots were never all taken: \(client.stdout)")
        let r = run.stop()
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// Another user connecting is refused (SO_PEERCRED), even when the socket's mode would let
    /// them in. Needs root to make that user.
    @Test(.enabled(if: getuid() == 0, "needs root to make a second user for the test"))
    func anotherUserIsRefused() throws {
        let user = "slctl\(getpid() % 100_000)"
        let add = try CLI.spawn(URL(fileURLWithPath: "/usr/sbin/useradd"), ["--no-create-home", "--shell", "/usr/sbin/nologin", user])
        try #require(add.status == 0, "useradd: \(add.stderr)")
        defer { _ = try? CLI.spawn(URL(fileURLWithPath: "/usr/sbin/userdel"), [user]) }
        let dir = URL(fileURLWithPath: "/tmp/streamlens-control-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("c.sock").path
        let run = try Background.streamlens(["run", "-v", "--control", socket, "videotestsrc is-live=true ! lenspass ! fakesink"])
        try #require(run.waitFor("lenspass0: video/x-raw", timeout: 60), "\(run.stderr)")
        chmod(socket, 0o666) // as if the mode were wide open: the uid check still refuses
        let client = try CLI.spawn(URL(fileURLWithPath: "/usr/sbin/runuser"), ["-u", user, "--", "/usr/bin/python3", "-c", """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            try: s.sendall(b"set delay=5\\n")
            except OSError: pass  # refused and closed before the command: the reply is there all the same
            print(s.makefile("rb").readline().decode().strip())
            """, socket], timeout: 30)
        #expect(client.stdout.contains("error: not allowed: the control socket takes commands from its owner only"), "\(client.stdout)\(client.stderr)")
        #expect(!run.stderr.contains("control: set delay=5"), "\(run.stderr)")
        _ = run.stop()
    }

    /// End-of-stream that never comes after Ctrl-C (a stage stuck for longer): the run stops
    /// without it at --eos-timeout, exit 130.
    @Test func endOfStreamThatDoesNotComeIsNotWaitedForForEver() throws {
        let run = try Background.streamlens(["run", "-v", "--eos-timeout", "2", "videotestsrc is-live=true ! lenspass delay=10000 ! fakesink"])
        try #require(run.waitFor("lenspass0: video/x-raw", timeout: 60), "\(run.stderr)")
        kill(run.pid, SIGINT)
        #expect(run.waitForExit(timeout: 40), "still running: \(run.stderr)")
        let r = run.stop()
        #expect(r.status == 130, "exit \(r.status): \(r.stderr)")
        #expect(r.stderr.contains("error: end of stream did not come within 2 s of the interrupt; stopping without it"), "\(r.stderr)")
    }

    /// `streamlens import` runs the importer of the checkout it was built in, not a
    /// tools/coreml_import.py that happens to be in the current folder.
    @Test func aToolInTheCurrentFolderIsNotRun() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("tools"), withIntermediateDirectories: true)
        try "print('PLANTED')\n".write(to: dir.appendingPathComponent("tools/coreml_import.py"), atomically: true, encoding: .utf8)
        let r = try CLI.spawn(CLI.binary, ["import", "nothing-here.mlmodel"], in: dir)
        #expect(!r.stdout.contains("PLANTED") && !r.stderr.contains("PLANTED"), "the planted script ran: \(r.stdout)")
        #expect(r.status == 1 && r.stderr.contains("nothing-here.mlmodel"), "\(r.status): \(r.stderr)")
    }
}
