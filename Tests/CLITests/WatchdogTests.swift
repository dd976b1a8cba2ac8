import Foundation
import StreamLensTesting
import Testing

/// lenswatchdog: the source part of a live pipeline is restarted when it fails, ends or stalls,
/// while the rest keeps running; a limit ends the run with a clear error. Every camera and
/// server gets a port the kernel had free (freeLoopbackPort), never a fixed one.
@Suite(.serialized) struct WatchdogTests {
    /// A live H.264-in-MPEG-TS stream served on a TCP port by gst-launch-1.0: the "camera".
    static func startCamera(port: Int) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/gst-launch-1.0")
        p.arguments = ["-q"] + "videotestsrc is-live=true pattern=ball ! video/x-raw,width=160,height=120,framerate=15/1 ! x264enc tune=zerolatency key-int-max=15 ! mpegtsmux ! tcpserversink host=127.0.0.1 port=\(port)".split(separator: " ").map(String.init)
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    /// Each step waits for what the pipeline says (a bounded wait), never for a fixed time, so a
    /// loaded machine only makes the test slower.
    @Test func aCameraThatDropsThreeTimesIsFollowedBack() throws {
        let port = freeLoopbackPort() // kept: each new camera listens where the old one did
        var camera = try Self.startCamera(port: port)
        defer { kill(camera.processIdentifier, SIGKILL) }
        let consumer = try Background.streamlens(["run", "-v", "tcpclientsrc host=127.0.0.1 port=\(port) ! tsdemux ! h264parse ! avdec_h264 ! videoconvert ! lenswatchdog timeout=3 backoff=0.5 ! lenspass ! fakesink"])
        // Frames flow (lenspass's caps line: its first frame).
        try #require(consumer.waitFor("lenspass0: video/x-raw", timeout: 60), "\(consumer.stderr)")
        // (If the consumer asked before the camera listened, that was an outage of its own.)
        let lost = consumer.occurrences(of: "lenswatchdog0: source lost"), back = consumer.occurrences(of: "lenswatchdog0: source back after")
        for outage in 1...3 {
            // SIGKILL: a child of Foundation's Process inherits blocked SIGTERM/SIGINT.
            kill(camera.processIdentifier, SIGKILL)
            camera.waitUntilExit()
            try #require(consumer.waitFor("lenswatchdog0: source lost", count: lost + outage, timeout: 60), "outage \(outage): \(consumer.stderr)")
            camera = try Self.startCamera(port: port)
            try #require(consumer.waitFor("lenswatchdog0: source back after", count: back + outage, timeout: 90), "outage \(outage): \(consumer.stderr)")
        }
        let r = consumer.stop()
        #expect(!r.timedOut && r.status == 0, "\(r.stderr)")
        #expect(consumer.occurrences(of: "lenswatchdog0: source back after") == back + 3, "\(r.stderr)")
        #expect(r.stderr.contains("warning: lenswatchdog0: source lost (end of stream); restarting it in 0.5 s (attempt 1 of 10)"), "\(r.stderr)")
        // "source back" is said on the first frame after a restart; the frames reached the end.
        let line = r.stderr.split(separator: "\n").first { $0.hasPrefix("lenspass0:") && $0.contains(" frames in") }.flatMap { StageSummary(line: String($0)) }
        #expect((line?.framesOut ?? 0) > 0, "\(r.stderr)")
    }

    /// The issue's case: an RTSP camera (here a second streamlens serving a test pattern) drops
    /// three times; the relay's own RTSP output keeps serving and resumes each time.
    @Test func anRTSPCameraIsReconnectedAndTheRelayKeepsServing() throws {
        // The camera comes back on the port it had: the ports are kept.
        let ports = freeLoopbackPorts(2), cameraPort = ports[0], relayPort = ports[1]
        func startCamera() throws -> Background {
            let camera = try Background.streamlens(["run", "videotestsrc is-live=true pattern=ball ! video/x-raw,width=320,height=240,framerate=15/1 ! lensrtsp port=\(cameraPort) mount=/cam"])
            try #require(camera.waitFor("lensrtsp0: serving ", timeout: 60), "camera: \(camera.stderr)")
            return camera
        }
        var camera = try startCamera()
        let relay = try Background.streamlens(["run", "rtsp-relay", "INPUT=rtsp://127.0.0.1:\(cameraPort)/cam", "PORT=\(relayPort)", "TIMEOUT=2", "JITTER=0",
                                               "BACKOFF=0.5", "MAX_BACKOFF=1", "RETRIES=0"])
        try #require(relay.waitFor("serving rtsp://", timeout: 120), "\(relay.stderr)")
        let lost = relay.occurrences(of: "lenswatchdog0: source lost"), back = relay.occurrences(of: "lenswatchdog0: source back after")
        var players: [Bool] = [], said: [String] = []
        for outage in 1...3 {
            kill(camera.pid, SIGKILL)
            _ = camera.waitForExit(timeout: 10)
            try #require(relay.waitFor("lenswatchdog0: source lost", count: lost + outage, timeout: 60), "outage \(outage): \(relay.stderr)")
            camera = try startCamera()
            try #require(relay.waitFor("lenswatchdog0: source back after", count: back + outage, timeout: 120), "outage \(outage): \(relay.stderr)")
            // A player of the relay's output decodes frames again.
            let player = WatchdogTests.decodes("rtsp://127.0.0.1:\(relayPort)/faces")
            players.append(player.ok)
            if !player.ok { said.append("player after outage \(outage): \(player.said)") }
        }
        let r = relay.stop()
        #expect(!r.timedOut && r.status == 0, "\(r.stderr)")
        #expect(players == [true, true, true], "players of the relay after each outage: \(players)\n\(said.joined(separator: "\n"))\n\(r.stderr)")
    }

