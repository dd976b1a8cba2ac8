import Foundation
import StreamLensCore

/// lensmetadata's record sinks, by the scheme of `location`. A new sink is one file (a class
/// conforming to `RecordSink`, its properties with it) plus its line here: Swift has no static
/// initialisers, so this list is where sinks are named once.
enum RecordSinkRegistry {
    static let sinks: [any RecordSink.Type] = [
        MetadataWriter.self,
        MQTTRecordSink.self,
        HTTPRecordSink.self,
        KafkaRecordSink.self,
        NATSRecordSink.self,
    ]

    /// Every sink's own properties, in the order of the list, each name once (several sinks
    /// read `max-queued`).
    static var properties: [PropertySpec] {
        var seen = Set<String>()
        return sinks.flatMap { $0.properties }.filter { seen.insert($0.name).inserted }
    }

    /// The sinks' rows for a stage's settings: each keeps its value by name in `path`, where
    /// `open` finds them for the sink (which reads them as its own typed settings).
    static func rows<S: StageSettings>(_ path: WritableKeyPath<S, [String: PropertyValue]> & Sendable) -> [Property<S>] {
        properties.map { Property.passthrough($0, path) }
    }

    /// Every sink's `usage`, for the `location` property's help.
    static var usage: String { sinks.map { $0.usage }.joined(separator: "; ") }

    /// The sink for `location`, opened. A location of the form `scheme://…` goes by its scheme
    /// unless a file of that very name exists, so that amqp://… is refused by name instead of
    /// becoming a file of that name; anything else is a path.
    static func open(_ location: String, values: [String: PropertyValue]) throws -> any RecordSink {
        var scheme = "file"
        if let separator = location.range(of: "://"), !FileManager.default.fileExists(atPath: location) {
            scheme = location[..<separator.lowerBound].lowercased()
        }
        guard let sink = sinks.first(where: { $0.schemes.contains(scheme) }) else {
            let known = sinks.flatMap { $0.schemes }.map { "\($0)://" }.joined(separator: ", ")
            throw StageError("property location=\(location): unknown scheme \(scheme) (\(known), or a file path)")
        }
        return try sink.open(location: location, values: PropertyValues(table: properties, values: values))
    }
}

extension Property where Settings: StageSettings {
    /// `max-queued`, as every sink that sends over the network reads it.
    static func maxQueued(_ path: WritableKeyPath<Settings, Int> & Sendable) -> Property {
        .int("max-queued", path, 1...1_000_000,
             help: "network locations: records kept while the destination is away or slow (and not yet sent); beyond it records are dropped, counted")
    }

    /// `credentials`: a file holding user:password, for the sinks that log in to a broker.
    static func credentials(_ path: WritableKeyPath<Settings, String> & Sendable) -> Property {
        .string("credentials", path, help: "mqtt, kafka, nats: file holding user:password (empty: STREAMLENS_MQTT_USER and STREAMLENS_MQTT_PASSWORD if set, STREAMLENS_KAFKA_… or STREAMLENS_NATS_… for those buses, else none)")
    }

    /// `ca-file`: the CA a broker's certificate must chain to.
    static func caFile(_ path: WritableKeyPath<Settings, String> & Sendable) -> Property {
        .string("ca-file", path, help: "the CA certificate (PEM) the broker's certificate must chain to: mqtts:// (empty: the system's); kafka:// and nats:// use TLS when it is set")
    }
}
