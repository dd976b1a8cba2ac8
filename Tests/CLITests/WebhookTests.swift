import Foundation
import StreamLensTesting
import Testing

/// lensmetadata location=http://: a real HTTP server (Python's http.server,
/// Tests/Python/webhook_server.py, on loopback) writing down every request it gets, the built CLI.
@Suite struct WebhookTests {
    /// The receiver answering as `mode` (ok, fail500, silent), its port and the file its
    /// requests go to (the server lives as long as the Background the caller keeps).
    static func server(_ mode: String, in dir: URL) throws -> (Background, Int, String) {
        let log = dir.appendingPathComponent("requests.jsonl").path
        let server = try Background(URL(fileURLWithPath: "/usr/bin/python3"),
                                    [CLI.packageRoot.appendingPathComponent("Tests/Python/webhook_server.py").path, mode, log])
        try #require(server.waitFor("port ", in: \.stdout, timeout: 20), "server: \(server.stderr)")
        let port = try #require(Int(server.stdout.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))
        return (server, port, log)
    }

    struct Request { var path: String, contentType: String?, contentLength: String?, body: String }
    static func requests(_ log: String) -> [Request] {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
            guard let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], let body = o["body"] as? String else { return nil }
            return Request(path: o["path"] as? String ?? "", contentType: o["content_type"] as? String,
                           contentLength: o["content_length"] as? String, body: body)
        }
    }

    static func lines(_ path: String) throws -> [String] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { $0 + "\n" }
    }

    static func summary(of stderr: String, _ stage: String = "lensmetadata0") -> String {
        stderr.split(separator: "\n").first { $0.hasPrefix("\(stage):") && $0.contains(" frames in") }.map(String.init) ?? ""
    }

    /// 20 frames of the astronaut: 20 POSTs, in frame order, each body byte for byte the line a
    /// file sink after it wrote for that frame, as JSON with her face.
    @Test func everyRecordArrivesAsTheFileSinkWritesIt() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port, log) = try Self.server("ok", in: dir)
        defer { withExtendedLifetime(server) {} }
        let file = dir.appendingPathComponent("faces.jsonl").path
        let r = try CLI.run(["run", "filesrc location=\(DetectTests.astronaut) ! pngdec ! imagefreeze num-buffers=20 ! videoconvert ! video/x-raw,format=RGB ! lensdetect draw=false ! " +
                             "lensmetadata location=http://127.0.0.1:\(port)/hooks/camera1?source=test ! lensmetadata location=\(file) ! fakesink"], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Self.summary(of: r.stderr).contains("http://127.0.0.1:\(port)/hooks/camera1?source=test: 20 sent, 0 dropped"), "\(r.stderr)")
        #expect(!r.stderr.contains("warning: lensmetadata"), "\(r.stderr)")
        let requests = Self.requests(log), lines = try Self.lines(file)
        #expect(requests.count == 20 && lines.count == 20, "\(requests.count) requests, \(lines.count) lines")
        #expect(requests.map(\.body) == lines, "the bodies are not the file's lines")
        for (n, q) in requests.enumerated() {
            #expect(q.path == "/hooks/camera1?source=test" && q.contentType == "application/json" && q.contentLength == String(q.body.utf8.count), "\(q)")
            let record = try #require(try JSONSerialization.jsonObject(with: Data(q.body.utf8)) as? [String: Any])
            #expect(record["frame"] as? Int == n && record["schema_version"] as? Int == 4)
            let faces = (record["detections"] as? [[String: Any]]) ?? []
            #expect(faces.count == 1 && faces.first?["label"] as? String == "face", "\(record)")
        }
    }

    /// A receiver that answers 200 and then sends its body for ever: only a few KB of each
    /// answer are read, then the connection is closed, so every record counts as sent and the
    /// run ends as it would with a quiet receiver (each request used to read until its deadline,
    /// up to 64 MiB, and the records were given up).
    @Test func aReceiverThatAnswersForeverCostsAFewKilobytes() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port, log) = try Self.server("endless", in: dir)
        defer { withExtendedLifetime(server) {} }
        let r = try CLI.run(["run", "videotestsrc num-buffers=60 ! video/x-raw,width=160,height=120 ! videoconvert ! " +
                             "lensmetadata location=http://127.0.0.1:\(port)/hook ! fakesink"], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Self.summary(of: r.stderr).contains("http://127.0.0.1:\(port)/hook: 60 sent, 0 dropped"), "\(r.stderr)")
        #expect(Self.requests(log).count == 60)
    }

    /// publish=events: only the frames whose records hold events (lenszone's crossings of a face
    /// moving across the frame) make a request, and they are the same as the file's lines that
    /// hold events.
    @Test func publishEventsPostsOnlyFramesWithEvents() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port, log) = try Self.server("ok", in: dir)
        defer { withExtendedLifetime(server) {} }
        let clip = try ZoneStagesTests.crossingFaceClip(in: dir), file = dir.appendingPathComponent("all.jsonl").path
        let zones = "lines=mid:320,360,320,0 areas=\"pass:200,0,300,0,300,360,200,360\""
        let r = try CLI.run(["run", "filesrc location=\(clip) ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! lensdetect model=Models/face-full-range.json threshold=0.5 draw=false ! " +
                             "lenstrack ! lenszone \(zones) ! lensmetadata location=http://127.0.0.1:\(port)/events publish=events ! lensmetadata location=\(file) ! fakesink"], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = try Self.lines(file)
        #expect(lines.count == 90)
        let withEvents = lines.filter { line in
            ((try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["events"] as? [Any])?.isEmpty == false
        }
        try #require(withEvents.count >= 2, "the clip made \(withEvents.count) frames with events: \(r.stderr)")
        #expect(Self.requests(log).map(\.body) == withEvents)
        #expect(Self.summary(of: r.stderr).contains(": \(withEvents.count) sent, 0 dropped"), "\(r.stderr)")
    }

    /// A peer that answers 500 to everything: the first record is tried 1 + retries times, the
    /// others once each (the peer is failing); the run ends with exit 0, every frame through,
    /// and a warning that counts the records lost.
    @Test func aServerAnswering500CostsRecordsNotTheRun() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port, log) = try Self.server("fail500", in: dir)
        defer { withExtendedLifetime(server) {} }
        let out = dir.appendingPathComponent("out.mp4").path
        let start = Date()
        let r = try CLI.run(["run", "videotestsrc num-buffers=30 ! video/x-raw,width=160,height=120 ! lensmetadata location=http://127.0.0.1:\(port)/hook ! videoconvert ! x264enc ! mp4mux ! filesink location=\(out)"], timeout: 60)
        #expect(r.status == 0 && !r.timedOut, "\(r.stderr)")
        #expect(Date().timeIntervalSince(start) < 20 * CLI.slowdown)
        #expect(countFrames(out) == 30)
        #expect(r.stderr.contains("warning: lensmetadata0: 30 of 30 records not delivered to http://127.0.0.1:\(port)/hook (30 failed (last: HTTP 500)"), "\(r.stderr)")
        #expect(Self.requests(log).count == 3 + 29, "\(Self.requests(log).count) requests")
    }

    /// A peer that takes each request and never answers: the frames go on, the end waits for
    /// the request under way at most its timeout, and the run ends with exit 0 and a warning
    /// counting the records given up.
    @Test func aServerThatNeverAnswersDoesNotHoldTheRun() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port, log) = try Self.server("silent", in: dir)
        defer { withExtendedLifetime(server) {} }
        let out = dir.appendingPathComponent("out.mp4").path
        let start = Date()
        let r = try CLI.run(["run", "videotestsrc num-buffers=30 ! video/x-raw,width=160,height=120 ! lensmetadata location=http://127.0.0.1:\(port)/hook timeout-ms=1000 ! videoconvert ! x264enc ! mp4mux ! filesink location=\(out)"], timeout: 60)
        let took = Date().timeIntervalSince(start)
        #expect(r.status == 0 && !r.timedOut, "\(r.stderr)")
        #expect(took < 15 * CLI.slowdown, "took \(took) s")
        #expect(countFrames(out) == 30)
        let warning = r.stderr.split(separator: "\n").first { $0.contains("records not delivered to http://127.0.0.1:\(port)/hook") }.map(String.init) ?? ""
        #expect(warning.hasPrefix("warning: lensmetadata0: 30 of 30 records not delivered"), "\(r.stderr)")
        #expect(warning.contains("given up at the end"), "\(warning)")
        #expect(Self.summary(of: r.stderr).contains(": 0 sent, 30 dropped"), "\(r.stderr)")
        #expect(!Self.requests(log).isEmpty, "the server never saw a request")
    }

    /// Nobody listens on the port: a warning at the first failure (a live source of 2 s: the
    /// first record's three tries take 0.75 s), every frame through, and the records counted as
    /// failed.
    @Test func anUnreachablePortCostsRecordsNotFrames() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let port = freeLoopbackPort(), out = dir.appendingPathComponent("out.mp4").path
        let r = try CLI.run(["run", "videotestsrc is-live=true num-buffers=60 ! video/x-raw,width=160,height=120 ! lensmetadata location=http://127.0.0.1:\(port)/hook ! videoconvert ! x264enc ! mp4mux ! filesink location=\(out)"], timeout: 60)
        #expect(r.status == 0 && !r.timedOut, "\(r.stderr)")
        #expect(countFrames(out) == 60)
        #expect(r.stderr.contains("warning: lensmetadata0: records cannot be delivered to http://127.0.0.1:\(port)/hook (connection refused)"), "\(r.stderr)")
        #expect(r.stderr.contains("warning: lensmetadata0: 60 of 60 records not delivered to http://127.0.0.1:\(port)/hook (60 failed (last: connection refused"), "\(r.stderr)")
        #expect(Self.summary(of: r.stderr).contains("lensmetadata0: 60 frames in, 60 out"), "\(r.stderr)")
    }

    /// Bad addresses stop the run at start, each with what is wrong and the property's name.
    @Test(arguments: [
        ("https://127.0.0.1:8443/hook", "https is not supported"),
        ("http://127.0.0.1:0/hook", "bad port 0 (1…65535)"),
        ("http:///hook", "no host"),
        ("http://user:secret@127.0.0.1/hook", "no user or password in the URL"),
    ])
    func badAddressFailsAtStart(url: String, why: String) throws {
        let r = try CLI.run(["run", "videotestsrc num-buffers=5 ! lensmetadata location=\(url) ! fakesink"])
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("property location=\(url): \(why)"), "\(r.stderr)")
    }
}
