import Foundation
import Testing

/// lenswatchdog: the source part of a live pipeline is restarted when it fails, ends or stalls,
/// while the rest keeps running; a limit ends the run with a clear error.
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

    @Test func aCameraThatDropsThreeTimesIsFollowedBack() throws {
        let port = 18611
        var camera = try Self.startCamera(port: port)
        defer { kill(camera.processIdentifier, SIGKILL) }
        // The consumer runs ~22 s; the camera is killed at 4, 10 and 16 s and back 2 s later.
        let consumer = "tcpclientsrc host=127.0.0.1 port=\(port) ! tsdemux ! h264parse ! avdec_h264 ! videoconvert ! lenswatchdog timeout=3 backoff=0.5 ! lenspass ! fakesink"
        let box = CameraBox(camera)
        let controller = Thread {
            for _ in 0..<3 {
                Thread.sleep(forTimeInterval: 4)
                // SIGKILL: a child of Foundation's Process inherits blocked SIGTERM/SIGINT.
                kill(box.camera.processIdentifier, SIGKILL)
                box.camera.waitUntilExit()
                Thread.sleep(forTimeInterval: 2)
                if let next = try? WatchdogTests.startCamera(port: port) { box.camera = next }
            }
        }
        Thread.sleep(forTimeInterval: 1)
        controller.start()
        let r = try CLI.run(["run", consumer], timeout: 60, signals: [(after: 21, signal: SIGINT)])
        camera = box.camera
        #expect(r.status == 0, "\(r.stderr)")
        let recoveries = r.stderr.components(separatedBy: "lenswatchdog0: source back after").count - 1
        #expect(recoveries == 3, "\(r.stderr)")
        #expect(r.stderr.contains("warning: lenswatchdog0: source lost (end of stream); restarting it in 0.5 s (attempt 1 of 10)"), "\(r.stderr)")
        // About 15 fps for ~21 s minus three outages of ~3-5 s: frames kept coming after each.
        let line = r.stderr.split(separator: "\n").first { $0.hasPrefix("lenspass0:") }.flatMap { StageSummary(line: String($0)) }
        #expect((line?.framesOut ?? 0) > 100, "\(r.stderr)")
    }

    /// The case: an RTSP camera (here a second streamlens serving a test pattern) drops
    /// three times; the relay's own RTSP output keeps serving and resumes each time.
    @Test func anRTSPCameraIsReconnectedAndTheRelayKeepsServing() throws {
        let (cameraPort, relayPort) = (18621, 18622)
        @Sendable func startCamera() throws -> Process {
            let p = Process()
            p.executableURL = CLI.binary
            p.arguments = ["run", "-q", "videotestsrc is-live=true pattern=ball ! video/x-raw,width=320,height=240,framerate=15/1 ! lensrtsp port=\(cameraPort) mount=/cam"]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            return p
        }
        let box = CameraBox(try startCamera())
        defer { kill(box.camera.processIdentifier, SIGKILL) }
        let clientOK = ClientResults()
        let controller = Thread {
            Thread.sleep(forTimeInterval: 5)
            for _ in 0..<3 {
                kill(box.camera.processIdentifier, SIGKILL)
                box.camera.waitUntilExit()
                Thread.sleep(forTimeInterval: 2)
                if let next = try? startCamera() { box.camera = next }
                Thread.sleep(forTimeInterval: 7)
                // A player of the relay's output decodes frames again.
                clientOK.add(WatchdogTests.decodes("rtsp://127.0.0.1:\(relayPort)/faces"))
            }
        }
        controller.start()
        let r = try CLI.run(["run", "rtsp-relay", "INPUT=rtsp://127.0.0.1:\(cameraPort)/cam", "PORT=\(relayPort)", "TIMEOUT=2", "JITTER=0", "BACKOFF=0.5", "MAX_BACKOFF=1",
                                 "RETRIES=10"], // (the camera may take several seconds to come back on a loaded machine)
                            timeout: 90, signals: [(after: 40, signal: SIGINT)])
        #expect(r.status == 0, "\(r.stderr)")
        let recoveries = r.stderr.components(separatedBy: "lenswatchdog0: source back after").count - 1
        #expect(recoveries >= 3, "\(r.stderr)")
        #expect(clientOK.values == [true, true, true], "players of the relay after each outage: \(clientOK.values)\n\(r.stderr)")
    }

    /// ffmpeg decodes 10 frames from the URL within 10 s.
    static func decodes(_ url: String) -> Bool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = ["-nostdin", "-loglevel", "error", "-rtsp_transport", "tcp", "-i", url, "-frames:v", "10", "-f", "null", "-"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return false }
        let deadline = Date().addingTimeInterval(10)
        while p.isRunning && Date() < deadline { usleep(50_000) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL); p.waitUntilExit(); return false }
        return p.terminationStatus == 0
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
        let r = try CLI.run(["run", "filesrc location=\(clip) ! qtdemux ! h264parse ! avdec_h264 ! identity sync=true ! videoconvert ! lenswatchdog backoff=0 ! lenspass ! fakesink"],
                            timeout: 60, signals: [(after: 5.5, signal: SIGINT)])
        #expect(r.status == 0, "\(r.stderr)")
        let loops = r.stderr.components(separatedBy: "source back after").count - 1
        #expect(loops >= 3 && loops <= 6, "\(loops) loops: \(r.stderr)")
        let line = r.stderr.split(separator: "\n").first { $0.hasPrefix("lenspass0:") }.flatMap { StageSummary(line: String($0)) }
        // Paced: ~15 frames a second for ~5 s, not as fast as the machine decodes.
        #expect(((50...90).contains(line?.framesOut ?? 0)), "\(r.stderr)")
    }

    /// The webcam pipeline with no camera: after its retries, an error naming the device.
    @Test func webcamPipelineWithoutACameraNamesTheDevice() throws {
        let r = try CLI.run(["run", "webcam-rtsp", "DEVICE=/dev/video-streamlens-none", "RETRIES=1", "PORT=18623"], timeout: 60)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("error: lenswatchdog0: the source failed 1 time in a row; giving up (last: v4l2src0: camera /dev/video-streamlens-none not found"), "\(r.stderr)")
    }

    @Test func givesUpAfterTheRetriesWithAClearError() throws {
        let r = try CLI.run(["run", "tcpclientsrc host=127.0.0.1 port=18619 ! tsdemux ! h264parse ! avdec_h264 ! videoconvert ! lenswatchdog retries=2 backoff=0.2 ! fakesink"],
                            timeout: 60)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("error: lenswatchdog0: the source failed 2 times in a row; giving up (last: tcpclientsrc0: Could not open resource for reading.)"), "\(r.stderr)")
    }
}

/// What the controller thread's players saw.
/// @unchecked Sendable: an NSLock guards the list.
final class ClientResults: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [Bool] = []
    func add(_ ok: Bool) { lock.lock(); list.append(ok); lock.unlock() }
    var values: [Bool] { lock.lock(); defer { lock.unlock() }; return list }
}

/// The camera process, replaced by the controller thread while the test reads it.
/// @unchecked Sendable: an NSLock guards the process reference (ThreadSanitizer caught the test
/// reading it unguarded while the controller could still replace it).
final class CameraBox: @unchecked Sendable {
    private let lock = NSLock()
    private var process: Process
    init(_ camera: Process) { process = camera }
    var camera: Process {
        get { lock.lock(); defer { lock.unlock() }; return process }
        set { lock.lock(); process = newValue; lock.unlock() }
    }
}
