import CMosquitto
import Foundation
import StreamLensCore
import Synchronization

/// Publishes messages to one MQTT topic through libmosquitto, without ever making its caller
/// wait on the network: the only Swift file that imports CMosquitto.
///
/// libmosquitto runs its own network thread (`mosquitto_loop_start`) and reconnects by itself,
/// with exponential back-off (`mosquitto_reconnect_delay_set`). `publish` is called from a
/// stage's worker: while connected it hands the message to libmosquitto (which only queues it;
/// its thread writes it), otherwise it keeps it in a bounded queue that the connect callback
/// drains in order. Messages beyond the bound drop the oldest one, counted. The bound covers
/// the messages libmosquitto holds too (handed over, not yet written or acknowledged), so a long
/// outage cannot grow memory without limit.
public final class MQTTPublisher: @unchecked Sendable {
    public struct Configuration: Sendable {
        public var location: MQTTLocation
        public var qos: Int = 0
        public var maxQueued: Int = 1000
        public var credentials: BrokerCredentials?
        /// A CA certificate file for mqtts://; empty: the system's (/etc/ssl/certs).
        public var caFile: String = ""
        public init(location: MQTTLocation) { self.location = location }
    }

    /// What happened, for the end-of-stream summary.
    public struct Report: Sendable, Equatable {
        public var sent = 0
        public var droppedQueueFull = 0
        /// QoS 0 messages libmosquitto held when the connection broke (it discards them).
        public var lostWithConnection = 0
        /// Still queued at the end (the broker away then).
        public var unsentAtEnd = 0
        /// QoS 1 messages handed over but not acknowledged within the wait at the end.
        public var notAcknowledged = 0
        public var connections = 0
        public var lastError: String?
        public var reconnects: Int { max(0, connections - 1) }
        public var dropped: Int { droppedQueueFull + lostWithConnection + unsentAtEnd + notAcknowledged }
    }

    private struct State {
        var connected = false
        /// The first connection is being made (mosquitto_connect_async called, no answer yet):
        /// the end of stream waits for it as for a connection, a short stream not outrunning it.
        var connecting = false
        /// libmosquitto's first error-level log line since it was last used: OpenSSL's reason
        /// for a TLS failure, which mosquitto_strerror only calls "A TLS error occurred".
        var libraryError: String?
        /// In the connect callback, sending what was queued: new messages queue behind it.
        var draining = false
        var pending: [Data] = []
        var pendingStart = 0
        /// Handed to libmosquitto, not yet reported published.
        var inFlight = 0
        var report = Report()
        var pendingCount: Int { pending.count - pendingStart }
        mutating func popOldest() -> Data {
            let d = pending[pendingStart]
            pendingStart += 1
            if pendingStart > 256, pendingStart * 2 > pending.count { pending.removeFirst(pendingStart); pendingStart = 0 }
            return d
        }
        mutating func takeAll() -> ArraySlice<Data> {
            defer { pending = []; pendingStart = 0 }
            return pending[pendingStart...]
        }
    }

    public let configuration: Configuration
    private let state = Mutex(State())
    private let client: Client

    /// Sets up the client and starts connecting; never waits for the broker (a broker away at
    /// start is retried like one that went away). Throws a StageError for what cannot work at
    /// all (TLS set-up, an out-of-memory client).
    public init(_ configuration: Configuration) throws {
        self.configuration = configuration
        client = try Client()
        try client.start(owner: self)
    }

    deinit { client.stop() }

    /// Queues one message; returns at once.
    public func publish(_ message: Data) {
        let handNow: Bool = state.withLock { s in
            if s.connected && !s.draining {
                guard s.inFlight < configuration.maxQueued else {
                    // libmosquitto holds a full queue's worth (a broker slow to acknowledge).
                    s.report.droppedQueueFull += 1
                    return false
                }
                s.inFlight += 1
                return true
            }
            if s.pendingCount + s.inFlight >= configuration.maxQueued {
                if s.pendingCount > 0 { _ = s.popOldest() } else { s.report.droppedQueueFull += 1; return false }
                s.report.droppedQueueFull += 1
            }
            s.pending.append(message)
            return false
        }
        if handNow { hand(message) }
    }

