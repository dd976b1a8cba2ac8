import Foundation
import StreamLensBuses
import StreamLensCore

/// lensmetadata's sinks for the buses fleets run: `kafka://HOST:PORT[,HOST:PORT…]/TOPIC` and
/// `nats://HOST:PORT/SUBJECT` (JetStream). Both are at least once through an outage: each record
/// numbered per source (`seq`), kept until the bus acknowledges it — in memory up to max-queued,
/// then in `spool=DIR` up to spool-max-mb, also across a restart — and handed over again, in
/// order, when the bus is back (`BusSender`, docs/outputs.md "Kafka" and "NATS JetStream").
protocol BusRecordSink: RecordSink {
    var sender: BusSender { get }
}

extension BusRecordSink {
    func take(_ record: Data) -> [StageNotice] { sender.take(record) }
    func finish(quiet: Double, atMost: Double) -> [StageNotice] { sender.finish(quiet: quiet, atMost: atMost) }
    var summary: String? { sender.summary }
    var metrics: [Metric] { sender.metrics }
}

/// What both buses read: the bounds, the spool, the source's name, credentials and TLS.
struct BusSinkSettings: StageSettings {
    var maxQueued = 1000
    var spool = ""
    var spoolMaxMB = 256
    var source = ""
    var credentials = ""
    var caFile = ""

    static let properties: [Property<BusSinkSettings>] = [
            .maxQueued(\.maxQueued),
            .string("spool", \.spool, help: "kafka://, nats://: a folder where records wait on disk beyond max-queued until the bus acknowledges them, kept across restarts (one per lensmetadata: spool=…/${NAME} in serve; empty: memory only)"),
            .int("spool-max-mb", \.spoolMaxMB, 1...1_000_000, help: "kafka://, nats://: the spool's bound; beyond it the oldest records are dropped, counted"),
            .string("source", \.source, help: "kafka://, nats://: the camera's name in each record (`source`), the Kafka key and the NATS message id (empty: the topic or subject; set source=${NAME} when cameras share a topic)"),
            .credentials(\.credentials),
            .caFile(\.caFile),
    ]

    /// The spool and the sender for `location` (the bus is started by the caller).
    func sender(location: String, kind: String, defaultSource: String) throws -> BusSender {
        let directory = spool.isEmpty ? nil : URL(fileURLWithPath: spool)
        let records = try RecordSpool(directory: directory, maxQueued: maxQueued, spoolBytes: spoolMaxMB << 20)
        return BusSender(spool: records, source: source.isEmpty ? defaultSource : source, location: location, kind: kind)
    }

    func resolvedCredentials(bus: String) throws -> BrokerCredentials? {
        try BrokerCredentials.resolve(file: credentials, environment: ProcessInfo.processInfo.environment, bus: bus)
    }

    func checkedCAFile() throws -> String {
        if !caFile.isEmpty { try InputFile.check(caFile, what: "ca-file") }
        return caFile
    }

    /// `scheme://AUTHORITY/NAME`: the authority (one or more HOST:PORT, each checked) and the name.
    static func parse(_ location: String, defaultPort: Int, name: String) throws -> (servers: [URLAuthority], name: String) {
        let bad = { (why: String) in StageError("property location=\(location): \(why)") }
        guard let separator = location.range(of: "://") else { throw bad("expected SCHEME://HOST:PORT/\(name.uppercased())") }
        let rest = location[separator.upperBound...]
        guard let slash = rest.firstIndex(of: "/"), !rest[rest.index(after: slash)...].isEmpty else {
            throw bad("no \(name) after the host (…://HOST:PORT/\(name.uppercased()))")
        }
        let what = String(rest[rest.index(after: slash)...])
        guard !what.contains(where: { $0.isWhitespace || $0 == "/" }) else { throw bad("the \(name) \(what) has a space or a /") }
        let servers = try rest[..<slash].split(separator: ",", omittingEmptySubsequences: false).map {
            try URLAuthority(parsing: $0, defaultPort: defaultPort, noHost: "no host (…://HOST:PORT/\(name.uppercased()))",
                             credentials: "no user or password in the URL: use credentials=FILE", bad: bad)
        }
        return (servers, what)
    }
}

