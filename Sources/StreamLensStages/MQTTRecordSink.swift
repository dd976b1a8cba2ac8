import Foundation
import StreamLensCore
import StreamLensMQTT

/// lensmetadata's sink for `mqtt://HOST:PORT/TOPIC` and `mqtts://…`: each record one message on
/// TOPIC, without the newline (docs/metadata.md, "MQTT"). libmosquitto reconnects by itself and
/// `MQTTPublisher` keeps what waits for the broker within `max-queued`.
final class MQTTRecordSink: RecordSink {
    static let schemes = ["mqtt", "mqtts"]
    static let usage = "mqtt://HOST:PORT/TOPIC or mqtts://… to publish each record as an MQTT message"
    struct Settings: StageSettings {
        var maxQueued = 1000
        var qos = 0
        var credentials = ""
        var caFile = ""
        static let properties: [Property<Settings>] = [
            .maxQueued(\.maxQueued),
            .int("qos", \.qos, 0...1, help: "MQTT quality of service: 0 at most once, 1 at least once (acknowledged, resent after a reconnect)"),
            .credentials(\.credentials),
            .caFile(\.caFile),
        ]
    }

    private let publisher: MQTTPublisher
    /// The publisher's calls go through a queue of their own, as every sink's I/O does:
    /// libmosquitto is never called on the frame's thread.
    private let handOver = OutputQueue(name: "streamlens.mqtt")
    private var finalReport: MQTTPublisher.Report?

    init(location: String, settings: Settings) throws {
        var c = MQTTPublisher.Configuration(location: try MQTTLocation(parsing: location))
        c.qos = settings.qos
        c.maxQueued = settings.maxQueued
        c.credentials = try BrokerCredentials.resolve(file: settings.credentials, environment: ProcessInfo.processInfo.environment, bus: "MQTT")
        c.caFile = settings.caFile
        if !c.caFile.isEmpty {
            guard c.location.tls else { throw StageError("property ca-file is for mqtts:// locations (TLS); \(location) is plain mqtt://") }
            try InputFile.check(c.caFile, what: "ca-file")
        }
        publisher = try MQTTPublisher(c)
    }

    func take(_ record: Data) -> [StageNotice] {
        // Without the newline: one message is one record.
        let message = record.last == 0x0A ? record.dropLast() : record
        guard handOver.submit({ [publisher] _ in publisher.publish(message) }) == .dropped(first: true) else { return [] }
        return [StageNotice(.warning, "MQTT messages to \(publisher.configuration.location.description) wait too long to be handed over: messages are dropped (the summary counts them), the video goes on")]
    }

    func finish(quiet: Double, atMost: Double) -> [StageNotice] {
        guard finalReport == nil else { return [] }
        handOver.finish(quiet: quiet, atMost: atMost)
        finalReport = publisher.finish(timeout: 2)
        return []
    }

    var summary: String? {
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

    /// Messages sent, dropped by reason, reconnects, connected, queued (the summary's figures,
    /// as they are now).
    var metrics: [Metric] {
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