    /// Gives one message to libmosquitto (the caller counted it in flight). A refusal (the
    /// connection broke just now) puts it back in the queue.
    private func hand(_ message: Data) {
        let rc = client.publish(topic: configuration.location.topic, message, qos: configuration.qos)
        guard rc != MOSQ_ERR_SUCCESS.rawValue else { return }
        state.withLock { s in
            s.inFlight -= 1
            s.report.lastError = Client.describe("mosquitto_publish", rc)
            if s.pendingCount + s.inFlight >= configuration.maxQueued { s.report.droppedQueueFull += 1 } else { s.pending.append(message) }
        }
    }

    /// End of stream: waits up to `timeout` seconds, while connected (or while the first
    /// connection is being made), for what is queued and in flight, then disconnects (at most
    /// 2 s more). The report counts what never made it.
    public func finish(timeout: Double = 2) -> Report {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(timeout * 1e9)
        while DispatchTime.now().uptimeNanoseconds < deadline {
            let busy = state.withLock { s in
                (s.connected && (s.pendingCount > 0 || s.inFlight > 0 || s.draining)) || (s.connecting && s.pendingCount > 0)
            }
            guard busy else { break }
            usleep(10_000)
        }
        // Bounded too: a connection attempt stuck resolving the broker's name holds the stop.
        let stopped = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { [self] in
            // Keeps this publisher (the callbacks' user data) alive until the client has stopped.
            client.stop()
            stopped.signal()
        }
        if stopped.wait(timeout: .now() + 2) == .timedOut {
            state.withLock { $0.report.lastError = $0.report.lastError ?? "the client did not stop within 2 s" }
        }
        return state.withLock { s in
            s.report.unsentAtEnd += s.pendingCount
            if configuration.qos > 0 { s.report.notAcknowledged += s.inFlight } else { s.report.lostWithConnection += s.inFlight }
            s.pending = []; s.pendingStart = 0; s.inFlight = 0
            return s.report
        }
    }

    /// The figures so far (interval reports).
    public var report: Report { state.withLock { $0.report } }
    /// Connected now, and the messages waiting for the broker (metrics).
    public var connection: (connected: Bool, queued: Int) { state.withLock { ($0.connected, $0.pendingCount + $0.inFlight) } }

    // MARK: callbacks, on libmosquitto's thread

    fileprivate func connected(_ rc: Int32) {
        guard rc == 0 else {
            let why = refusal(rc)
            state.withLock { s in s.connecting = false; s.report.lastError = why }
            return
        }
        state.withLock { s in s.connected = true; s.connecting = false; s.draining = true; s.libraryError = nil; s.report.connections += 1 }
        // Send what queued while away, in order; what the worker adds meanwhile queues behind.
        while true {
            let batch: ArraySlice<Data>? = state.withLock { s in
                guard s.pendingCount > 0 else { s.draining = false; return nil }
                let b = s.takeAll()
                s.inFlight += b.count
                return b
            }
            guard let batch else { return }
            for message in batch { hand(message) }
        }
    }

    fileprivate func disconnected(_ rc: Int32) {
        state.withLock { s in
            s.connected = false
            s.connecting = false
            s.draining = false
            if rc == MOSQ_ERR_TLS.rawValue {
                s.report.lastError = tlsFailure(s.libraryError)
                s.libraryError = nil
            } else if rc == MOSQ_ERR_CONN_REFUSED.rawValue {
                // The broker's CONNACK said no: the connect callback has already said why
                // (libmosquitto's own words here, "The connection was refused", sound like no broker).
            } else if rc != 0 {
                s.report.lastError = "connection lost (\(Client.describe("network loop", rc)))"
            }
            // libmosquitto resends QoS 1 messages after reconnecting; QoS 0 ones it held are gone.
            if configuration.qos == 0 { s.report.lostWithConnection += s.inFlight; s.inFlight = 0 }
        }
    }

    fileprivate func published() {
        state.withLock { s in
            s.inFlight = max(0, s.inFlight - 1)
            s.report.sent += 1
        }
    }

    fileprivate func connectStarting() {
        state.withLock { $0.connecting = true }
    }

