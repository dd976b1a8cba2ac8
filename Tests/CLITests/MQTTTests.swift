import Foundation
import StreamLensTesting
import Testing

/// lensmetadata location=mqtt://: a real broker (Debian's mosquitto) on loopback, a real
/// subscriber (mosquitto_sub), the built CLI.
@Suite(.serialized, .enabled(if: MQTTBroker.available, "needs Debian's mosquitto broker (/usr/sbin/mosquitto): run tools/setup.sh"))
struct MQTTTests {
    static let astronaut = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path

    static func summary(of stderr: String) -> String? {
        stderr.split(separator: "\n").first { $0.hasPrefix("lensmetadata0:") && $0.contains(" frames in") }.map(String.init)
    }

    /// 60 frames of the astronaut: 60 messages, in frame order, each with her face.
    @Test func everyFrameArrivesInOrderWithItsBox() throws {
        let broker = try MQTTBroker()
        try broker.start()
        try broker.subscribe()
        let r = try CLI.run(["run", "filesrc location=\(Self.astronaut) ! pngdec ! imagefreeze num-buffers=60 ! videoconvert ! video/x-raw,format=RGB ! lensdetect draw=false ! lensmetadata location=mqtt://127.0.0.1:\(broker.port)/streamlens/test ! fakesink"], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Self.summary(of: r.stderr)?.contains("60 sent, 0 dropped") == true, "\(r.stderr)")
        #expect(broker.waitForMessages(60, timeout: 10))
        let messages = broker.messages()
        #expect(messages.count == 60)
        #expect(messages.compactMap { $0["frame"] as? Int } == Array(0..<60))
        for m in messages {
            #expect(m["schema_version"] as? Int == 4)
            let faces = (m["detections"] as? [[String: Any]]) ?? []
            #expect(faces.count == 1)
            guard let f = faces.first, let x = f["x"] as? Double, let y = f["y"] as? Double, let w = f["width"] as? Double else {
                Issue.record("no face box in \(m)"); continue
            }
            #expect(abs(x - 179) < 4 && abs(y - 82) < 4 && abs(w - 92) < 4, "box \(x) \(y) \(w)")
        }
    }

    /// The broker killed mid-run and restarted on the same port: the run goes on to the end and
    /// messages with later frames reach a new subscriber.
    @Test func brokerKilledAndRestartedMidRun() throws {
        let broker = try MQTTBroker()
        try broker.start()
        try broker.subscribe()
        let frames = 150 // 10 s at 15 fps
        let run = try Background.streamlens(["run", "filesrc location=\(Self.astronaut) ! pngdec ! imagefreeze num-buffers=\(frames) ! video/x-raw,framerate=15/1 ! videoconvert ! video/x-raw,format=RGB ! identity sync=true ! lensmetadata location=mqtt://127.0.0.1:\(broker.port)/streamlens/test ! fakesink"])
        try #require(broker.waitForMessages(10, timeout: 30), "no messages before the outage: \(run.stderr)")
        broker.kill()
        broker.unsubscribe()
        let before = broker.messages().compactMap { $0["frame"] as? Int }.max() ?? -1
        try broker.start()
        try broker.subscribe()
        #expect(run.waitForExit(timeout: 60))
        let (status, stderr, timedOut) = run.stop()
        #expect(status == 0 && !timedOut, "\(stderr)")
        let summary = Self.summary(of: stderr) ?? ""
        #expect(summary.hasPrefix("lensmetadata0: \(frames) frames in, \(frames) out"), "\(stderr)")
        #expect(summary.contains("1 reconnect") || summary.contains(" reconnects"), "\(summary)")
        #expect(!summary.contains(" 0 reconnects"), "\(summary)")
        let after = broker.messages().compactMap { $0["frame"] as? Int }
        #expect(!after.isEmpty && after.allSatisfy { $0 > before }, "before the outage up to frame \(before), after: \(after)")
        #expect(after.last == frames - 1, "\(after)")
    }

