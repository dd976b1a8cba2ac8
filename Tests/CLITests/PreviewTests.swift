import Foundation
import StreamLensTesting
import Testing

/// A private X server (Xvfb, from Debian's xvfb) for one test: the preview pipelines open their
/// windows there; screenshots (ffmpeg's x11grab), keys (xdotool) and a window manager's close
/// request (tools/close-window.py) come from the test.
final class VirtualDisplay {
    static let width = 1280, height = 720
    let number: Int
    private let server = Process()

    init() throws {
        // A display number nobody uses (no socket, no lock file).
        guard let free = (70..<100).shuffled().first(where: { n in
            !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(n)") && !FileManager.default.fileExists(atPath: "/tmp/.X\(n)-lock")
        }) else { throw TestFailure("no free X display number in 70..<100") }
        number = free
        server.executableURL = URL(fileURLWithPath: "/usr/bin/Xvfb")
        // -noreset: by default Xvfb resets when its last client leaves (the readiness check, a
        // screenshot), and a client connecting meanwhile fails with "Could not open display".
        server.arguments = [":\(free)", "-screen", "0", "\(Self.width)x\(Self.height)x24", "-nolisten", "tcp", "-noreset"]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        // Ready when xdotool can talk to it.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if (try? xdotool(["getdisplaygeometry"]))?.status == 0 { return }
            usleep(100_000)
        }
        throw TestFailure("Xvfb :\(free) did not start")
    }

    deinit {
        if server.isRunning { kill(server.processIdentifier, SIGKILL) }
        server.waitUntilExit()
        try? FileManager.default.removeItem(atPath: "/tmp/.X\(number)-lock")
        try? FileManager.default.removeItem(atPath: "/tmp/.X11-unix/X\(number)")
    }

    var name: String { ":\(number)" }

    var environment: [String: String] {
        var e = ProcessInfo.processInfo.environment
        e["DISPLAY"] = name
        e.removeValue(forKey: "WAYLAND_DISPLAY")
        return e
    }

    @discardableResult
    func xdotool(_ args: [String]) throws -> CLI.Result {
        try CLI.spawn(URL(fileURLWithPath: "/usr/bin/xdotool"), args, environment: environment, timeout: 10)
    }

    /// The first window a GStreamer video sink opened (WM_CLASS "GStreamer"), waited for while
    /// `run` runs.
    func sinkWindow(of run: Background, timeout: Double) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline, run.isRunning {
            if let id = try xdotool(["search", "--class", "GStreamer"]).stdout.split(separator: "\n").first { return String(id) }
            usleep(200_000)
        }
        throw TestFailure("no video window on \(name) within \(Int(timeout)) s (\(run.isRunning ? "still running" : "exited")): \(run.stderr)")
    }

    func key(_ key: String, window: String) throws {
        try xdotool(["key", "--window", window, key])
    }

    /// The whole screen as packed RGB.
    func screenshot() throws -> [UInt8] {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("screen.rgb").path
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"),
                              ["-v", "error", "-y", "-f", "x11grab", "-draw_mouse", "0", "-video_size", "\(Self.width)x\(Self.height)",
                               "-i", name, "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", out], timeout: 20)
        let data = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data())
        guard r.status == 0, data.count == Self.width * Self.height * 3 else { throw TestFailure("screenshot failed: \(r.stderr)") }
        return data
    }

    func close(window: String) throws -> CLI.Result {
        try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["tools/close-window.py", window], environment: environment, timeout: 10)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A region of a screenshot.
struct Region {
    var x: Int, y: Int, width: Int, height: Int

    func pixels(_ screen: [UInt8]) -> [(r: Int, g: Int, b: Int, x: Int, y: Int)] {
        var out: [(Int, Int, Int, Int, Int)] = []
        out.reserveCapacity(width * height)
        for yy in y..<(y + height) {
            for xx in x..<(x + width) {
                let p = (yy * VirtualDisplay.width + xx) * 3
                out.append((Int(screen[p]), Int(screen[p + 1]), Int(screen[p + 2]), xx, yy))
            }
        }
        return out
    }

    func meanColour(_ screen: [UInt8]) -> (r: Double, g: Double, b: Double) {
        let p = pixels(screen)
        let n = Double(max(1, p.count))
        return (Double(p.reduce(0) { $0 + $1.r }) / n, Double(p.reduce(0) { $0 + $1.g }) / n, Double(p.reduce(0) { $0 + $1.b }) / n)
    }