    fileprivate func connectFailed(_ call: String, _ rc: Int32) {
        state.withLock { s in
            s.connecting = false
            if rc == MOSQ_ERR_TLS.rawValue {
                s.report.lastError = tlsFailure(s.libraryError)
                s.libraryError = nil
            } else {
                s.report.lastError = Client.describe(call, rc)
            }
        }
    }

    /// An error-level line of libmosquitto's log (kept: the first since the last was used).
    /// While a TLS connection is being made it is the handshake's failure: libmosquitto's thread
    /// then ends without a disconnect callback (it takes TLS errors for fatal), so this line is
    /// the only word of it.
    fileprivate func libraryLogged(_ line: String) {
        state.withLock { s in
            if s.libraryError == nil { s.libraryError = line }
            if s.connecting && configuration.location.tls {
                s.connecting = false
                s.report.lastError = tlsFailure(s.libraryError)
            }
        }
    }

    /// A refused CONNACK in words: "the broker refused the credentials of user camera: not
    /// authorised" (never the password).
    private func refusal(_ rc: Int32) -> String {
        var why = Substring(String(cString: mosquitto_connack_string(rc))) // "Connection Refused: not authorised."
        if why.hasPrefix("Connection Refused: ") { why = why.dropFirst("Connection Refused: ".count) }
        while why.hasSuffix(".") { why = why.dropLast() }
        // 4: bad user name or password, 5: not authorised (what mosquitto answers to both).
        guard rc == 4 || rc == 5 else { return "the broker refused the connection: \(why)" }
        if let credentials = configuration.credentials {
            return "the broker refused the credentials of user \(credentials.user): \(why)"
        }
        return "the broker refused the connection: \(why) (no credentials given: set credentials= or STREAMLENS_MQTT_USER and STREAMLENS_MQTT_PASSWORD)"
    }

    /// A TLS failure in words, with OpenSSL's reason from libmosquitto's log line
    /// ("OpenSSL Error[0]: error:0A000086:SSL routines::certificate verify failed",
    /// "Error: host name verification failed."): "TLS: certificate verify failed, …".
    private func tlsFailure(_ logged: String?) -> String {
        var reason = Substring(logged ?? "")
        if let r = reason.range(of: "]: "), reason.hasPrefix("OpenSSL Error[") { reason = reason[r.upperBound...] }
        if reason.hasPrefix("error:"), let colon = reason.lastIndex(of: ":") { reason = reason[reason.index(after: colon)...] }
        if reason.hasPrefix("Error: ") { reason = reason.dropFirst("Error: ".count) }
        while reason.hasSuffix(".") { reason = reason.dropLast() }
        let text = reason.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty else { return "TLS: the handshake with the broker failed" }
        if text.contains("certificate verify failed") {
            return "TLS: \(text), the broker's certificate checked against " + (configuration.caFile.isEmpty
                ? "the system's CA certificates (/etc/ssl/certs; set ca-file= for a private CA)"
                : "ca-file \(configuration.caFile)")
        }
        if text.contains("host name verification failed") {
            return "TLS: \(text), the broker's certificate is not for \(configuration.location.host)"
        }
        return "TLS: \(text)"
    }

    /// Owns the `struct mosquitto *`; the C callbacks find the publisher through its `obj`.
    /// @unchecked Sendable: its state changes on the retries' queue only (and in `start`,
    /// before that queue has work); libmosquitto locks its own.
    private final class Client: @unchecked Sendable {
        private let handle: OpaquePointer
        private var running = false
        private static let initialised: Void = { mosquitto_lib_init(); return () }()

        init() throws {
            _ = Self.initialised
            guard let h = mosquitto_new(nil, true, nil) else { throw StageError("mosquitto_new failed (out of memory)") }
            handle = h
        }

        deinit { mosquitto_destroy(handle) }

        /// The failing call and libmosquitto's words for `rc`.
        static func describe(_ call: String, _ rc: Int32) -> String {
            "\(call): \(String(cString: mosquitto_strerror(rc)))"
        }

        private func check(_ call: String, _ rc: Int32) throws {
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw StageError(Self.describe(call, rc)) }
        }