/// `nats://HOST:PORT/SUBJECT`: JetStream publishes, each acknowledged by the stream that stores
/// it, `Nats-Msg-Id` source:origin:seq so the server drops repeats.
final class NATSRecordSink: BusRecordSink {
    static let schemes = ["nats"]
    static let usage = "nats://HOST:PORT/SUBJECT to publish each record to NATS JetStream (acknowledged, spooled through an outage)"
    struct Settings: StageSettings {
        var bus = BusSinkSettings()
        static let properties: [Property<Settings>] = Property.group(\.bus)
    }

    let sender: BusSender
    deinit { _ = sender.finish(quiet: 0, atMost: 0) }

    init(location: String, settings: Settings) throws {
        let (servers, subject) = try BusSinkSettings.parse(location, defaultPort: 4222, name: "subject")
        guard servers.count == 1 else { throw StageError("property location=\(location): one NATS server (HOST:PORT)") }
        guard !subject.split(separator: ".", omittingEmptySubsequences: false).contains(where: { $0.isEmpty || $0 == "*" || $0 == ">" }) else {
            throw StageError("property location=\(location): \(subject) is not a subject to publish to (no wildcards * or >, no empty tokens)")
        }
        let caFile = try settings.bus.checkedCAFile()
        var c = NATSBus.Configuration(server: "\(caFile.isEmpty ? "nats" : "tls")://\(servers[0].description)", subject: subject)
        c.credentials = try settings.bus.resolvedCredentials(bus: "NATS")
        c.caFile = caFile
        sender = try settings.bus.sender(location: location, kind: "nats", defaultSource: subject)
        sender.start(try NATSBus(c, reports: sender))
    }
}

/// `kafka://HOST:PORT[,HOST:PORT…]/TOPIC`: an idempotent producer, acks=all, keyed by source.
final class KafkaRecordSink: BusRecordSink {
    static let schemes = ["kafka"]
    static let usage = "kafka://HOST:PORT[,HOST:PORT…]/TOPIC to produce each record to Kafka (idempotent, acks=all, keyed by source, spooled through an outage)"
    struct Settings: StageSettings {
        var bus = BusSinkSettings()
        var compression = Compression.lz4
        var saslMechanism = SASLMechanism.plain
        enum Compression: String, Sendable, CaseIterable { case none, gzip, snappy, lz4, zstd }
        enum SASLMechanism: String, Sendable, CaseIterable {
            case plain = "PLAIN", scramSHA256 = "SCRAM-SHA-256", scramSHA512 = "SCRAM-SHA-512"
        }
        static let properties: [Property<Settings>] = Property.group(\.bus) + [
            .choice("compression", \.compression, help: "kafka://: the messages' compression"),
            .choice("sasl-mechanism", \.saslMechanism, help: "kafka:// with credentials: SASL's mechanism (TLS with ca-file)"),
        ]
    }

    let sender: BusSender
    deinit { _ = sender.finish(quiet: 0, atMost: 0) }

    init(location: String, settings: Settings) throws {
        let (servers, topic) = try BusSinkSettings.parse(location, defaultPort: 9092, name: "topic")
        sender = try settings.bus.sender(location: location, kind: "kafka", defaultSource: topic)
        var c = KafkaBus.Configuration(brokers: servers.map(\.description).joined(separator: ","), topic: topic, key: sender.source)
        c.compression = settings.compression.rawValue
        c.saslMechanism = settings.saslMechanism.rawValue
        c.credentials = try settings.bus.resolvedCredentials(bus: "KAFKA")
        c.caFile = try settings.bus.checkedCAFile()
        sender.start(try KafkaBus(c, reports: sender))
    }
}