    func meanAbsoluteDifference(_ a: [UInt8], _ b: [UInt8]) -> Double {
        let pa = pixels(a), pb = pixels(b)
        let total = zip(pa, pb).reduce(0) { $0 + abs($1.0.r - $1.1.r) + abs($1.0.g - $1.1.g) + abs($1.0.b - $1.1.b) }
        return Double(total) / Double(max(1, pa.count * 3))
    }
}

/// The preview pipelines (Pipelines/preview-*.pipeline) in real windows on a virtual display:
/// what is drawn where, keys pressed in the window, the window closed, no display at all.
/// The default camera is the astronaut as a live still (640x480, letterboxed: the photo spans
/// x 80…560 of the window, which opens at the screen's top-left corner).
@Suite(.serialized) struct PreviewTests {
    static let window = Region(x: 0, y: 0, width: 640, height: 480)
    static let photo = Region(x: 80, y: 0, width: 480, height: 480)
    static let startTimeout = 30 * CLI.slowdown

    /// Pixels of the box colour (#00ff00) in a region, and their bounding box.
    static func greenBox(_ screen: [UInt8], in region: Region) -> (count: Int, minX: Int, maxX: Int, minY: Int, maxY: Int) {
        let green = region.pixels(screen).filter { $0.g > 200 && $0.r < 90 && $0.b < 90 }
        return (green.count, green.map(\.x).min() ?? -1, green.map(\.x).max() ?? -1, green.map(\.y).min() ?? -1, green.map(\.y).max() ?? -1)
    }