        func start(owner: MQTTPublisher) throws {
            guard !running else { return }
            let c = owner.configuration
            // Unretained: the publisher owns this client and stops its thread before it goes.
            mosquitto_user_data_set(handle, Unmanaged.passUnretained(owner).toOpaque())
            mosquitto_connect_callback_set(handle) { _, obj, rc in
                guard let obj else { return }
                Unmanaged<MQTTPublisher>.fromOpaque(obj).takeUnretainedValue().connected(rc)
            }
            mosquitto_disconnect_callback_set(handle) { _, obj, rc in
                guard let obj else { return }
                Unmanaged<MQTTPublisher>.fromOpaque(obj).takeUnretainedValue().disconnected(rc)
            }
            mosquitto_publish_callback_set(handle) { _, obj, _ in
                guard let obj else { return }
                Unmanaged<MQTTPublisher>.fromOpaque(obj).takeUnretainedValue().published()
            }
            // Error-level lines only (MOSQ_LOG_ERR, 1<<3): OpenSSL's reason for a TLS failure.
            mosquitto_log_callback_set(handle) { _, obj, level, line in
                guard level & 8 != 0, let obj, let line else { return }
                Unmanaged<MQTTPublisher>.fromOpaque(obj).takeUnretainedValue().libraryLogged(String(cString: line))
            }
            if let credentials = c.credentials {
                try check("mosquitto_username_pw_set", mosquitto_username_pw_set(handle, credentials.user, credentials.password))
            }
            if c.location.tls {
                let rc = c.caFile.isEmpty ? mosquitto_tls_set(handle, nil, "/etc/ssl/certs", nil, nil, nil)
                                          : mosquitto_tls_set(handle, c.caFile, nil, nil, nil, nil)
                try check("mosquitto_tls_set", rc)
            }
            // 1 s after a loss, doubling up to 10 s between attempts.
            try check("mosquitto_reconnect_delay_set", mosquitto_reconnect_delay_set(handle, 1, 10, true))
            host = c.location.host; port = Int32(c.location.port)
            self.owner = owner
            running = true
            // Connecting from now, not from when the queue runs the attempt: a stream that ends
            // before then still waits for it (and for its outcome's words in the summary).
            owner.connectStarting()
            // Off the caller's thread: name resolution and the first attempt never hold it.
            retries.async { self.connect(delay: 1) }
        }

        private var host = "", port: Int32 = 0
        private weak var owner: MQTTPublisher?
        /// The first connection's retries (libmosquitto's own loop only retries a connection it
        /// once made: after a refused mosquitto_connect_async its thread gives up, seen with
        /// 2.0.11). Serial, so a retry never runs while `stop` does.
        private let retries = DispatchQueue(label: "streamlens.mqtt.connect")

        /// mosquitto_connect_async, then libmosquitto's thread; when the broker is away, again
        /// after `delay` seconds (doubling, at most 10), off the caller's thread.
        private func connect(delay: Double) {
            owner?.connectStarting()
            let rc = mosquitto_connect_async(handle, host, port, 30)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                owner?.connectFailed("mosquitto_connect_async", rc)
                retries.asyncAfter(deadline: .now() + delay) { [weak self] in
                    guard let self, self.running, !self.loopStarted else { return }
                    self.connect(delay: min(delay * 2, 10))
                }
                return
            }
            let loop = mosquitto_loop_start(handle)
            if loop != MOSQ_ERR_SUCCESS.rawValue { owner?.connectFailed("mosquitto_loop_start", loop); return }
            loopStarted = true
        }
        private var loopStarted = false

        func publish(topic: String, _ message: Data, qos: Int) -> Int32 {
            message.withUnsafeBytes { bytes in
                mosquitto_publish(handle, nil, topic, Int32(bytes.count), bytes.baseAddress, Int32(qos), false)
            }
        }

        /// Disconnects and joins the network thread (once).
        func stop() {
            // On the retries' queue: no connection attempt runs meanwhile or starts after.
            retries.sync {
                guard running else { return }
                running = false
                guard loopStarted else { return }
                mosquitto_disconnect(handle)
                mosquitto_loop_stop(handle, false)
            }
        }
    }
}
