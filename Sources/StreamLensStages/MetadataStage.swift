import Foundation
import StreamLensCore
import StreamLensMQTT

/// `lensmetadata`: writes the regions of interest of every frame as JSON Lines, one line per
/// frame (schema: docs/metadata.md), after any producer of regions. Frames go on unchanged.
///
///     streamlens run 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! lensdetect ! lensmetadata location=faces.jsonl ! fakesink'
///
/// With `location=mqtt://HOST:PORT/TOPIC` (or mqtts://) each frame's line is one MQTT message
/// instead (docs/metadata.md, "MQTT"); publishing never holds a frame back, whatever the broker
/// does:
///
///     streamlens run 'videotestsrc is-live=true ! videoconvert ! video/x-raw,format=BGRx ! lensdetect ! lensmetadata location=mqtt://127.0.0.1:1883/streamlens/camera1 ! fakesink'
public final class MetadataStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lensmetadata",
        summary: "Write each frame's regions of interest as JSON Lines, or publish them over MQTT (docs/metadata.md)",
        example: "videotestsrc num-buffers=30 ! videoconvert ! video/x-raw,format=BGRx ! lensdetect ! lensmetadata location=- ! fakesink",
        properties: [
            PropertySpec("location", .string, default: .string("-"),
                         help: "the JSON Lines file (- for standard output; created at the first frame), or mqtt://HOST:PORT/TOPIC / mqtts://… to publish each line as a message"),
            PropertySpec("publish", .choice(["all", "regions", "events"]), default: .string("all"),
                         help: "MQTT: which frames make a message: all, those with regions, those with events"),
            PropertySpec("qos", .int(0...1), default: .int(0),
                         help: "MQTT quality of service: 0 at most once, 1 at least once (acknowledged, resent after a reconnect)"),
            PropertySpec("max-queued", .int(1...1_000_000), default: .int(1000),
                         help: "MQTT: messages kept while the broker is away (and not yet sent); beyond it the oldest is dropped, counted"),
            PropertySpec("credentials", .string, default: .string(""),
                         help: "MQTT: file holding user:password (empty: STREAMLENS_MQTT_USER and STREAMLENS_MQTT_PASSWORD if set, else none)"),
            PropertySpec("ca-file", .string, default: .string(""),
                         help: "mqtts://: the CA certificate (PEM) the broker's certificate must chain to (empty: the system's)"),
        ])

    private enum Output {
        case file(MetadataWriter)
        /// The publisher's calls go through `handOver`, as every writer's I/O goes through a
        /// queue of its own: libmosquitto is never called on the frame's thread.
        case broker(MQTTPublisher, filter: String, handOver: OutputQueue)
    }
    private let output: Output
    private let encoder = MetadataWriter.makeEncoder()
    private var notices: [StageNotice] = []
    private var finalReport: MQTTPublisher.Report?

    public init(settings: StageSettings) throws {
        let location = settings.string("location")
        guard !location.isEmpty else { throw StageError("property location is empty: name a file, or - for standard output") }
        // Any other scheme:// that is not an existing file goes to the URL parser too, so that
        // amqp://… or mqtt:/… is refused by name instead of becoming a file of that name.
        if MQTTLocation.isBrokerURL(location) || (location.contains("://") && !FileManager.default.fileExists(atPath: location)) {
            var c = MQTTPublisher.Configuration(location: try MQTTLocation(parsing: location))
            c.qos = settings.int("qos")
            c.maxQueued = settings.int("max-queued")
            c.credentials = try MQTTCredentials.resolve(file: settings.string("credentials"), environment: ProcessInfo.processInfo.environment)
            c.caFile = settings.string("ca-file")
            if !c.caFile.isEmpty {
                guard c.location.tls else { throw StageError("property ca-file is for mqtts:// locations (TLS); \(location) is plain mqtt://") }
                try InputFile.check(c.caFile, what: "ca-file")
            }
            output = .broker(try MQTTPublisher(c), filter: settings.string("publish"), handOver: OutputQueue(name: "streamlens.mqtt"))
        } else {
            output = .file(try MetadataWriter(location: location))
        }
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        let regions = frame.pixels.regionsOfInterest()
        switch output {
        case .file(let writer):
            notices += writer.write(regions, frame: frame)
        case .broker(let publisher, let filter, let handOver):
            if filter == "regions" && regions.isEmpty { return .forward }
            if filter == "events" && frame.pixels.events().isEmpty { return .forward }
            guard let data = MetadataWriter.record(regions, frame: frame, encoder: encoder) else { return .forward }
            // Without the newline: one message is one record.
            let message = data.dropLast()
            if handOver.submit({ _ in publisher.publish(message) }) == .dropped(first: true) {
                notices.append(StageNotice(.warning, "MQTT messages to \(publisher.configuration.location.description) wait too long to be handed over: messages are dropped (the summary counts them), the video goes on"))
            }
        }
        return .forward
    }

    public func streamEnded() {
        switch output {
        case .file(let writer): notices += writer.finish()
        case .broker(let publisher, _, let handOver):
            guard finalReport == nil else { return }
            handOver.finish()
            finalReport = publisher.finish(timeout: 2)
        }
    }

    public var summary: String? {
        let publisher: MQTTPublisher, handOver: OutputQueue
        switch output {
        case .file(let writer): return writer.summary
        case .broker(let p, _, let h): (publisher, handOver) = (p, h)
        }
        let r = finalReport ?? publisher.report
        var text = "\(publisher.configuration.location.description): \(r.sent) sent"
        if r.connections == 0 {
            text += ", \(r.dropped) dropped: never connected to the broker"
            if let why = r.lastError { text += " (\(why))" }
        } else {
            var why: [String] = []
            if r.droppedQueueFull > 0 { why.append("\(r.droppedQueueFull) queue full while the broker was away") }
            if r.lostWithConnection > 0 { why.append("\(r.lostWithConnection) lost with the connection (QoS 0)") }
            if r.unsentAtEnd > 0 { why.append("\(r.unsentAtEnd) still queued at the end, broker away") }
            if r.notAcknowledged > 0 { why.append("\(r.notAcknowledged) QoS 1 not acknowledged within 2 s") }
            let notHandedOver = handOver.counts.dropped + handOver.counts.leftAtEnd
            if notHandedOver > 0 { why.append("\(notHandedOver) not handed over in time") }
            text += ", \(r.dropped + notHandedOver) dropped" + (why.isEmpty ? "" : " (\(why.joined(separator: ", ")))")
            text += ", \(r.reconnects) reconnect\(r.reconnects == 1 ? "" : "s")"
        }
        return text
    }

    public func takeNotices() -> [StageNotice] {
        defer { notices = [] }
        return notices
    }

    /// MQTT: messages sent, dropped by reason, reconnects, connected, queued (the summary's
    /// figures, as they are now).
    public var metrics: [Metric] {
        guard case .broker(let publisher, _, _) = output else { return [] }
        let r = finalReport ?? publisher.report
        let now = publisher.connection
        let dropped = "streamlens_mqtt_messages_dropped_total", help = "MQTT messages not delivered: queue_full (broker away, max-queued reached), connection_lost (QoS 0 in flight), unsent_at_end, not_acknowledged (QoS 1)"
        return [
            .counter("streamlens_mqtt_messages_sent_total", "MQTT messages the broker took (QoS 1: acknowledged)", r.sent),
            .counter(dropped, help, labels: [("reason", "queue_full")], r.droppedQueueFull),
            .counter(dropped, help, labels: [("reason", "connection_lost")], r.lostWithConnection),
            .counter(dropped, help, labels: [("reason", "unsent_at_end")], r.unsentAtEnd),
            .counter(dropped, help, labels: [("reason", "not_acknowledged")], r.notAcknowledged),
            .counter("streamlens_mqtt_reconnects_total", "Connections to the broker after the first", r.reconnects),
            .gauge("streamlens_mqtt_connected", "1 while connected to the broker", now.connected ? 1 : 0),
            .gauge("streamlens_mqtt_messages_queued", "MQTT messages waiting for the broker or its acknowledgement", Double(now.queued)),
        ]
    }
}
