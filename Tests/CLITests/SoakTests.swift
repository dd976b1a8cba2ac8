import Foundation
import StreamLensTesting
import Testing

/// Soak: a live 30 fps camera → detection → stylization → RTSP, run for minutes while players
/// come and go and the camera drops every minute, watched from outside like an operator would:
/// the server's memory, threads and open files from /proc, its stages' frame age from their `-v`
/// lines, and a player that must still get frames at the end.
///
/// SOAK_MINUTES sets the length (default 3, as `make test` runs it; `make soak` runs the same
/// test for 30). The schedule is SoakPlan's (SoakSupport.swift).
///
/// Three processes besides the players, all real: the camera (`streamlens run`: a 10-s clip of a
/// face, looped as a live 30 fps source by its own watchdog, served by lensrtsp), the system under
/// test (`streamlens run -v soak …`: Pipelines/soak.pipeline, an RTSP client of the camera →
/// lenswatchdog → lensdetect → lensstylize → lensrtsp), and the players (gst-launch-1.0 rtspsrc):
/// a resident one that watches from start to end (a multifilesink whose file names count the
/// frames it got) and the visitors of the plan. An outage is the camera process killed (SIGKILL)
/// and started again 4 s later, so the server sees what a real camera's failure looks like.
@Suite(.serialized) struct SoakTests {
    /// One sample of the server, every 5 s.
    struct Sample {
        var t: Double
        var footprint: ProcessFootprint
        var camera: StageLine?, detect: StageLine?, stylize: StageLine?, serve: StageLine?
        var clients: Int
        var residentFrames: Int
        var events: [String]
    }

