import CRdKafka
import Foundation
import StreamLensCore

/// Kafka as a `RecordBus`: the only Swift that calls librdkafka. An idempotent producer
/// (acks=all, retries without repeats or reordering), each record one message keyed by its
/// source (one camera's records stay in order on one partition), its sequence number the
/// message's opaque, which comes back in the delivery report. librdkafka connects, retries and
/// reconnects by itself and never gives a message up (message.timeout.ms=0); the sender keeps
/// what librdkafka holds within max-queued.
public final class KafkaBus: RecordBus, @unchecked Sendable {
    public struct Configuration: Sendable {
        /// HOST:PORT[,HOST:PORT…]
        public var brokers: String
        public var topic: String
        /// The message key (the source's name).
        public var key: String
        /// none, gzip, snappy, lz4, zstd
        public var compression = "lz4"
        public var credentials: BrokerCredentials?
        /// SASL's mechanism with credentials: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
        public var saslMechanism = "PLAIN"
        /// TLS with this CA (PEM), when set.
        public var caFile = ""
        public init(brokers: String, topic: String, key: String) { (self.brokers, self.topic, self.key) = (brokers, topic, key) }

        /// librdkafka's configuration for it.
        var properties: [(String, String)] {
            var p = [("bootstrap.servers", brokers), ("client.id", "streamlens"), ("enable.idempotence", "true"),
                     ("acks", "all"), ("compression.type", compression), ("message.timeout.ms", "0"),
                     ("reconnect.backoff.max.ms", "2000")]
            let tls = !caFile.isEmpty
            if let c = credentials {
                p += [("security.protocol", tls ? "sasl_ssl" : "sasl_plaintext"), ("sasl.mechanisms", saslMechanism),
                      ("sasl.username", c.user), ("sasl.password", c.password)]
            } else if tls {
                p.append(("security.protocol", "ssl"))
            }
            if tls { p.append(("ssl.ca.location", caFile)) }
            return p
        }
    }

    public let configuration: Configuration
    // librdkafka's handles; @unchecked Sendable: librdkafka's calls are thread-safe, and the
    // handles are destroyed once, in close, after the sender's thread has stopped.
    private var producer: OpaquePointer?
    private var topic: OpaquePointer?
    private let reports: any BusReports
    private var closed = false