    /// Bad URLs stop the run at start, each with what is wrong and the property's name.
    @Test(arguments: [
        ("mqtt://127.0.0.1:1883", "no topic"),
        ("mqtt://127.0.0.1:70000/streamlens/test", "bad port 70000"),
        ("amqp://127.0.0.1/streamlens/test", "unknown scheme amqp"),
    ])
    func badURLFailsAtStart(url: String, why: String) throws {
        let r = try CLI.run(["run", "videotestsrc num-buffers=5 ! lensmetadata location=\(url) ! fakesink"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("property location=\(url): \(why)"), "\(r.stderr)")
    }

    /// No broker at all: the run ends normally and the summary says every message was dropped, and why.
    @Test func brokerNeverThere() throws {
        let port = freeLoopbackPort()
        let r = try CLI.run(["run", "videotestsrc num-buffers=30 ! lensmetadata location=mqtt://127.0.0.1:\(port)/streamlens/test qos=1 ! fakesink"])
        #expect(r.status == 0, "\(r.stderr)")
        let summary = Self.summary(of: r.stderr) ?? ""
        #expect(summary.contains("0 sent, 30 dropped: never connected to the broker"), "\(r.stderr)")
        #expect(summary.contains("Connection refused"), "\(summary)")
    }

    /// max-queued=10 while the broker is away, 60 frames, then the broker: exactly the last 10
    /// messages (frames 50…59) reach it, and the summary counts 10 sent and 50 dropped as the
    /// queue overflowed. Nothing here waits for a time, only for events: the frames come from
    /// standard input (fdsrc), all 60 written at once, and the stream ends only when the test
    /// closes it; a second lensmetadata after the MQTT one writes a file, whose 60th line says
    /// every message was queued; then the broker starts, and the test waits for the 10 messages
    /// before it ends the stream. The subscriber's session is a persistent one (clean session
    /// off, QoS 1, the broker's persistence and queue_qos0_messages), made before the broker
    /// went away: whether the publisher's next retry (1 s, doubling to 10 s) comes before the
    /// subscriber is back or after, the broker keeps the messages for it. (The broker saves its
    /// sessions on every change, autosave_on_changes: the test's children cannot get SIGTERM, a
    /// child of Foundation's Process inherits it blocked, so the broker is SIGKILLed once its log
    /// says it saved after acknowledging the subscription.)
    @Test func queueBoundWhileTheBrokerIsAway() throws {
        let broker = try MQTTBroker()
        broker.configuration = ["persistence true", "persistence_location \(broker.directory.path)/", "autosave_on_changes true",
                                "autosave_interval 1", "queue_qos0_messages true"]
        let session = ["-i", "streamlens-queue-test", "-c", "-q", "1"]
        try broker.start()
        try broker.subscribe(extra: session)
        func savedAfterSubscribing() -> Bool {
            broker.log.components(separatedBy: "Sending SUBACK").last?.contains("Saving in-memory database") == true
        }
        let saveDeadline = Date().addingTimeInterval(10)
        while !savedAfterSubscribing(), Date() < saveDeadline { usleep(20_000) }
        try #require(savedAfterSubscribing(), "the broker saved no session: \(broker.log.suffix(400))")
        broker.unsubscribe()
        broker.kill()

        let frames = 60, width = 16, height = 16
        let progress = broker.path("progress.jsonl")
        let input = Pipe()
        let run = try Background.streamlens(["run", "fdsrc ! rawvideoparse format=rgb width=\(width) height=\(height) framerate=30/1 ! lensmetadata location=mqtt://127.0.0.1:\(broker.port)/streamlens/test max-queued=10 ! lensmetadata location=\(progress) ! fakesink"],
                                            standardInput: input)
        // 46 KB: within a pipe's buffer, so the write never waits for the reader.
        try input.fileHandleForWriting.write(contentsOf: Data(count: frames * width * height * 3))
        func lines() -> Int { ((try? String(contentsOfFile: progress, encoding: .utf8)) ?? "").split(separator: "\n").count }
        let deadline = Date().addingTimeInterval(60)
        while lines() < frames, run.isRunning, Date() < deadline { usleep(20_000) }
        try #require(lines() == frames && run.isRunning, "\(lines()) of \(frames) frames through: \(run.stderr)")

        try broker.start()
        try broker.subscribe(extra: session)
        #expect(broker.waitForMessages(10, timeout: 60), "\(broker.messages().count) messages: \(run.stderr)")
        try input.fileHandleForWriting.close()
        #expect(run.waitForExit(timeout: 30))
        let (status, stderr, timedOut) = run.stop()
        #expect(status == 0 && !timedOut, "\(stderr)")
        let summary = Self.summary(of: stderr) ?? ""
        #expect(summary.contains("mqtt://127.0.0.1:\(broker.port)/streamlens/test: 10 sent, 50 dropped (50 queue full while the broker was away), 0 reconnects"), "\(stderr)")
        #expect(broker.messages().compactMap { $0["frame"] as? Int } == Array(50..<60))
    }

    /// QoS 1: every message acknowledged before the run ends; publish=regions: frames without
    /// regions (videotestsrc has no faces) make no message.
    @Test func qos1AndPublishRegions() throws {
        let broker = try MQTTBroker()
        try broker.start()
        try broker.subscribe()
        let r = try CLI.run(["run", "filesrc location=\(Self.astronaut) ! pngdec ! imagefreeze num-buffers=20 ! videoconvert ! video/x-raw,format=RGB ! lensdetect draw=false ! lensmetadata location=mqtt://127.0.0.1:\(broker.port)/streamlens/test qos=1 ! fakesink"], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Self.summary(of: r.stderr)?.contains("20 sent, 0 dropped") == true, "\(r.stderr)")
        #expect(broker.waitForMessages(20, timeout: 10))
        let none = try CLI.run(["run", "videotestsrc num-buffers=20 ! videoconvert ! video/x-raw,format=RGB ! lensdetect draw=false ! lensmetadata location=mqtt://127.0.0.1:\(broker.port)/streamlens/test publish=regions ! fakesink"], timeout: 120)
        #expect(none.status == 0, "\(none.stderr)")
        #expect(Self.summary(of: none.stderr)?.contains(": 0 sent, 0 dropped") == true, "\(none.stderr)")
        #expect(broker.messages().count == 20)
    }
}
