import Foundation
import StreamLensTesting
import Testing

enum Promtool {
    static let path = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// `streamlens run --metrics`: /metrics scraped (curl) from real pipelines while they run,
/// checked by Prometheus' own promtool (Debian's prometheus package, installed by set-up), and
/// its figures held against what others measure: the kernel's VmRSS, the broker's subscriber.
@Suite(.serialized, .enabled(if: Promtool.path != nil, "needs promtool (Debian's prometheus package): run tools/setup.sh"))
struct MetricsEndpointTests {
    static let promtool = Promtool.path
    static let astronaut = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path

    /// One scrape: the page, and its samples by "name{labels}".
    struct Page {
        var text: String
        var samples: [String: Double] = [:]
        init(_ text: String) {
            self.text = text
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                guard let space = line.lastIndex(of: " "), let v = Double(line[line.index(after: space)...]) else { continue }
                samples[String(line[..<space])] = v
            }
        }
        subscript(_ key: String) -> Double? { samples[key] }
    }

    static func scrape(_ port: Int) -> Page? {
        guard let r = try? CLI.spawn(URL(fileURLWithPath: "/usr/bin/curl"), ["-sf", "--max-time", "10", "http://127.0.0.1:\(port)/metrics"], timeout: 20),
              r.status == 0 else { return nil }
        return Page(r.stdout)
    }

    /// Scrapes until `condition` holds (bounded): an event, not a time.
    static func scrape(_ port: Int, until condition: (Page) -> Bool, timeout: Double = 120) -> Page? {
        let deadline = Date().addingTimeInterval(timeout)
        var last: Page?
        while Date() < deadline {
            if let page = scrape(port) {
                last = page
                if condition(page) { return page }
            }
            usleep(100_000)
        }
        return last
    }

    static func promtoolCheck(_ text: String) throws -> (status: Int32, output: String) {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("metrics.txt")
        try text.write(to: file, atomically: true, encoding: .utf8)
        // promtool reads the page on its standard input.
        let r = try CLI.spawn(URL(fileURLWithPath: "/bin/sh"), ["-c", "\(promtool!) check metrics < '\(file.path)'"], timeout: 30)
        return (r.status, r.stdout + r.stderr)
    }