    public init(_ configuration: Configuration, reports: any BusReports) throws {
        self.configuration = configuration
        self.reports = reports
        let conf = rd_kafka_conf_new()
        var error = [CChar](repeating: 0, count: 512)
        for (name, value) in configuration.properties where rd_kafka_conf_set(conf, name, value, &error, error.count) != RD_KAFKA_CONF_OK {
            rd_kafka_conf_destroy(conf)
            let shown = name.hasPrefix("sasl.password") ? "…" : value
            throw StageError("kafka: \(name)=\(shown): \(KafkaBus.text(error))")
        }
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(self).toOpaque())
        rd_kafka_conf_set_dr_msg_cb(conf) { _, message, opaque in
            guard let message, let opaque else { return }
            let bus = Unmanaged<KafkaBus>.fromOpaque(opaque).takeUnretainedValue()
            let seq = UInt64(UInt(bitPattern: message.pointee._private))
            let err = message.pointee.err
            if err == RD_KAFKA_RESP_ERR_NO_ERROR {
                bus.reports.delivered(seq)
            } else if err != RD_KAFKA_RESP_ERR__PURGE_QUEUE && err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT {
                bus.reports.failed(seq, String(cString: rd_kafka_err2str(err)))
            }
        }
        // librdkafka's log goes nowhere: what matters comes through the error callback below and
        // is said once by the sender (its default log would print every retry on stderr).
        rd_kafka_conf_set_log_cb(conf) { _, _, _, _ in }
        rd_kafka_conf_set_error_cb(conf) { _, code, reason, opaque in
            guard let opaque else { return }
            let bus = Unmanaged<KafkaBus>.fromOpaque(opaque).takeUnretainedValue()
            let why = reason.map { String(cString: $0) } ?? String(cString: rd_kafka_err2str(rd_kafka_resp_err_t(code)))
            let err = rd_kafka_resp_err_t(code)
            if err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN {
                // "1/1 brokers are down" says less than the error before it (refused, a TLS
                // handshake, SASL): that one stays the reason.
                bus.reports.connection(up: false, nil)
            } else if err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__RESOLVE || err == RD_KAFKA_RESP_ERR__SSL
                        || err == RD_KAFKA_RESP_ERR__AUTHENTICATION {
                bus.reports.connection(up: false, why)
            } else if err == RD_KAFKA_RESP_ERR__FATAL {
                bus.reports.say(why)
            }
        }
        // rd_kafka_new takes the configuration over when it succeeds.
        guard let producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, &error, error.count) else {
            rd_kafka_conf_destroy(conf)
            throw StageError("kafka: cannot make a producer: \(KafkaBus.text(error))")
        }
        self.producer = producer
        topic = rd_kafka_topic_new(producer, configuration.topic, nil)
        guard topic != nil else {
            rd_kafka_destroy(producer)
            throw StageError("kafka: topic \(configuration.topic): \(String(cString: rd_kafka_err2str(rd_kafka_last_error())))")
        }
    }

    /// The message librdkafka wrote into an error buffer.
    static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// librdkafka queues and retries while brokers are away: it can always take a record, up to
    /// its own queue's bound (then `send` says no).
    public var ready: Bool { !closed }

    public func send(_ record: RecordSpool.Record, id: String) -> Bool {
        let key = configuration.key
        let status = record.body.withUnsafeBytes { bytes in
            key.withCString { k in
                rd_kafka_produce(topic, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY,
                                 UnsafeMutableRawPointer(mutating: bytes.baseAddress), bytes.count,
                                 k, strlen(k), UnsafeMutableRawPointer(bitPattern: UInt(record.seq)))
            }
        }
        return status == 0
    }

    /// Delivery reports and errors come through poll.
    public func serve() { if !closed { rd_kafka_poll(producer, 0) } }

    public func close() {
        guard !closed else { return }
        closed = true
        // What librdkafka still holds is abandoned (it stays in the spool): the purge makes
        // destroy return at once instead of waiting for brokers that are away.
        _ = rd_kafka_purge(producer, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
        rd_kafka_poll(producer, 0)
        rd_kafka_topic_destroy(topic)
        rd_kafka_destroy(producer)
    }
}

/// librdkafka's own mock cluster (rdkafka_mock.h): brokers in this process on loopback, which
/// any Kafka client can reach at `bootstraps`, taken down and up at will. For tests.
public final class KafkaMockCluster: @unchecked Sendable {
    private let handle: OpaquePointer
    private let cluster: OpaquePointer
    public let bootstraps: String

    public init(brokers: Int) throws {
        let conf = rd_kafka_conf_new()
        var error = [CChar](repeating: 0, count: 512)
        guard let handle = rd_kafka_new(RD_KAFKA_PRODUCER, conf, &error, error.count) else {
            throw StageError("kafka mock: \(KafkaBus.text(error))")
        }
        guard let cluster = rd_kafka_mock_cluster_new(handle, Int32(brokers)) else {
            rd_kafka_destroy(handle)
            throw StageError("kafka mock: cannot make a cluster")
        }
        (self.handle, self.cluster) = (handle, cluster)
        bootstraps = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
    }

    /// Broker `id` (1…brokers) stops answering (its connections are closed) or comes back.
    public func broker(_ id: Int32, up: Bool) {
        _ = up ? rd_kafka_mock_broker_set_up(cluster, id) : rd_kafka_mock_broker_set_down(cluster, id)
    }

    /// Makes `topic` with `partitions` (else the first produce makes it with the default).
    public func createTopic(_ topic: String, partitions: Int32) {
        _ = rd_kafka_mock_topic_create(cluster, topic, partitions, 1)
    }

    deinit {
        rd_kafka_mock_cluster_destroy(cluster)
        rd_kafka_destroy(handle)
    }
}