    /// Waits until `check` holds for a fresh screenshot (frames take a moment to follow a key).
    static func eventually(_ display: VirtualDisplay, timeout: Double = 10 * CLI.slowdown, _ check: ([UInt8]) -> Bool) throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(timeout)
        var shot = try display.screenshot()
        while !check(shot), Date() < deadline {
            usleep(300_000)
            shot = try display.screenshot()
        }
        return shot
    }

    @Test func faceBoxedAtTheFaceOverlayKeyAndCloseEndsTheRun() throws {
        let display = try VirtualDisplay()
        let port = freeLoopbackPort()
        let run = try Background.streamlens(["run", "--http", "\(port)", "preview-detect"], environment: display.environment)
        let window = try display.sinkWindow(of: run, timeout: Self.startTimeout)
        // The box: green pixels around the astronaut's face (x ~250-335, y ~70-160 in the window).
        let shot = try Self.eventually(display) { Self.greenBox($0, in: Self.photo).count > 200 }
        let box = Self.greenBox(shot, in: Self.photo)
        #expect(box.count > 200, "no box drawn: \(run.stderr)")
        let centre = ((box.minX + box.maxX) / 2, (box.minY + box.maxY) / 2)
        #expect(abs(centre.0 - 292) < 30 && abs(centre.1 - 115) < 30, "box centre \(centre), box \(box)")
        #expect((50...150).contains(box.maxX - box.minX), "box width \(box.maxX - box.minX)")
        // The overlay: white text on black in the top-left corner (the letterbox is black there).
        let corner = Region(x: 0, y: 0, width: 78, height: 18)
        func whiteText(_ s: [UInt8]) -> Int { corner.pixels(s).filter { $0.r > 200 && $0.g > 200 && $0.b > 200 }.count }
        #expect(whiteText(shot) > 30, "no frame-rate overlay in the corner")
        try display.key("f", window: window)
        let off = try Self.eventually(display) { whiteText($0) == 0 }
        #expect(whiteText(off) == 0, "the overlay stayed after f: \(run.stderr)")
        #expect(run.stderr.contains("key f: set lensdetect0 overlay=false -> ok"), "\(run.stderr)")
        // d: the next device. GPU is refused before it is set where there is none (the stage's
        // own check names the devices) and the detector keeps going; where there is one it
        // switches.
        try display.key("d", window: window)
        #expect(run.waitFor("key d: set lensdetect0 device=GPU -> ", timeout: 5), "\(run.stderr)")
        #expect(run.stderr.contains("key d: set lensdetect0 device=GPU -> error: lensdetect0: ")
                || run.waitFor("now detecting on GPU", timeout: 10), "\(run.stderr)")
        // Keys nobody binds are ignored.
        try display.key("q", window: window)
        try display.key("F5", window: window)
        usleep(500_000)
        #expect(!run.stderr.contains("key q") && !run.stderr.contains("key F5"), "\(run.stderr)")
        #expect(run.isRunning)
        // Two seconds of frames through the stage (the API counts them) before the window closes,
        // for the sink's figures below.
        var frames = 0
        for _ in 0..<Int(300 * CLI.slowdown) where frames < 60 {
            frames = (try HTTPAPITests.curl("http://127.0.0.1:\(port)/api/sources/main", timeout: 5).object["frames"] as? Int) ?? 0
            usleep(100_000)
        }
        #expect(frames >= 60, "\(frames) frames reached the stage: \(run.stderr)")
        // Closing the window ends the run cleanly.
        let closed = try display.close(window: window)
        #expect(closed.status == 0, "close-window.py: \(closed.stderr)")
        #expect(run.waitForExit(timeout: 15 * CLI.slowdown), "still running after the window closed")
        let end = run.stop()
        #expect(end.status == 0, "\(end.stderr)")
        #expect(end.stderr.contains("ximagesink0: window closed: ending the run"), "\(end.stderr)")
        // No error but the key's refused device (a line of its own, answered to the key).
        #expect(!end.stderr.split(separator: "\n").contains { $0.contains("error") && !$0.hasPrefix("key d: ") }, "\(end.stderr)")
        // The window kept up with the live camera: the stage's reported latency lets the synced
        // sink show its frames (few dropped as late), each well within a second of capture.
        let summary = end.stderr.split(separator: "\n").first { $0.hasPrefix("ximagesink0: ") && $0.contains("frames shown") }
        let numbers = summary.map { $0.split(separator: " ").compactMap { Int($0) } } ?? []
        #expect(numbers.count == 3, "\(summary ?? "no sink summary"): \(end.stderr)")
        if numbers.count == 3 {
            let (shown, dropped, lag) = (numbers[0], numbers[1], numbers[2])
            #expect(shown > 30 && Double(dropped) <= max(3, 0.05 * Double(shown)), "\(summary!)")
            #expect(lag >= 15 && Double(lag) <= 250 * CLI.slowdown, "\(summary!)")
        }
    }

    @Test func numberKeysSwitchTheStyleAndMinusTakesTheStrengthDown() throws {
        let display = try VirtualDisplay()
        let run = try Background.streamlens(["run", "preview-stylize"], environment: display.environment)
        let window = try display.sinkWindow(of: run, timeout: Self.startTimeout)
        // Mosaic (the default): warm. Key 2: waves, blue.
        let mosaic = try Self.eventually(display) { let c = Self.photo.meanColour($0); return c.r > c.b + 20 }
        let m = Self.photo.meanColour(mosaic)
        #expect(m.r > m.b + 20, "mosaic: mean colour \(m)")
        try display.key("2", window: window)
        #expect(run.waitFor("now using Models/waves.json", timeout: 20 * CLI.slowdown), "\(run.stderr)")
        let waves = try Self.eventually(display) { let c = Self.photo.meanColour($0); return c.b > c.r + 20 }
        let w = Self.photo.meanColour(waves)
        #expect(w.b > w.r + 20, "waves: mean colour \(w); \(run.stderr)")
        #expect(run.stderr.contains("key 2: set lensstylize0 model=Models/waves.json -> ok"), "\(run.stderr)")
        // Ten steps of minus: strength 0, the camera itself (the orange suit is back).
        for _ in 0..<10 { try display.key("minus", window: window) }
        #expect(run.waitFor("strength=0 -> ok", timeout: 10), "\(run.stderr)")
        let plain = try Self.eventually(display) { let c = Self.photo.meanColour($0); return c.r > c.b + 20 }
        let p = Self.photo.meanColour(plain)
        #expect(p.r > p.b + 20, "strength 0: mean colour \(p)")
        #expect(Self.photo.meanAbsoluteDifference(plain, waves) > 30)
        // Plus brings the style back a tenth at a time.
        try display.key("equal", window: window)
        #expect(run.waitFor("strength=0.1 -> ok", timeout: 10), "\(run.stderr)")
        #expect(try display.close(window: window).status == 0)
        let end = run.stop(timeout: 15 * CLI.slowdown)
        #expect(end.status == 0, "\(end.stderr)")
    }

    @Test func spacePausesAndResumes() throws {
        let display = try VirtualDisplay()
        // A moving picture: videotestsrc's bouncing ball.
        let run = try Background.streamlens(["run", "preview-detect",
                                             "CAMERA=videotestsrc is-live=true pattern=ball ! video/x-raw,width=640,height=480,framerate=30/1"],
                                            environment: display.environment)
        let window = try display.sinkWindow(of: run, timeout: Self.startTimeout)
        usleep(1_000_000)
        let a = try display.screenshot()
        usleep(400_000)
        let b = try display.screenshot()
        #expect(Self.window.meanAbsoluteDifference(a, b) > 0.05, "the ball does not move")
        try display.key("space", window: window)
        #expect(run.waitFor("key space: paused", timeout: 5), "\(run.stderr)")
        usleep(700_000)
        let c = try display.screenshot()
        usleep(600_000)
        let d = try display.screenshot()
        #expect(Self.window.meanAbsoluteDifference(c, d) == 0, "the picture moved while paused")
        try display.key("space", window: window)
        #expect(run.waitFor("key space: playing", timeout: 5), "\(run.stderr)")
        usleep(700_000)
        let e = try display.screenshot()
        #expect(Self.window.meanAbsoluteDifference(d, e) > 0.05, "the picture did not move again after resuming")
        #expect(try display.close(window: window).status == 0)
        let end = run.stop(timeout: 15 * CLI.slowdown)
        #expect(end.status == 0, "\(end.stderr)")
    }

    /// Side by side through a compositor, which passes keys to neither input: both stages still
    /// answer theirs (the host dispatches the keys the sink posts).
    @Test func sideBySideBothStagesAnswerKeys() throws {
        let display = try VirtualDisplay()
        let run = try Background.streamlens(["run", "preview-side-by-side"], environment: display.environment)
        let window = try display.sinkWindow(of: run, timeout: Self.startTimeout)
        let left = Region(x: 80, y: 0, width: 480, height: 480), right = Region(x: 720, y: 0, width: 480, height: 480)
        let shot = try Self.eventually(display) { Self.greenBox($0, in: left).count > 200 && Self.right(right, $0) }
        #expect(Self.greenBox(shot, in: left).count > 200, "no face box on the left: \(run.stderr)")
        try display.key("2", window: window)
        try display.key("f", window: window)
        #expect(run.waitFor("now using Models/waves.json", timeout: 20 * CLI.slowdown), "\(run.stderr)")
        let after = try Self.eventually(display) { let c = right.meanColour($0); return c.b > c.r + 20 }
        let c = right.meanColour(after)
        #expect(c.b > c.r + 20, "the right half is not blue after 2: \(c)")
        #expect(run.stderr.contains("key f: set lensdetect0 overlay=false -> ok"), "\(run.stderr)")
        #expect(Self.greenBox(after, in: left).count > 200, "the face box went away")
        #expect(try display.close(window: window).status == 0)
        let end = run.stop(timeout: 15 * CLI.slowdown)
        #expect(end.status == 0, "\(end.stderr)")
    }

    static func right(_ region: Region, _ screen: [UInt8]) -> Bool {
        let c = region.meanColour(screen)
        return c.r + c.g + c.b > 60 // something is shown there
    }

    @Test func noDisplayIsAClearErrorNamingDISPLAY() throws {
        var unset = ProcessInfo.processInfo.environment
        unset.removeValue(forKey: "DISPLAY")
        unset.removeValue(forKey: "WAYLAND_DISPLAY")
        let a = try CLI.spawn(CLI.binary, ["run", "preview-detect"], environment: unset, timeout: 30)
        #expect(a.status == 1, "\(a.stderr)")
        #expect(a.stderr.contains("error: ximagesink0: it shows video in a window and DISPLAY is not set"), "\(a.stderr)")
        var wrong = unset
        let free = (70..<100).first { !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\($0)") }!
        wrong["DISPLAY"] = ":\(free)"
        for sink in ["ximagesink", "autovideosink", "glimagesink"] {
            let b = try CLI.spawn(CLI.binary, ["run", "preview-detect", "SINK=\(sink)"], environment: wrong, timeout: 30)
            #expect(b.status == 1, "\(sink): \(b.stderr)")
            #expect(b.stderr.contains("cannot open the X display DISPLAY=:\(free) (no X server: /tmp/.X11-unix/X\(free) does not exist)"), "\(sink): \(b.stderr)")
            #expect(b.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }.count == 1, "\(b.stderr)")
        }
    }
}