    static func residentBytes(of pid: Int32) -> Double? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kb = Double(line.split(separator: " ").dropFirst().first ?? "") else { return nil }
        return kb * 1024
    }

    /// A live pipeline (the astronaut as a 15 fps live source) through detection, tracking and
    /// MQTT publishing to a real broker, scraped twice while it runs.
    @Test(.enabled(if: MQTTBroker.available, "needs Debian's mosquitto broker"))
    func scrapedWhileRunningValidAndTrue() throws {
        let broker = try MQTTBroker()
        try broker.start()
        try broker.subscribe()
        let port = freeLoopbackPort()
        let run = try Background.streamlens(["run", "--metrics", "127.0.0.1:\(port)",
            "filesrc location=\(Self.astronaut) ! pngdec ! imagefreeze is-live=true ! videoconvert ! video/x-raw,format=RGB,framerate=15/1 ! lensdetect draw=false precision=f32 ! lenstrack ! lensmetadata location=mqtt://127.0.0.1:\(broker.port)/streamlens/test ! fakesink"])
        let metadataIn = "streamlens_stage_frames_received_total{stage=\"lensmetadata0\"}"
        let first = try #require(Self.scrape(port) { ($0[metadataIn] ?? 0) >= 20 }, "no /metrics page: \(run.stderr)")
        #expect((first[metadataIn] ?? 0) >= 20, "\(first.text)")
        let second = try #require(Self.scrape(port) { ($0[metadataIn] ?? 0) >= (first[metadataIn] ?? 0) + 10 })
        let rssNow = Self.residentBytes(of: run.pid)
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(r.status == 0 && !r.timedOut, "\(r.stderr)")

        // Prometheus' own parser and linter accept the page.
        for page in [first, second] {
            let check = try Self.promtoolCheck(page.text)
            #expect(check.status == 0, "promtool: \(check.output)\n\(page.text)")
        }
        // Counters never go down between scrapes.
        for (key, value) in first.samples where key.contains("_total") || key.contains("_count") || key.contains("_bucket") {
            #expect((second[key] ?? -1) >= value, "\(key): \(value) then \(second[key] ?? -1)")
        }
        let p = second
        // What runs where, and one inference and one face per frame.
        #expect(p["streamlens_model_info{stage=\"lensdetect0\",model=\"Models/face-short-range.json\",device=\"CPU\",precision=\"f32\"}"] == 1, "\(p.text)")
        let inferences = try #require(p["streamlens_inference_seconds_count{stage=\"lensdetect0\"}"])
        #expect(inferences >= 20)
        #expect(p["streamlens_regions_detected_total{stage=\"lensdetect0\"}"] == inferences)
        #expect(p["streamlens_inference_seconds_bucket{stage=\"lensdetect0\",le=\"+Inf\"}"] == inferences)
        let inferenceSum = try #require(p["streamlens_inference_seconds_sum{stage=\"lensdetect0\"}"])
        #expect(inferenceSum > 0 && inferenceSum / inferences < 1, "mean inference \(inferenceSum / inferences) s")
        // A stage's figures are published together (stages publish at their own moments, so
        // one stage's against another's in a scrape may be a few frames apart).
        let detectOut = try #require(p["streamlens_stage_frames_sent_total{stage=\"lensdetect0\"}"])
        #expect(detectOut <= (p["streamlens_stage_frames_received_total{stage=\"lensdetect0\"}"] ?? 0))
        #expect((p["streamlens_stage_frames_received_total{stage=\"lenstrack0\"}"] ?? 0) >= 20)
        #expect(p["streamlens_stage_live{stage=\"lensdetect0\"}"] == 1)
        let fps = try #require(p["streamlens_stage_frames_per_second{stage=\"lensdetect0\"}"])
        #expect(fps > 5 && fps < 30, "fps \(fps) from a 15 fps source")
        #expect(p["streamlens_tracks_confirmed_total{stage=\"lenstrack0\"}"] == 1)
        // MQTT: connected, sending, and never more sent than the subscriber receives in the end.
        #expect(p["streamlens_mqtt_connected{stage=\"lensmetadata0\"}"] == 1)
        let sent = try #require(p["streamlens_mqtt_messages_sent_total{stage=\"lensmetadata0\"}"])
        #expect(sent >= 20)
        #expect(broker.waitForMessages(Int(sent), timeout: 20), "\(sent) sent, \(broker.messages().count) received")
        #expect(p["streamlens_mqtt_messages_dropped_total{stage=\"lensmetadata0\",reason=\"queue_full\"}"] == 0)
        // The process: the kernel's own figure for its memory, CPU time spent.
        let rss = try #require(p["streamlens_process_resident_memory_bytes"])
        if let rssNow { #expect(abs(rss - rssNow) / rssNow < 0.25, "metrics \(rss), kernel \(rssNow)") }
        #expect((p["streamlens_process_cpu_seconds_total"] ?? 0) > 0)
        #expect(p.text.contains("streamlens_build_info{version=\""))
        // The run's own summary (after the last scrape) counts at least as many frames.
        let summary = try #require(r.stderr.split(separator: "\n").first { $0.hasPrefix("lensdetect0:") && $0.contains("frames in") })
        let framesIn = Double(summary.split(separator: " ")[1]) ?? 0
        #expect(framesIn >= detectOut, "\(summary)")
    }

    /// A source that ends every 10 frames behind a watchdog: each restart is counted.
    @Test func watchdogRestartsAreCounted() throws {
        let port = freeLoopbackPort()
        let run = try Background.streamlens(["run", "--metrics", "\(port)",
            "videotestsrc is-live=true num-buffers=10 ! video/x-raw,width=64,height=48,framerate=30/1 ! lenswatchdog backoff=0 retries=0 ! fakesink"])
        let key = "streamlens_source_restarts_total{stage=\"lenswatchdog0\"}"
        let page = try #require(Self.scrape(port) { ($0[key] ?? 0) >= 3 }, "\(run.stderr)")
        #expect((page[key] ?? 0) >= 3, "\(page.text)")
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        let check = try Self.promtoolCheck(page.text)
        #expect(check.status == 0, "promtool: \(check.output)")
    }

    /// The server is up before the pipeline: a run whose spec fails to start says why and
    /// exits; a scraper never hangs the run (a client that connects and says nothing).
    @Test func aSilentClientDoesNotHoldTheRun() throws {
        let port = freeLoopbackPort()
        let run = try Background.streamlens(["run", "--metrics", "\(port)",
            "videotestsrc is-live=true num-buffers=60 ! video/x-raw,width=64,height=48,framerate=30/1 ! lenspass ! fakesink"])
        // Connected, silent, never closed until the run is over.
        var silent: [Int32] = []
        let deadline = Date().addingTimeInterval(30)
        while silent.count < 20, Date() < deadline {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = in_port_t(UInt16(port).bigEndian)
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            let ok = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            if ok == 0 { silent.append(fd) } else { close(fd); usleep(50_000) }
        }
        defer { silent.forEach { close($0) } }
        #expect(silent.count == 20)
        #expect(run.waitForExit(timeout: 60), "\(run.stderr)")
        #expect(run.process.terminationStatus == 0, "\(run.stderr)")
        #expect(run.stderr.contains("lenspass0: 60 frames in, 60 out"), "\(run.stderr)")
    }

    /// Slowloris: eight clients trickle an endless request a byte every 0.8 s and reconnect
    /// whenever they are closed. The server (libsoup on one event loop) holds them without a
    /// thread each and closes each 10 s after it connected (the request deadline), so a scraper
    /// gets its 200 while they trickle; half a request left alone is closed at the same deadline.
    @Test func tricklingClientsDoNotKeepTheScraperOut() throws {
        let port = freeLoopbackPort()
        let run = try Background.streamlens(["run", "--metrics", "\(port)",
            "videotestsrc is-live=true ! video/x-raw,width=64,height=48,framerate=30/1 ! lenspass ! fakesink"])
        try #require(Self.scrape(port, until: { _ in true }, timeout: 60) != nil, "no /metrics page: \(run.stderr)")
        let clients = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", """
            import itertools, socket, sys, threading, time
            port = int(sys.argv[1]); stop = threading.Event(); connections = [0]
            def connect():
                return socket.create_connection(("127.0.0.1", port), timeout=5)
            def trickle():
                while not stop.is_set():
                    s = None
                    try:
                        s = connect(); connections[0] += 1
                        for b in itertools.chain(b"GET /metrics HTTP/1.1\\r\\nX-Slow: ", itertools.repeat(ord("a"))):
                            if stop.is_set(): break
                            s.send(bytes([b])); time.sleep(0.8)
                    except OSError: pass  # closed by the server: connect again
                    if s: s.close()
            def scrape():
                try:
                    s = connect(); s.sendall(b"GET /metrics HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n"); data = b""
                    while True:
                        d = s.recv(65536)
                        if not d: break
                        data += d
                    s.close()
                    return data.split(b" ")[1].decode() if data else "closed"
                except OSError as e: return type(e).__name__
            threads = [threading.Thread(target=trickle) for _ in range(8)]
            for t in threads: t.start()
            time.sleep(1)
            print("while they trickle:", scrape())
            t0 = time.time(); status = None
            while time.time() - t0 < 60:
                status = scrape()
                if status == "200": break
                time.sleep(0.1)
            print("scrape %s after %.1f s" % (status, time.time() - t0))
            stop.set()
            for t in threads: t.join()
            print("trickling connections: %d" % connections[0])
            s = connect(); s.settimeout(15); s.sendall(b"GET /metrics HTTP/1.1\\r\\n"); t1 = time.time()
            try: print("half a request: %s after %.0f s" % (s.recv(4096).split(b"\\r\\n")[0].decode() or "closed", time.time() - t1))
            except OSError as e: print("half a request:", type(e).__name__)
            """, String(port)], timeout: 120)
        #expect(Self.printed(clients.stdout, "while they trickle: 200"), "\(clients.stdout) \(clients.stderr)")
        #expect(Self.printed(clients.stdout, "scrape 200 after"), "\(clients.stdout) \(clients.stderr)")
        #expect(Self.printed(clients.stdout, "half a request: closed after 10 s") || Self.printed(clients.stdout, "half a request: closed after 11 s"), "\(clients.stdout)")
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
    }

    static func printed(_ output: String, _ prefix: String) -> Bool {
        output.split(separator: "\n").contains { $0.hasPrefix(prefix) }
    }
}
