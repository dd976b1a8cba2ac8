import Foundation
import StreamLensTesting
import Testing

/// `streamlens serve`: many sources in one process, one pipeline each, added and removed over
/// the control socket while the others run. Real cameras (other `streamlens run … lensrtsp`
/// processes) and real clips; every wait is for what a process says, bounded, never a schedule.
/// Every server gets a port the kernel had free (freeLoopbackPort), never a fixed one.
@Suite(.serialized) struct ServeTests {
    /// One line sent to the control socket, the reply line back — by Python's socket module, as
    /// a user's script would. Nothing (an empty reply) when none came within `timeout`.
    static func ask(_ socket: String, _ line: String, timeout: Double = 60) throws -> String {
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", askScript, socket, line, "\(timeout)"], timeout: timeout + 10)
        return r.stdout.trimmingCharacters(in: .newlines)
    }

    /// `ask` as a process left running: its reply is its stdout once it exits.
    static func askInBackground(_ socket: String, _ line: String, timeout: Double = 60) throws -> Background {
        try Background(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", askScript, socket, line, "\(timeout)"])
    }

    static let askScript = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode() + b"\\n")
        s.settimeout(float(sys.argv[3])); buf = b""
        while not buf.endswith(b"\\n"):
            d = s.recv(65536)
            if not d: break
            buf += d
        print(buf.decode(), end="")
        """

    struct Source: Decodable {
        var name: String
        var uri: String
        var state: String
        var fps: Double
        var frames: Int
        var drops: Int
        var restarts: Int
        var error: String?
    }

    static func sources(_ socket: String) throws -> [String: Source] {
        let reply = try ask(socket, "sources")
        let list = try JSONDecoder().decode([Source].self, from: Data(reply.utf8))
        return Dictionary(uniqueKeysWithValues: list.map { ($0.name, $0) })
    }

    /// Polls `sources` until `condition` holds (false after `timeout` seconds).
    static func waitForSources(_ socket: String, timeout: Double = 120, _ condition: ([String: Source]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let s = try? sources(socket), condition(s) { return true }
            usleep(200_000)
        }
        return false
    }

    /// What `sources` says now, in a line: what a wait on it shows when it gives up.
    static func seen(_ socket: String) -> String {
        guard let list = try? sources(socket) else { return "sources: no answer" }
        return "sources: " + list.values.sorted { $0.name < $1.name }.map { s in
            "\(s.name) \(s.state), \(s.frames) frames, \(s.restarts) restarts" + (s.error.map { " (\($0))" } ?? "")
        }.joined(separator: "; ")
    }

    static func waitForSocket(_ path: String, _ server: Background) -> Bool {
        for _ in 0..<600 where server.isRunning {
            if FileManager.default.fileExists(atPath: path) { return true }
            usleep(100_000)
        }
        return false
    }

    /// A camera: another streamlens serving a moving test pattern over RTSP.
    static func startCamera(port: Int) throws -> Background {
        let camera = try Background.streamlens(["run", "videotestsrc is-live=true pattern=ball ! video/x-raw,width=320,height=240,framerate=15/1 ! lensrtsp port=\(port) mount=/cam key-int=15"])
        try #require(camera.waitFor("lensrtsp0: serving ", timeout: 60), "camera: \(camera.stderr)")
        return camera
    }

    /// The issue's case: four cameras, one killed and restarted. Its source reconnects (its
    /// watchdog); the other three receive frames all through the outage (counted); one
    /// compiled model serves the four detectors.
    @Test func aKilledCameraCostsTheOthersNothing() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // door's camera is killed and started again on the port it had: the port is kept.
        let ports = freeLoopbackPorts(2), flakyPort = ports[0], steadyPort = ports[1]
        var flaky = try Self.startCamera(port: flakyPort)
        let steady = try Self.startCamera(port: steadyPort) // three sources watch this one (a shared media)
        let socket = dir.appendingPathComponent("serve.sock").path
        // The shipped template: camera → watchdog → faces → DIR/NAME.jsonl.
        var environment = ProcessInfo.processInfo.environment
        for (name, value) in ["TIMEOUT": "2", "BACKOFF": "0.5", "MAX_BACKOFF": "1", "JITTER": "0", "OUT": dir.path] {
            environment["STREAMLENS_VAR_" + name] = value
        }
        let serve = try Background.streamlens(["serve", "camera-faces", "door=rtsp://127.0.0.1:\(flakyPort)/cam", "hall=rtsp://127.0.0.1:\(steadyPort)/cam",
                                               "yard=rtsp://127.0.0.1:\(steadyPort)/cam", "gate=rtsp://127.0.0.1:\(steadyPort)/cam", "--control", socket],
                                              environment: environment)
        try #require(Self.waitForSocket(socket, serve), "\(serve.stderr)")
        let others = ["hall", "yard", "gate"]
        try #require(Self.waitForSources(socket) { s in s.count == 4 && s.values.allSatisfy { $0.state == "playing" && $0.frames > 10 } },
                     "\(Self.seen(socket))\n\(serve.stderr)")

        kill(flaky.pid, SIGKILL)
        _ = flaky.waitForExit(timeout: 10)
        try #require(serve.waitFor("[door] warning: watchdog-door: source lost", timeout: 60), "\(serve.stderr)")
        let atLoss = try Self.sources(socket)
        // During the outage the others go on: each gets 30 more frames (2 s of its camera)
        // while door's source is still down.
        let onDuringOutage = Self.waitForSources(socket) { s in others.allSatisfy { (s[$0]?.frames ?? 0) >= (atLoss[$0]?.frames ?? 0) + 30 } }
        let doorStillDown = !serve.stderr.contains("[door] watchdog-door: source back")
        let endOfOutage = Self.seen(socket)
        flaky = try Self.startCamera(port: flakyPort)
        try #require(serve.waitFor("[door] watchdog-door: source back after", timeout: 120), "\(serve.stderr)")
        let atReturn = try Self.sources(socket)
        #expect(onDuringOutage && doorStillDown, "others at the loss: \(others.map { atLoss[$0]?.frames ?? -1 }); at the end of the outage: \(endOfOutage)\n\(serve.stderr)")
        #expect(Self.waitForSources(socket) { s in (s["door"]?.frames ?? 0) > (atReturn["door"]?.frames ?? 0) + 15 },
                "door after its camera came back: \(atReturn["door"]?.frames ?? -1) frames at its return, now \(Self.seen(socket))\n\(serve.stderr)")
        let now = try Self.sources(socket)
        #expect((now["door"]?.restarts ?? 0) >= 1)
        #expect(others.allSatisfy { now[$0]?.restarts == 0 && now[$0]?.state == "playing" }, "\(now)")

        let end = serve.stop(signal: SIGTERM, timeout: 60)
        #expect(end.status == 0 && !end.timedOut, "\(end.stderr)")
        // Each source ended with its summary, and the four detectors ran one compiled model.
        for name in ["door"] + others {
            #expect(end.stderr.contains("[\(name)] lensdetect"), "\(name): \(end.stderr)")
        }
        #expect(end.stderr.contains("compiled once for 4 stages"), "\(end.stderr)")
        // Each camera's frames in its own file, a JSON line each.
        for name in ["door"] + others {
            let lines = ((try? String(contentsOfFile: dir.appendingPathComponent("\(name).jsonl").path, encoding: .utf8)) ?? "").split(separator: "\n")
            #expect(lines.count > 30 && lines.allSatisfy { $0.hasPrefix("{") }, "\(name).jsonl: \(lines.count) lines")
        }
        _ = steady.stop()
        _ = flaky.stop()
    }

    /// A template writing one MP4 per source.
    static func writeFileTemplate(_ dir: URL) throws -> String {
        let template = dir.appendingPathComponent("file.pipeline").path
        try """
            uridecodebin uri=${URI} ! identity sync=true ! videoconvert ! video/x-raw,format=RGB
              ! lensdetect model=Models/face-short-range.json ! videoconvert ! x264enc speed-preset=ultrafast ! mp4mux ! filesink location=\(dir.path)/${NAME}.mp4
            """.write(toFile: template, atomically: true, encoding: .utf8)
        return template
    }

    static func makeClip(_ path: String, seconds: Int = 30) throws {
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"), ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-t", "\(seconds)",
                                                                         "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", path], timeout: 120)
        try #require(r.status == 0, "\(r.stderr)")
    }

    /// A serve of the MP4 template on a fresh 30 s clip, its control socket up: (folder, clip,
    /// socket, server).
    static func startFileServe(_ sources: [String] = []) throws -> (dir: URL, clip: String, socket: String, serve: Background) {
        let dir = try scratchDirectory()
        let clip = dir.appendingPathComponent("clip.mp4").path
        try makeClip(clip)
        let template = try writeFileTemplate(dir)
        let socket = dir.appendingPathComponent("serve.sock").path
        let serve = try Background.streamlens(["serve", template] + sources.map { "\($0)=file://\(clip)" } + ["--control", socket])
        try #require(waitForSocket(socket, serve), "\(serve.stderr)")
        return (dir, clip, socket, serve)
    }

    /// add and remove while running: a removed source's file is finalized at once and it leaves
    /// `sources`; the other runs on; SIGTERM finalizes the rest.
    @Test func addAndRemoveWhileRunning() throws {
        let (dir, clip, socket, serve) = try Self.startFileServe()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try Self.sources(socket).isEmpty)
        #expect(try Self.ask(socket, "add one file://\(clip)") == "ok")
        #expect(try Self.ask(socket, "add two file://\(clip)") == "ok")
        try #require(Self.waitForSources(socket) { s in s.count == 2 && s.values.allSatisfy { $0.frames >= 30 } }, "\(serve.stderr)")
        #expect(try Self.ask(socket, "remove one") == "ok")
        // Finalized by the time `remove` answers: a playable file.
        let one = countFrames(dir.appendingPathComponent("one.mp4").path) ?? 0
        #expect(one >= 30, "one.mp4: \(one) frames\n\(serve.stderr)")
        let after = try Self.sources(socket)
        #expect(after.keys.sorted() == ["two"] && after["two"]?.state == "playing", "\(after)")
        let twoAtRemove = after["two"]?.frames ?? 0
        #expect(Self.waitForSources(socket) { s in (s["two"]?.frames ?? 0) >= twoAtRemove + 30 }, "two stopped with one")
        // The same name can be used again once removed.
        #expect(try Self.ask(socket, "add one file://\(clip)") == "ok")
        let end = serve.stop(signal: SIGTERM, timeout: 60)
        #expect(end.status == 0 && !end.timedOut, "\(end.stderr)")
        let two = countFrames(dir.appendingPathComponent("two.mp4").path) ?? 0
        #expect(two > one, "two.mp4: \(two) frames, one.mp4: \(one)")
        #expect((countFrames(dir.appendingPathComponent("one.mp4").path) ?? 0) > 0, "the second one.mp4")
        #expect(end.stderr.contains("[one] ending: sending end-of-stream"), "\(end.stderr)")
        #expect(!end.stderr.contains("cut short"), "a removed source is not a damaged input: \(end.stderr)")
    }

    /// Every source's pipeline has the template's stage names: its figures carry its name, on the
    /// metrics page (a `source` label, read by promtool) and in `sources`, and an ended source
    /// keeps its counts there. Two clips of 30 and 60 frames: exact counts, no timing.
    @Test func eachSourceHasItsOwnFigures() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let short = dir.appendingPathComponent("short.mp4").path, long = dir.appendingPathComponent("long.mp4").path
        try Self.makeClip(short, seconds: 1)
        try Self.makeClip(long, seconds: 2)
        // A live branch beside the clip's keeps each pipeline playing after its clip has ended,
        // so the stage's figures stay on the page to be read.
        let template = dir.appendingPathComponent("count.pipeline").path
        try """
            uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=RGB ! lenspass name=count ! fakesink
            videotestsrc is-live=true ! video/x-raw,width=64,height=48,framerate=10/1 ! fakesink
            """.write(toFile: template, atomically: true, encoding: .utf8)
        let socket = dir.appendingPathComponent("serve.sock").path
        let port = freeLoopbackPort()
        let serve = try Background.streamlens(["serve", "--metrics", "\(port)", template, "a=file://\(short)", "b=file://\(long)", "--control", socket])
        try #require(Self.waitForSocket(socket, serve), "\(serve.stderr)")
        try #require(Self.waitForSources(socket) { $0["a"]?.frames == 30 && $0["b"]?.frames == 60 }, "\((try? Self.sources(socket)).map { "\($0)" } ?? "")\n\(serve.stderr)")
        let a = "streamlens_stage_frames_received_total{source=\"a\",stage=\"count\"}"
        let b = "streamlens_stage_frames_received_total{source=\"b\",stage=\"count\"}"
        let page = try #require(MetricsEndpointTests.scrape(port) { $0[a] == 30 && $0[b] == 60 }, "no metrics page")
        #expect(page[a] == 30 && page[b] == 60, "\(page.text)")
        #expect(!page.text.contains("{stage=\"count\"}"), "a stage's series without its source")
        if MetricsEndpointTests.promtool != nil {
            let check = try MetricsEndpointTests.promtoolCheck(page.text)
            #expect(check.status == 0, "\(check.output)")
        }
        // A source that ends keeps its counts in `sources` (its stages and their metrics are gone).
        let end = serve.stop(signal: SIGTERM, timeout: 60)
        #expect(end.status == 0 && !end.timedOut, "\(end.stderr)")
        let plain = dir.appendingPathComponent("plain.pipeline").path
        try "uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=RGB ! lenspass name=count ! fakesink".write(toFile: plain, atomically: true, encoding: .utf8)
        let socket2 = dir.appendingPathComponent("serve2.sock").path
        let serve2 = try Background.streamlens(["serve", plain, "a=file://\(short)", "b=file://\(long)", "--control", socket2])
        try #require(Self.waitForSocket(socket2, serve2), "\(serve2.stderr)")
        #expect(Self.waitForSources(socket2) { s in s["a"]?.state == "ended" && s["b"]?.state == "ended" }, "\(serve2.stderr)")
        let ended = try Self.sources(socket2)
        #expect(ended["a"]?.frames == 30 && ended["b"]?.frames == 60 && ended["a"]?.fps == 0, "\(ended)")
        let end2 = serve2.stop(signal: SIGTERM, timeout: 60)
        #expect(end2.status == 0 && !end2.timedOut, "\(end2.stderr)")
    }

    /// Refused commands: one line starting with "error" each, and nothing else changes.
    @Test func badCommandsChangeNothing() throws {
        let (dir, clip, socket, serve) = try Self.startFileServe(["one"])
        defer { try? FileManager.default.removeItem(at: dir) }
        try #require(Self.waitForSources(socket) { $0["one"]?.state == "playing" }, "\(serve.stderr)")
        let refused: [(String, String)] = [
            ("frob one", "error: unknown command 'frob'"),
            ("add one file://\(clip)", "error: a source named one exists already"),
            ("add two not-a-uri", "error: 'not-a-uri' is not a URI"),
            ("add two file:///nowhere/clip.mp4", "error: two: "),
            ("add two", "error: add takes NAME URI"),
            ("add bad/name file://\(clip)", "error: source name 'bad/name' must be"),
            ("add two file:///a b", "error: add takes NAME URI"),
            ("remove nobody", "error: no source named nobody (sources: one)"),
            ("set nobody threshold=0.5", "error: no source named nobody"),
            ("set one bogus=1", "error: lensdetect"),
            ("get", "error: get takes the source's name first"),
        ]
        for (line, expected) in refused {
            let reply = try Self.ask(socket, line)
            #expect(reply.hasPrefix(expected) && !reply.contains("\n"), "\(line) -> \(reply)")
            let now = try Self.sources(socket)
            #expect(now.keys.sorted() == ["one"] && now["one"]?.state == "playing", "after \(line): \(now)")
        }
        // Per-source set/get reach that source's stage.
        #expect(try Self.ask(socket, "set one draw=false") == "ok")
        #expect(try Self.ask(socket, "get one draw") == "false")
        let end = serve.stop(signal: SIGTERM, timeout: 60)
        #expect(end.status == 0 && !end.timedOut, "\(end.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("two.mp4").path))
    }

    /// A source stuck opening its input (a FIFO nobody writes: opening it waits for a writer,
    /// as a file on an unresponsive network mount does) holds nothing up: `remove` answers while
    /// it is starting; added again, its start fails at the start timeout (20 s) and it is listed
    /// as failed until removed; SIGTERM then ends serve, and the healthy source's MP4 is
    /// finalized with its frames, no temporary file left (docs/bad-inputs.md row P11).
    @Test func aSourceStuckOpeningItsInputHoldsNothingUp() throws {
        let (dir, _, socket, serve) = try Self.startFileServe(["good"])
        defer { try? FileManager.default.removeItem(at: dir) }
        try #require(Self.waitForSources(socket) { ($0["good"]?.frames ?? 0) >= 30 }, "\(serve.stderr)")
        let fifo = dir.appendingPathComponent("cam.fifo").path
        try #require(mkfifo(fifo, 0o600) == 0)

        let add = try Self.askInBackground(socket, "add cam file://\(fifo)")
        try #require(Self.waitForSources(socket, timeout: 30) { $0["cam"]?.state == "starting" }, "\(serve.stderr)")
        #expect(try Self.ask(socket, "remove cam", timeout: 10) == "ok", "\(serve.stderr)")
        try #require(add.waitForExit(timeout: 10), "add got no answer once cam was removed: \(serve.stderr)")
        #expect(add.stdout.hasPrefix("error: cam: ended while starting") && add.stdout.contains("cam.fifo"), "\(add.stdout)")
        #expect(try Self.sources(socket).keys.sorted() == ["good"])

        // Nobody removes it: the start timeout fails it, named, and it stays listed.
        let again = try Self.ask(socket, "add cam file://\(fifo)", timeout: 120)
        #expect(again.hasPrefix("error: cam: the pipeline did not reach PLAYING within 20 s") && again.contains("cam.fifo"), "\(again)")
        let listed = try Self.sources(socket)
        #expect(listed["cam"]?.state == "failed" && listed["good"] != nil, "\(listed)")

        let end = serve.stop(signal: SIGTERM, timeout: 60)
        #expect(!end.timedOut && end.status == 0, "\(end.stderr)")
        let frames = countFrames(dir.appendingPathComponent("good.mp4").path) ?? 0
        #expect(frames >= 30, "good.mp4: \(frames) frames\n\(end.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".partial") }.isEmpty)
    }
    // Bad command lines of `serve`: docs/bad-inputs.md rows 122–129 (BadInputTests).
}