    @Test func cameraToStylizedRTSPStaysFlatWhilePlayersComeAndGoAndTheCameraDrops() throws {
        let plan = SoakPlan(minutes: SoakPlan.minutesFromEnvironment())
        let work = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: work) }

        // The camera: a face moving across a grey 640x360 frame for 10 s (so the detector has
        // something to box), played in a loop at its own pace.
        let clip = work.appendingPathComponent("face.mp4").path
        let ffmpeg = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"), [
            "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x3a4450:s=640x360:r=30:d=10", "-loop", "1", "-i", DetectTests.astronaut,
            "-filter_complex", "[1]crop=240:240:140:0,scale=300:300[a];[0][a]overlay=x='20+t*30':y=30:shortest=1,format=yuv420p",
            "-frames:v", "300", "-c:v", "libx264", "-preset", "veryfast", "-g", "30", clip], timeout: 120)
        try #require(ffmpeg.status == 0, "\(ffmpeg.stderr)")
        let cameraPort = freeLoopbackPort()
        var port = freeLoopbackPort()
        while port == cameraPort { port = freeLoopbackPort() }
        try #require(cameraPort > 0 && port > 0)
        let cameraSpec = "filesrc location=\(clip) ! qtdemux ! h264parse ! avdec_h264 ! identity sync=true ! lenswatchdog backoff=0 ! lensrtsp port=\(cameraPort) mount=/cam"
        var camera = try Background.streamlens(["run", cameraSpec])
        try #require(camera.waitFor("serving ", timeout: 60), "camera: \(camera.stderr)")

        let server = try Background.streamlens(["run", "-v", "soak", "INPUT=rtsp://127.0.0.1:\(cameraPort)/cam", "PORT=\(port)"])
        try #require(server.waitFor("serve: serving ", timeout: 120), "\(server.stderr)")
        let url = "rtsp://127.0.0.1:\(port)/soak"
        let start = Date()
        func now() -> Double { Date().timeIntervalSince(start) }

        func player(_ protocols: String, _ tail: String) throws -> Background {
            try Background(URL(fileURLWithPath: "/usr/bin/gst-launch-1.0"),
                           ["-q"] + "rtspsrc location=\(url) latency=0 protocols=\(protocols) ! rtph264depay ! video/x-h264,alignment=au ! \(tail)"
                            .split(separator: " ").map(String.init))
        }
        let residentFolder = work.appendingPathComponent("resident")
        try FileManager.default.createDirectory(at: residentFolder, withIntermediateDirectories: true)
        let resident = try player("tcp", "multifilesink location=\(residentFolder.path)/f%08d max-files=2")

        // The run: events on schedule, a sample every 5 s, until the duration or the server's end.
        // Table rows are printed as they come (a 30-minute run shows its progress).
        say(Self.tableHeader(plan))
        var pending = plan.events
        var visitors: [Int: Background] = [:]
        var polite: [(player: Background, folder: URL, protocols: String, joined: Double)] = []
        var politeResults: [(ok: Bool, text: String)] = []
        var samples: [Sample] = []
        var events: [String] = []
        var nextSample = SoakPlan.sampleInterval
        while server.isRunning {
            let t = now()
            while let next = pending.first, next.at <= t {
                pending.removeFirst()
                switch next.event {
                case .politeClient(let protocols):
                    let folder = work.appendingPathComponent("polite\(politeResults.count + polite.count)")
                    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                    polite.append((try player(protocols, "identity eos-after=61 ! multifilesink location=\(folder.path)/f%08d max-files=2"), folder, protocols, t))
                    events.append("+\(protocols)")
                case .rudeClientJoins(let id, let protocols):
                    visitors[id] = try player(protocols, "fakesink")
                    events.append("+\(protocols)")
                case .rudeClientVanishes(let id):
                    _ = visitors.removeValue(forKey: id)?.stop(signal: SIGKILL)
                    events.append("-kill")
                case .cameraDown:
                    _ = camera.stop(signal: SIGKILL)
                    events.append("cam down")
                case .cameraUp:
                    camera = try Background.streamlens(["run", cameraSpec])
                    events.append("cam up")
                }
            }
            // Polite players end themselves after 60 frames (identity sends end-of-stream in place
            // of the 61st; then TEARDOWN); their multifilesink counts what they got.
            polite.removeAll { p in
                if p.player.isRunning && t - p.joined <= 30 { return false }
                let got = framesReceived(in: p.folder) + 1
                let running = p.player.isRunning
                if running { _ = p.player.stop(signal: SIGKILL) }
                let status = p.player.process.terminationStatus
                let how = running ? "still running 30 s later" : status == 0 ? "left" : "exited \(status): \(p.player.stderr.split(separator: "\n").first ?? "")"
                politeResults.append((got == 60, "a \(p.protocols) player that joined at \(Int(p.joined)) s got \(got) of 60 frames and \(how)"))
                events.append("-\(p.protocols)")
                return true
            }
            if t >= nextSample {
                guard let footprint = ProcessFootprint(pid: server.pid) else { break }
                let log = server.stderr
                let sample = Sample(t: nextSample, footprint: footprint,
                                    camera: StageLine.latest("camera", in: log), detect: StageLine.latest("detect", in: log),
                                    stylize: StageLine.latest("stylize", in: log), serve: StageLine.latest("serve", in: log),
                                    clients: connectedClients("serve", in: log), residentFrames: framesReceived(in: residentFolder) + 1,
                                    events: events)
                samples.append(sample)
                if let row = Self.row(samples, plan: plan) { say(row) }
                events = []
                if nextSample >= plan.duration { break }
                nextSample += SoakPlan.sampleInterval
            }
            usleep(50_000)
        }
        let ranToTheEnd = server.isRunning && samples.last?.t == plan.duration
        // A server that stopped delivering while still running (a stuck watchdog, a deadlock):
        // its threads' stacks, taken before it is stopped, say where.
        var stacks = ""
        if ranToTheEnd, samples.count >= 4, samples[samples.count - 1].residentFrames - samples[samples.count - 4].residentFrames < 30,
           FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb") {
            stacks = (try? CLI.spawn(URL(fileURLWithPath: "/usr/bin/gdb"), ["-q", "-batch", "-p", "\(server.pid)", "-ex", "thread apply all bt 30"], timeout: 120).stdout) ?? ""
        }

        // At the end: a new player decodes frames, then the server is stopped as a user would.
        let final = try RTSPTests.gstFrames(url, count: 30, width: 640, height: 360, protocols: "tcp", timeout: 40)
        _ = resident.stop(signal: SIGKILL)
        for v in visitors.values { _ = v.stop(signal: SIGKILL) }
        for p in polite { _ = p.player.stop(signal: SIGKILL) }
        say(Self.tableFooter)
        _ = camera.stop(signal: SIGKILL)
        let end = server.stop(signal: SIGINT, timeout: 30)
        let log = end.stderr

        try #require(ranToTheEnd, "the server ended after \(Int(samples.last?.t ?? 0)) s (status \(end.status), \(server.process.terminationReason == .uncaughtSignal ? "signal" : "exit")):\n\(log.suffix(4000))")
        #expect(server.process.terminationReason == .exit && end.status == 0 && !end.timedOut,
                "the server's end after Ctrl-C: status \(end.status), \(server.process.terminationReason == .uncaughtSignal ? "killed by a signal" : "exited")\(end.timedOut ? ", did not end within 30 s" : "")\n\(log.suffix(4000))")

        let verdict = Self.verdict(samples, plan: plan)
        for failure in verdict.failures { Issue.record(Comment(rawValue: failure)) }
        say(verdict.lines.joined(separator: "\n"))

        // The stream still reaches a player at the end: a new one decodes 30 frames of a picture
        // (not a blank or a single colour) and the resident one was still getting frames.
        #expect(final.result.status == 0 && final.frames.count == 30, "final player: \(final.frames.count) frames, \(final.result.stderr)")
        if let last = final.frames.last {
            let mean = Double(last.reduce(0) { $0 + Int($1) }) / Double(last.count)
            let spread = (Double(last.reduce(0) { $0 + (Double($1) - mean) * (Double($1) - mean) }) / Double(last.count)).squareRoot()
            #expect(spread > 20 && mean > 20 && mean < 235, "final frame: mean \(mean), standard deviation \(spread)")
        }
        if samples.count >= 4 {
            let got = samples[samples.count - 1].residentFrames - samples[samples.count - 4].residentFrames
            #expect(got >= 30, "the resident player got \(got) frames in the last 15 s\n\(log.suffix(3000))\n\(stacks)")
        }
        // Every visitor that meant to leave politely got its 60 frames. One that then exits with
        // "Could not write to resource" is reported but does not fail the soak: rtspsrc sends its
        // PAUSE after its own TEARDOWN now and then, when the server has closed the connection as
        // TEARDOWN asks (gst-rtsp-server's log: "sending close message", then the PAUSE fails).
        let politePlanned = plan.events.filter { if case .politeClient = $0.event { return true } else { return false } }.count
        let politeOK = politeResults.filter(\.ok).count
        say("soak: \(politeOK) of \(politePlanned) polite players got their 60 frames" + politeResults.filter { !$0.ok || !$0.text.hasSuffix("and left") }.map { "; \($0.text)" }.joined())
        #expect(politeOK == politePlanned, "\(politeResults.filter { !$0.ok }.map(\.text))")
        // Every outage was noticed and recovered from; detection found the face; the most
        // players at once was the three the plan has (resident + two polite ones).
        let recoveries = log.components(separatedBy: "camera: source back after").count - 1
        #expect(recoveries >= plan.outages, "\(recoveries) recoveries for \(plan.outages) outages\n\(log.suffix(4000))")
        let detect = log.split(separator: "\n").last { $0.hasPrefix("detect: ") && $0.contains(" face boxes") }.flatMap { StageLine($0.dropFirst(8)) }
        #expect((detect?.faceBoxes ?? 0) > 0, "\(log.suffix(2000))")
        let most = log.range(of: "serve: ", options: .backwards).flatMap { r in
            log[r.upperBound...].components(separatedBy: "at most ").dropFirst().first?.split(separator: " ").first.flatMap { Int($0) }
        } ?? 0
        #expect(most >= 3, "the most players at once: \(most)\n\(log.suffix(2000))")
    }

    // MARK: - pass criteria

    /// Headroom over the 1-minute sample for threads and file descriptors; see `verdict`.
    static let threadSlack = 2, descriptorSlack = 2

    /// The pass criteria, comparing the last sample with the one at 60 s (both taken with only
    /// the resident player connected and the camera up for at least 15 s):
    /// - RSS: at most 1.10 × the 1-minute figure (the issue's bound). By 60 s the models are
    ///   compiled, every pool has been used and the first visitors have come and gone, so what
    ///   grows after that is growth per frame, per player or per outage.
    /// - Threads ≤ 1-minute + 2, file descriptors ≤ 1-minute + 2. Not +0: in samples taken in
    ///   the same state (one player, camera up) the thread count still moves between 41 and 43
    ///   here (GLib keeps idle threads of its shared pool for a while after a burst: GstTaskPool,
    ///   gst-rtsp-server), and a player still connecting or leaving adds 1 descriptor and 1
    ///   thread. A leak adds up instead: each visiting player costs ~1 thread and 1 descriptor
    ///   while connected and the camera's source part 8 threads and 14 descriptors while it runs,
    ///   so a leak of one per player (10 in the 3-minute run) or of a socket pair per outage
    ///   (2 outages) fails the 3-minute run; a leak of a single thread or descriptor per outage
    ///   needs the longer runs (`make soak`: 29 outages in 30 minutes).
    /// - Frame age p95 where frames leave the pipeline (`serve`, the lensrtsp stage) at most
    ///   1.5 × its 1-minute figure × the slowdown + one stylizer frame time (its latest median).
    ///   Live stages keep one frame, so a frame's age is the stage times plus up to one stage time
    ///   of waiting per stage: it moves with the speed of the machine, which other work on these
    ///   two shared cores changes by 2× and more within minutes. The slowdown measures that: the
    ///   frames served per second over the 1024 frames the 1-minute quantiles cover, divided by
    ///   the same over the last 1024 (at least 1, at most 3; an outage among them lowers the rate
    ///   too, by ~15%, which only loosens the bound that much). A slower machine lowers the rate and
    ///   raises the age together; a queue that builds up (the failure this is for) raises the age
    ///   while the rate stays, by whole frame intervals per frame held and without bound. 1.5×
    ///   absorbs the noise of a p95; one stylizer frame covers one more frame of waiting. Beyond 3×
    ///   slower the run fails here rather than excusing anything, and a stalled stream fails the
    ///   resident player's check. The quantiles are over the stage's latest 1024 frames
    ///   (FrameStatistics.window: ~40 s at 25 fps), not all frames since the start.
    static func verdict(_ samples: [Sample], plan: SoakPlan) -> (failures: [String], lines: [String]) {
        guard let base = samples.first(where: { $0.t == SoakPlan.baseline }), let last = samples.last else {
            return (["no sample at \(Int(SoakPlan.baseline)) s and at the end"], [])
        }
        var failures: [String] = [], lines: [String] = []
        func check(_ ok: Bool, _ text: String) {
            lines.append("soak: \(ok ? "pass" : "FAIL") \(text)")
            if !ok { failures.append(text) }
        }
        let rss0 = Double(base.footprint.rssKilobytes), rss1 = Double(last.footprint.rssKilobytes)
        check(rss1 <= rss0 * 1.10, String(format: "RSS %.1f MB at %d s ≤ 1.10 × %.1f MB at 60 s (%.3f×)", rss1 / 1024, Int(last.t), rss0 / 1024, rss1 / max(rss0, 1)))
        check(last.footprint.threads <= base.footprint.threads + threadSlack,
              "threads \(last.footprint.threads) at \(Int(last.t)) s ≤ \(base.footprint.threads) at 60 s + \(threadSlack)")
        check(last.footprint.fileDescriptors <= base.footprint.fileDescriptors + descriptorSlack,
              "file descriptors \(last.footprint.fileDescriptors) at \(Int(last.t)) s ≤ \(base.footprint.fileDescriptors) at 60 s + \(descriptorSlack)")
        if let p0 = base.serve?.ageP95, let p1 = last.serve?.ageP95, let stylize = last.stylize?.stylizeFrameMilliseconds,
           let i0 = samples.firstIndex(where: { $0.t == base.t }), let r0 = servedRate(samples, upTo: i0),
           let r1 = servedRate(samples, upTo: samples.count - 1), r1 > 0 {
            let slowdown = min(3, max(1, r0 / r1))
            let limit = 1.5 * p0 * slowdown + stylize
            check(p1 <= limit, String(format: "frame age p95 %.0f ms at %d s ≤ 1.5 × %.0f ms at 60 s × slowdown %.2f (%.1f → %.1f frames/s served) + %.1f ms (one stylizer frame) = %.0f ms",
                                      p1, Int(last.t), p0, slowdown, r0, r1, stylize, limit))
        } else {
            check(false, "frame age p95 at 60 s and at the end, the frames served and the stylizer's frame time were all printed")
        }
        check(last.residentFrames > base.residentFrames, "the resident player's frames kept coming (\(base.residentFrames) at 60 s, \(last.residentFrames) at \(Int(last.t)) s)")
        return (failures, lines)
    }

    /// Frames served per second over the serve stage's latest 1024 frames at sample `i` (the
    /// frames its age quantiles cover), or since its first frame when it has served fewer.
    static func servedRate(_ samples: [Sample], upTo i: Int) -> Double? {
        guard let out = samples[i].serve?.framesOut else { return nil }
        let from = samples[..<i].lastIndex(where: { ($0.serve?.framesOut ?? 0) <= out - 1024 && $0.serve != nil })
            ?? samples[..<i].firstIndex(where: { $0.serve != nil })
        guard let j = from, samples[i].t > samples[j].t else { return nil }
        return Double(out - (samples[j].serve?.framesOut ?? 0)) / (samples[i].t - samples[j].t)
    }

    // MARK: - the table

    static func tableHeader(_ plan: SoakPlan) -> String {
        ["soak: \(Int(plan.duration / 60)) min, \(plan.outages) camera outages, \(plan.clientJoins) visiting players; server under test: Pipelines/soak.pipeline",
         "soak:    t s   RSS MB  fds  thr  age p50  age p95  frames in    out  dropped  clients  resident  events"].joined(separator: "\n")
    }

    static let tableFooter = "soak: age = frame age where frames leave the pipeline (serve; p50/p95 of its latest 1024 frames); in = frames from the camera; out = frames served; dropped = live drops in detect+stylize+serve; clients = as the server counts them; resident = frames the resident player got; events since the row before"

    /// The row for the latest sample, or nil when the table skips it (every sample up to 5
    /// minutes, else every 30 s, plus 60 s and the end); the events of skipped samples carry over.
    static func row(_ samples: [Sample], plan: SoakPlan) -> String? {
        guard let s = samples.last else { return nil }
        let every = plan.duration <= 300 ? 5.0 : 30.0
        guard s.t.truncatingRemainder(dividingBy: every) == 0 || s.t == SoakPlan.baseline || s.t == plan.duration else { return nil }
        // Events since the previous printed row.
        var events: [String] = []
        for earlier in samples.reversed() {
            if earlier.t < s.t, earlier.t.truncatingRemainder(dividingBy: every) == 0 || earlier.t == SoakPlan.baseline { break }
            events = earlier.events + events
        }
        func ms(_ v: Double?) -> String { v.map { String(format: "%.0f ms", $0) } ?? "-" }
        let dropped = [s.detect, s.stylize, s.serve].compactMap { $0?.dropped }.reduce(0, +)
        return "soak:" + String(format: " %6.0f  %7.1f  %3d  %3d", s.t, Double(s.footprint.rssKilobytes) / 1024, s.footprint.fileDescriptors, s.footprint.threads)
            + " " + ms(s.serve?.ageP50).leftPadded(8) + " " + ms(s.serve?.ageP95).leftPadded(8)
            + " " + "\(s.camera?.framesIn ?? 0)".leftPadded(10) + " " + "\(s.serve?.framesOut ?? 0)".leftPadded(6)
            + " " + "\(dropped)".leftPadded(8) + " " + "\(s.clients)".leftPadded(8) + " " + "\(s.residentFrames)".leftPadded(9)
            + "  " + events.joined(separator: " ")
    }
}

/// A line to the test's output now, unbuffered: under `swift test` stdout is a pipe, and print
/// would hold a 30-minute table back until the end.
private func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

private extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
