import Foundation
import StreamLensTesting
import Testing

/// lensrtsp through the built binary, watched by real players: gst-launch-1.0 (rtspsrc over UDP
/// and TCP) and ffmpeg. Loopback only; every server gets a port the kernel had free
/// (freeLoopbackPort), never a fixed one, so these tests run beside any others.
@Suite(.serialized) struct RTSPTests {
    static let bars = "videotestsrc is-live=true ! video/x-raw,format=RGB,width=320,height=240,framerate=30/1"

    // MARK: - players

    /// ffmpeg over RTSP/TCP: `count` decoded frames as RGB.
    static func ffmpegFrames(_ url: String, count: Int, width: Int, height: Int, timeout: Double = 20) throws -> (frames: [[UInt8]], result: CLI.Result) {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.rgb").path
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"),
                              ["-nostdin", "-loglevel", "error", "-rtsp_transport", "tcp", "-i", url, "-frames:v", "\(count)",
                               "-f", "rawvideo", "-pix_fmt", "rgb24", "-y", out], timeout: timeout)
        return (split(out, width: width, height: height), r)
    }

    /// A GStreamer player (rtspsrc, UDP unless told otherwise): `count` decoded frames as RGB.
    static func gstFrames(_ url: String, count: Int, width: Int, height: Int, protocols: String = "udp", timeout: Double = 20) throws -> (frames: [[UInt8]], result: CLI.Result) {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.rgb").path
        var r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/gst-launch-1.0"), ["-q"] + gstPlayer(url, protocols: protocols, count: count, out: out), timeout: timeout)
        let frames = split(out, width: width, height: height)
        // After its own end of stream (all `count` frames decoded) rtspsrc tears the session down;
        // under a busy core the server may have closed the connection by then, and gst-launch
        // exits 1 for the PAUSE/TEARDOWN it could not send. The player got what it came for:
        // judged by its frames, that is a success (every other error still fails).
        let errors = r.stderr.split(separator: "\n").filter { $0.hasPrefix("ERROR:") }
        if r.status != 0, !r.timedOut, frames.count == count, !errors.isEmpty,
           errors.allSatisfy({ $0.contains("GstRTSPSrc") && $0.contains("Could not write to resource") }),
           r.stderr.contains("Could not send message") {
            r.status = 0
        }
        return (frames, r)
    }

    /// rtspsrc → depay → decode → RGB → file; identity ends the stream after `count` frames.
    static func gstPlayer(_ url: String, protocols: String, count: Int, out: String) -> [String] {
        "rtspsrc location=\(url) latency=0 protocols=\(protocols) ! rtph264depay ! avdec_h264 ! videoconvert ! video/x-raw,format=RGB ! identity eos-after=\(count + 1) ! filesink location=\(out)"
            .split(separator: " ").map(String.init)
    }

    static func split(_ path: String, width: Int, height: Int) -> [[UInt8]] {
        let data = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data())
        let size = width * height * 3
        return stride(from: 0, to: data.count - size + 1, by: size).map { Array(data[$0..<$0 + size]) }
    }

    /// The colour bars as videotestsrc draws them, for comparison with what players decoded.
    static let referenceBars: [UInt8] = {
        let dir = try! scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("ref.rgb").path
        _ = try? CLI.spawn(URL(fileURLWithPath: "/usr/bin/gst-launch-1.0"),
                           ["-q"] + "videotestsrc num-buffers=1 ! video/x-raw,format=RGB,width=320,height=240 ! filesink location=\(out)".split(separator: " ").map(String.init))
        return split(out, width: 320, height: 240).first ?? []
    }()

    /// Largest difference of a colour channel at the centre of each of the seven top bars.
    static func barsError(_ frame: [UInt8]) -> Int {
        let (w, h) = (320, 240)
        guard frame.count == w * h * 3, referenceBars.count == frame.count else { return 999 }
        return (0..<7).map { bar -> Int in
            let p = ((h / 4) * w + (2 * bar + 1) * w / 14) * 3
            return (0..<3).map { abs(Int(frame[p + $0]) - Int(referenceBars[p + $0])) }.max()!
        }.max()!
    }

    // MARK: - tests

    @Test func playersOverUDPAndTCPDecodeTheBars() throws {
        let port = freeLoopbackPort()
        let server = try Background.streamlens(["run", "\(Self.bars) ! lenspass ! lensrtsp port=\(port) mount=/bars"])
        try #require(server.waitFor("serving "), "\(server.stderr)")
        #expect(server.stderr.contains("lensrtsp0: serving rtsp://127.0.0.1:\(port)/bars (H.264, x264enc 2000 kbit/s)"), "\(server.stderr)")
        let url = "rtsp://127.0.0.1:\(port)/bars"
        let udp = try Self.gstFrames(url, count: 30, width: 320, height: 240)
        #expect(udp.result.status == 0, "\(udp.result.stderr)")
        #expect(udp.frames.count == 30)
        let tcp = try Self.ffmpegFrames(url, count: 10, width: 320, height: 240)
        #expect(tcp.result.status == 0, "\(tcp.result.stderr)")
        #expect(tcp.frames.count == 10)
        for (name, frames) in [("rtspsrc/udp", udp.frames), ("ffmpeg/tcp", tcp.frames)] {
            let error = frames.last.map(Self.barsError) ?? 999
            #expect(error < 40, "\(name): colour bars off by \(error) levels")
        }
        let end = server.stop()
        #expect(end.status == 0, "\(end.stderr)")
        #expect(end.stderr.contains("1 client"), "\(end.stderr)")
    }

    @Test func listensOnlyOnLoopbackTCPAndUDP() throws {
        let port = freeLoopbackPort()
        let server = try Background.streamlens(["run", "\(Self.bars) ! lensrtsp port=\(port) mount=/bars"])
        try #require(server.waitFor("serving "), "\(server.stderr)")
        // A UDP player makes the server open its RTP/RTCP sockets.
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let player = try Background(URL(fileURLWithPath: "/usr/bin/gst-launch-1.0"),
                                    ["-q"] + Self.gstPlayer("rtsp://127.0.0.1:\(port)/bars", protocols: "udp", count: 600, out: dir.appendingPathComponent("o.rgb").path))
        var sockets: [(proto: String, local: String)] = []
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            sockets = listeningSockets(pid: server.pid)
            if sockets.contains(where: { $0.proto == "udp" }) { break }
            usleep(200_000)
        }
        _ = player.stop(signal: SIGKILL)
        #expect(sockets.contains { $0.proto == "tcp" && $0.local == "127.0.0.1:\(port)" }, "\(sockets)")
        #expect(sockets.filter { $0.proto == "udp" }.count >= 2, "RTP and RTCP sockets: \(sockets)")
        for s in sockets { #expect(s.local.hasPrefix("127.0.0.1:"), "\(s.proto) socket on \(s.local)") }
        #expect(server.stop().status == 0)
    }

    /// lensdetect boxes the astronaut's face; the players see the green box where the face is.
    @Test func theFaceBoxReachesThePlayers() throws {
        let source = "filesrc location=\(DetectTests.astronaut) ! pngdec ! videoconvert ! videoscale ! video/x-raw,format=RGB,width=512,height=512,pixel-aspect-ratio=1/1 ! imagefreeze is-live=true ! video/x-raw,framerate=15/1"
        let port = freeLoopbackPort()
        let server = try Background.streamlens(["run", "\(source) ! lensdetect model=Models/face-short-range.json precision=f32 thickness=4 ! lensrtsp port=\(port) mount=/faces"])
        try #require(server.waitFor("serving ", timeout: 60), "\(server.stderr)")
        let url = "rtsp://127.0.0.1:\(port)/faces"
        let tcp = try Self.ffmpegFrames(url, count: 5, width: 512, height: 512)
        let udp = try Self.gstFrames(url, count: 5, width: 512, height: 512)
        let end = server.stop()
        #expect(end.status == 0, "\(end.stderr)")
        #expect(tcp.result.status == 0 && udp.result.status == 0, "\(tcp.result.stderr) \(udp.result.stderr)")
        let f = DetectTests.faceInPhoto
        for (name, frames) in [("ffmpeg", tcp.frames), ("rtspsrc", udp.frames)] {
            let frame = try #require(frames.last, "\(name): no frames")
            func green(_ x: Int, _ y: Int) -> Bool {
                let p = (y * 512 + x) * 3
                return frame[p + 1] > 170 && frame[p] < 110 && frame[p + 2] < 110
            }
            // Along each edge of the expected box, a green pixel within 6 px across the edge.
            let (x0, y0, x1, y1) = (Int(f.x), Int(f.y), Int(f.x + f.size), Int(f.y + f.size))
            var hits = 0, probes = 0
            for t in stride(from: 0.15, through: 0.85, by: 0.1) {
                let x = x0 + Int(t * f.size), y = y0 + Int(t * f.size)
                for (px, py, vertical) in [(x0, y, true), (x1, y, true), (x, y0, false), (x, y1, false)] {
                    probes += 1
                    if (-6...6).contains(where: { d in vertical ? green(px + d, py) : green(px, py + d) }) { hits += 1 }
                }
            }
            #expect(hits >= probes * 9 / 10, "\(name): green box found at \(hits) of \(probes) points along the face's edges")
            // Inside the box (the face) and far from it (the suit) there is no green.
            let inside = (x0 + 15..<x1 - 15).flatMap { x in (y0 + 15..<y1 - 15).map { (x, $0) } }.filter { green($0.0, $0.1) }.count
            let far = (0..<512).filter { green($0, 400) }.count
            #expect(inside == 0 && far == 0, "\(name): \(inside) green pixels inside the box, \(far) on row 400")
        }
    }

    @Test func threeConcurrentPlayersAndTwentyReconnectCycles() throws {
        let port = freeLoopbackPort()
        let server = try Background.streamlens(["run", "\(Self.bars) ! lenspass ! lensrtsp port=\(port) mount=/bars"])
        try #require(server.waitFor("serving "), "\(server.stderr)")
        let url = "rtsp://127.0.0.1:\(port)/bars"
        // Three players at once (processes, not a thread pool: two cores would run two at a time).
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let players = try (0..<3).map { i in
            try Background(URL(fileURLWithPath: "/usr/bin/ffmpeg"),
                           ["-nostdin", "-loglevel", "error", "-rtsp_transport", "tcp", "-i", url, "-frames:v", "60",
                            "-f", "rawvideo", "-pix_fmt", "rgb24", "-y", dir.appendingPathComponent("p\(i).rgb").path])
        }
        for (i, player) in players.enumerated() {
            #expect(player.waitForExit(timeout: 20), "player \(i) still running after 20 s: \(player.stderr)")
            let frames = Self.split(dir.appendingPathComponent("p\(i).rgb").path, width: 320, height: 240)
            #expect(player.process.terminationStatus == 0 && frames.count == 60, "player \(i): \(frames.count) frames: \(player.stderr)")
            #expect(Self.barsError(frames.last ?? []) < 40)
        }
        // Twenty players come and go while frames flow: half leave politely (TEARDOWN after a
        // few frames), half vanish mid-stream (killed, no TEARDOWN, UDP and TCP alternately).
        for cycle in 0..<20 {
            if cycle % 2 == 0 {
                let r = try Self.ffmpegFrames(url, count: 3, width: 320, height: 240)
                #expect(r.result.status == 0 && r.frames.count == 3, "cycle \(cycle): \(r.result.stderr)")
            } else {
                let player = try Background(URL(fileURLWithPath: "/usr/bin/gst-launch-1.0"),
                                            ["-q"] + Self.gstPlayer(url, protocols: cycle % 4 == 1 ? "udp" : "tcp", count: 1000,
                                                                    out: dir.appendingPathComponent("c\(cycle).rgb").path))
                usleep(400_000)
                _ = player.stop(signal: SIGKILL)
            }
            #expect(server.isRunning, "the server died in cycle \(cycle): \(server.stderr)")
        }
        let after = try Self.ffmpegFrames(url, count: 10, width: 320, height: 240)
        #expect(after.result.status == 0 && after.frames.count == 10, "\(after.result.stderr)")
        #expect(Self.barsError(after.frames.last ?? []) < 40)
        let end = server.stop()
        #expect(end.status == 0, "\(end.stderr)")
        #expect(end.stderr.contains("3 clients"), "\(end.stderr)")
    }

    @Test func basicAuthenticationFromAFileAndFromTheEnvironment() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let auth = dir.appendingPathComponent("rtsp-auth").path
        try "viewer:c0rrect-horse\n".write(toFile: auth, atomically: true, encoding: .utf8)
        let ports = freeLoopbackPorts(2)
        let fromFile = try Background.streamlens(["run", "\(Self.bars) ! lensrtsp port=\(ports[0]) mount=/private auth-file=\(auth)"])
        var environment = ProcessInfo.processInfo.environment
        environment["STREAMLENS_RTSP_USER"] = "env-user"
        environment["STREAMLENS_RTSP_PASSWORD"] = "env-secret"
        let fromEnvironment = try Background.streamlens(["run", "\(Self.bars) ! lensrtsp port=\(ports[1]) mount=/private"], environment: environment)
        try #require(fromFile.waitFor("serving ") && fromEnvironment.waitFor("serving "), "\(fromFile.stderr) \(fromEnvironment.stderr)")
        #expect(fromFile.stderr.contains("Basic authentication as viewer"), "\(fromFile.stderr)")
        #expect(!fromFile.stderr.contains("c0rrect-horse"))
        for (port, user, password, server) in [(ports[0], "viewer", "c0rrect-horse", fromFile), (ports[1], "env-user", "env-secret", fromEnvironment)] {
            let anonymous = try Self.ffmpegFrames("rtsp://127.0.0.1:\(port)/private", count: 2, width: 320, height: 240)
            #expect(anonymous.result.status != 0 && anonymous.result.stderr.contains("401"), "\(anonymous.result.stderr)")
            let wrong = try Self.ffmpegFrames("rtsp://\(user):wrong@127.0.0.1:\(port)/private", count: 2, width: 320, height: 240)
            #expect(wrong.result.status != 0 && wrong.result.stderr.contains("401"), "\(wrong.result.stderr)")
            let right = try Self.ffmpegFrames("rtsp://\(user):\(password)@127.0.0.1:\(port)/private", count: 5, width: 320, height: 240)
            // (The server's own log too: a rare stall here under a loaded machine, stop 59/60, is not understood yet.)
            #expect(right.result.status == 0 && right.frames.count == 5, "\(right.result.stderr)\nserver: \(server.stderr)")
            // GStreamer's player too (user-id/user-pw on rtspsrc): it decodes frames. (Its exit
            // code is not the point: after its own end of stream rtspsrc may report the server
            // closing the connection during its TEARDOWN — seen under a busy core.)
            let frames = dir.appendingPathComponent("gst-\(port)")
            try FileManager.default.createDirectory(at: frames, withIntermediateDirectories: true)
            let gst = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/gst-launch-1.0"),
                                    ["-q", "rtspsrc", "location=rtsp://127.0.0.1:\(port)/private", "user-id=\(user)", "user-pw=\(password)",
                                     "!", "rtph264depay", "!", "avdec_h264", "!", "identity", "eos-after=6", "!", // 5 frames, then end of stream
                                     "multifilesink", "location=\(frames.path)/f%03d"], timeout: 30)
            let decoded = (try? FileManager.default.contentsOfDirectory(atPath: frames.path).count) ?? 0
            #expect(decoded >= 5 && !gst.stderr.contains("Unauthorized"), "\(decoded) frames: \(gst.stderr)")
        }
        #expect(fromFile.stop().status == 0)
        #expect(fromEnvironment.stop().status == 0)
    }

    @Test func aBusyPortIsNamed() throws {
        // Taken by a plain socket (listening on a port the kernel picked)…
        let busy = try #require(BusyPort(), "no socket listening on 127.0.0.1")
        let r = try CLI.run(["run", "\(Self.bars) ! lensrtsp port=\(busy.port)"], timeout: 30)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("lensrtsp0: port \(busy.port) on 127.0.0.1 is in use"), "\(r.stderr)")
        // …and by another lensrtsp.
        let port = freeLoopbackPort()
        let first = try Background.streamlens(["run", "\(Self.bars) ! lensrtsp port=\(port)"])
        try #require(first.waitFor("serving "), "\(first.stderr)")
        let second = try CLI.run(["run", "\(Self.bars) ! lensrtsp port=\(port)"], timeout: 30)
        #expect(second.status == 1 && second.stderr.contains("port \(port) on 127.0.0.1 is in use"), "\(second.stderr)")
        #expect(first.isRunning)
        #expect(first.stop().status == 0)
    }

    @Test func interruptClosesThePlayersAndFreesThePort() throws {
        let port = freeLoopbackPort() // kept: the port is taken again below, once it is free
        let server = try Background.streamlens(["run", "\(Self.bars) ! lenspass ! lensrtsp port=\(port) mount=/bars"])
        try #require(server.waitFor("serving "), "\(server.stderr)")
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let ffmpeg = try Background(URL(fileURLWithPath: "/usr/bin/ffmpeg"),
                                    ["-nostdin", "-loglevel", "error", "-rtsp_transport", "tcp", "-i", "rtsp://127.0.0.1:\(port)/bars",
                                     "-f", "null", "-"])
        let gst = try Background(URL(fileURLWithPath: "/usr/bin/gst-launch-1.0"),
                                 ["-q"] + Self.gstPlayer("rtsp://127.0.0.1:\(port)/bars", protocols: "udp", count: 100_000, out: dir.appendingPathComponent("o.rgb").path))
        try #require(server.waitFor("2 clients"), "\(server.stderr)")
        let start = Date()
        let end = server.stop(signal: SIGINT)
        #expect(end.status == 0 && !end.timedOut, "\(end.stderr)")
        #expect(Date().timeIntervalSince(start) < 5)
        #expect(end.stderr.contains("interrupted: end of stream reached"), "\(end.stderr)")
        // The players lose their server: ffmpeg's connection is closed and it exits.
        #expect(ffmpeg.waitForExit(timeout: 10), "ffmpeg still running 10 s after the server stopped: \(ffmpeg.stderr)")
        _ = gst.stop(signal: SIGKILL)
        // The port is free again at once.
        let again = try Background.streamlens(["run", "\(Self.bars) ! lensrtsp port=\(port) mount=/bars"])
        #expect(again.waitFor("serving "), "\(again.stderr)")
        #expect(again.stop().status == 0)
    }

    /// A player whose DESCRIBE waits for a first frame that never comes (the stream stalled, or
    /// ended) holds gst-rtsp-server's thread for up to 20 s: the interrupt still ends the run at
    /// once, and the player is told 503.
    @Test func interruptWhileAPlayerWaitsForAFirstFrame() throws {
        let port = freeLoopbackPort()
        let stalled = "\(Self.bars) ! valve drop=true drop-mode=forward-sticky-events ! lensrtsp port=\(port) mount=/stalled"
        let server = try Background.streamlens(["run", stalled])
        // No frame reaches the stage, so it says nothing: wait for its socket instead.
        var listening = false
        for _ in 0..<400 where !listening {
            listening = listeningSockets(pid: server.pid).contains { $0.proto == "tcp" && $0.local.hasSuffix(":\(port)") }
            if !listening { usleep(50_000) }
        }
        try #require(listening, "not listening on port \(port) after 20 s; its sockets: \(listeningSockets(pid: server.pid)); \(server.stderr)")
        // ffmpeg logs each request it sends at -loglevel trace.
        let ffmpeg = try Background(URL(fileURLWithPath: "/usr/bin/ffmpeg"),
                                    ["-nostdin", "-loglevel", "trace", "-rtsp_transport", "tcp", "-i", "rtsp://127.0.0.1:\(port)/stalled", "-f", "null", "-"])
        try #require(ffmpeg.waitFor("DESCRIBE rtsp://"), "\(ffmpeg.stderr)")
        let end = server.stop(signal: SIGINT, timeout: 15)
        #expect(end.status == 0 && !end.timedOut, "\(end.stderr)")
        #expect(ffmpeg.waitForExit(timeout: 10), "ffmpeg still running 10 s after the server stopped: \(ffmpeg.stderr.suffix(2000))")
        #expect(ffmpeg.stderr.contains("503"), "\(ffmpeg.stderr.suffix(2000))")
    }

    @Test func tcpOnlyAndOpenH264() throws {
        let port = freeLoopbackPort()
        let server = try Background.streamlens(["run", "\(Self.bars) ! lensrtsp port=\(port) mount=/bars encoder=openh264enc tcp-only=true bitrate=1500 key-int=15"])
        try #require(server.waitFor("serving "), "\(server.stderr)")
        #expect(server.stderr.contains("(H.264, openh264enc 1500 kbit/s, TCP only)"), "\(server.stderr)")
        let tcp = try Self.gstFrames("rtsp://127.0.0.1:\(port)/bars", count: 10, width: 320, height: 240, protocols: "tcp")
        #expect(tcp.result.status == 0 && tcp.frames.count == 10, "\(tcp.result.stderr)")
        #expect(Self.barsError(tcp.frames.last ?? []) < 40)
        // UDP is not offered.
        let udp = try Self.gstFrames("rtsp://127.0.0.1:\(port)/bars", count: 10, width: 320, height: 240, protocols: "udp")
        #expect(udp.result.status != 0 && udp.frames.isEmpty)
        #expect(listeningSockets(pid: server.pid).allSatisfy { $0.proto == "tcp" })
        #expect(server.stop().status == 0)
    }

    @Test(arguments: [
        ("port=0", "property port=0 is out of range 1…65535"),
        ("mount=bars", "property mount=bars must be a URL path"),
        ("address=localhost", "address localhost is not a numeric IPv4 or IPv6 address"),
        ("address=192.0.2.1", "cannot listen on 192.0.2.1 port PORT"), // PORT: the port the test gave
        ("auth-file=/nonexistent/auth", "cannot read auth-file /nonexistent/auth"),
        ("encoder=vp8enc", "property encoder=vp8enc is not one of x264enc, openh264enc"),
    ])
    func badSettingsAreRefused(_ setting: String, _ message: String) throws {
        let port = freeLoopbackPort()
        let r = try CLI.run(["run", "\(Self.bars) ! lensrtsp port=\(port) \(setting)"], timeout: 30)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains(message.replacingOccurrences(of: "PORT", with: "\(port)")), "\(r.stderr)")
    }

    @Test func aPasswordFileWithoutUserIsRefused() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let auth = dir.appendingPathComponent("auth").path
        try "just-a-password\n".write(toFile: auth, atomically: true, encoding: .utf8)
        let r = try CLI.run(["run", "\(Self.bars) ! lensrtsp port=\(freeLoopbackPort()) auth-file=\(auth)"], timeout: 30)
        #expect(r.status == 1 && r.stderr.contains("must hold user:password"), "\(r.stderr)")
        #expect(!r.stderr.contains("just-a-password"))
    }
}

/// TCP and UDP sockets a process listens on (`ss -ltnup`): protocol and local address.
func listeningSockets(pid: Int32) -> [(proto: String, local: String)] {
    guard let r = try? CLI.spawn(URL(fileURLWithPath: "/usr/bin/ss"), ["-ltnupH"], timeout: 10) else { return [] }
    return r.stdout.split(separator: "\n").filter { $0.contains("pid=\(pid),") }.compactMap { line in
        let f = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        return f.count >= 5 ? (f[0], f[4]) : nil
    }
}