    /// ffmpeg decodes 10 frames from the URL within 30 s (a bound, not a schedule: it ends as
    /// soon as it has them); when it does not, what it said.
    static func decodes(_ url: String) -> (ok: Bool, said: String) {
        let r: CLI.Result
        do {
            r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"),
                              ["-nostdin", "-loglevel", "error", "-rtsp_transport", "tcp", "-i", url, "-frames:v", "10", "-f", "null", "-"], timeout: 30)
        } catch {
            return (false, "ffmpeg did not start: \(error)")
        }
        if r.timedOut { return (false, "no 10 frames within 30 s: \(r.stderr)") }
        return (r.status == 0, "exit \(r.status): \(r.stderr)")
    }

    @Test func aFileLoopsAsALiveSource() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = dir.appendingPathComponent("one-second.mp4").path
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=15:duration=1", "-pix_fmt", "yuv420p", "-c:v", "libx264", clip]
        try ffmpeg.run()
        ffmpeg.waitUntilExit()
        try #require(ffmpeg.terminationStatus == 0)
        // identity sync=true plays it at its own pace; each end of stream starts it again.
        let run = try Background.streamlens(["run", "filesrc location=\(clip) ! qtdemux ! h264parse ! avdec_h264 ! identity sync=true ! videoconvert ! lenswatchdog backoff=0 ! lenspass ! fakesink"])
        try #require(run.waitFor("source back after", count: 1, timeout: 60), "\(run.stderr)")
        let first = Date()
        try #require(run.waitFor("source back after", count: 3, timeout: 60), "\(run.stderr)")
        let twoLoops = Date().timeIntervalSince(first)
        let r = run.stop()
        #expect(!r.timedOut && r.status == 0, "\(r.stderr)")
        // Paced: two loops of a 1-second clip take about 2 s (a loaded machine can only make that
        // longer), not the few milliseconds an unpaced decoder would need.
        #expect(twoLoops > 1.5, "two loops in \(twoLoops) s")
        let loops = run.occurrences(of: "source back after")
        let line = r.stderr.split(separator: "\n").first { $0.hasPrefix("lenspass0:") }.flatMap { StageSummary(line: String($0)) }
        // 15 frames a loop: the first play and each loop after it.
        let frames = line?.framesOut ?? 0
        #expect(frames >= 15 * loops && frames <= 15 * (loops + 1), "\(frames) frames in \(loops) loops: \(r.stderr)")
    }

    /// The webcam pipeline with no camera: after its retries, an error naming the device.
    @Test func webcamPipelineWithoutACameraNamesTheDevice() throws {
        let r = try CLI.run(["run", "webcam-rtsp", "DEVICE=/dev/video-streamlens-none", "RETRIES=1", "PORT=\(freeLoopbackPort())"], timeout: 60)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("error: lenswatchdog0: the source failed 1 time in a row; giving up (last: v4l2src0: camera /dev/video-streamlens-none not found"), "\(r.stderr)")
    }

    @Test func givesUpAfterTheRetriesWithAClearError() throws {
        // A port the kernel had free, where nothing listens: each connection is refused.
        let refused = freeLoopbackPort()
        let r = try CLI.run(["run", "tcpclientsrc host=127.0.0.1 port=\(refused) ! tsdemux ! h264parse ! avdec_h264 ! videoconvert ! lenswatchdog retries=2 backoff=0.2 ! fakesink"],
                            timeout: 60)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("error: lenswatchdog0: the source failed 2 times in a row; giving up (last: tcpclientsrc0: Could not open resource for reading.)"), "\(r.stderr)")
    }
}
