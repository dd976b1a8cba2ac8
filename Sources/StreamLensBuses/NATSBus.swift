import CNats
import Foundation
import StreamLensCore

/// NATS JetStream as a `RecordBus`: the only Swift that calls libnats. Each record is one
/// message on the subject, published asynchronously with `Nats-Msg-Id` (JetStream drops a
/// repeat of an id within its duplicate window) and acknowledged by the stream that stores it.
/// libnats reconnects forever once connected; while it is away nothing is
/// handed over (the records wait in the sender's spool, not in libnats' reconnect buffer).
public final class NATSBus: RecordBus, @unchecked Sendable {
    public struct Configuration: Sendable {
        /// nats://HOST:PORT
        public var server: String
        public var subject: String
        public var credentials: BrokerCredentials?
        /// TLS with this CA (PEM), when set.
        public var caFile = ""
        /// How long an acknowledgement may take before the record is sent again (ms).
        public var acknowledgementWait: Int64 = 3000
        public init(server: String, subject: String) { (self.server, self.subject) = (server, subject) }
    }

    public let configuration: Configuration
    // libnats' objects (opaque C structs); @unchecked Sendable: libnats' calls are thread-safe,
    // and they are destroyed once, in close, after the sender's thread has stopped.
    private var options: OpaquePointer?
    private var connection: OpaquePointer?
    private var jetStream: OpaquePointer?
    private let reports: any BusReports
    private var checkedStream = false
    private var nextAttempt = ContinuousClock.now
    private var closed = false
    /// Signalled by libnats' closed callback, the last it makes for a connection: `close` waits
    /// for it, so no callback reaches this object once it is gone.
    private let closedCallback = DispatchSemaphore(value: 0)

    /// Checks what cannot work whatever the server does (a CA file libnats refuses, the
    /// server's URL); the connection is made by `serve`, on the sender's thread.
    public init(_ configuration: Configuration, reports: any BusReports) throws {
        self.configuration = configuration
        self.reports = reports
        try Self.check(natsOptions_Create(&options), "options")
        let me = Unmanaged.passUnretained(self).toOpaque()
        try Self.check(natsOptions_SetURL(options, configuration.server), "server \(configuration.server)")
        _ = natsOptions_SetName(options, "streamlens")
        _ = natsOptions_SetTimeout(options, 2000)
        _ = natsOptions_SetMaxReconnect(options, -1)
        _ = natsOptions_SetReconnectWait(options, 500)
        // A server that stops answering is found out in about 4 s (two pings unanswered).
        _ = natsOptions_SetPingInterval(options, 2000)
        _ = natsOptions_SetMaxPingsOut(options, 2)
        if let c = configuration.credentials { try Self.check(natsOptions_SetUserInfo(options, c.user, c.password), "credentials") }
        if !configuration.caFile.isEmpty {
            try Self.check(natsOptions_SetSecure(options, true), "TLS")
            try Self.check(natsOptions_LoadCATrustedCertificates(options, configuration.caFile), "ca-file \(configuration.caFile)")
        }
        _ = natsOptions_SetDisconnectedCB(options, { _, closure in
            NATSBus.bus(closure).reports.connection(up: false, "disconnected")
        }, me)
        _ = natsOptions_SetReconnectedCB(options, { _, closure in
            NATSBus.bus(closure).reports.connection(up: true, nil)
        }, me)
        _ = natsOptions_SetClosedCB(options, { _, closure in
            NATSBus.bus(closure).closedCallback.signal()
        }, me)
    }

    /// The first connection, tried once a second until it is made (each try at most 2 s), so
    /// that why it fails — refused, a TLS check, the server's authorization — can be said;
    /// after it libnats reconnects by itself.
    private func connect() {
        guard ContinuousClock.now >= nextAttempt else { return }
        nextAttempt = .now + .seconds(1)
        var made: OpaquePointer?
        let status = natsConnection_Connect(&made, options)
        guard status == NATS_OK, let made else {
            // libnats prefixes its file and line: "(conn.c:1905): Authorization Violation".
            var detail = nats_GetLastError(nil).map { String(cString: $0) } ?? ""
            if detail.hasPrefix("("), let end = detail.range(of: "): ") { detail = String(detail[end.upperBound...]) }
            reports.connection(up: false, detail.isEmpty ? Self.text(status) : detail)
            return
        }
        var jsOptions = jsOptions()
        jsOptions_Init(&jsOptions)
        jsOptions.PublishAsync.MaxPending = 4096
        jsOptions.PublishAsync.AckHandler = { _, message, acknowledgement, error, closure in
            let bus = NATSBus.bus(closure)
            if let seq = NATSBus.seq(of: message) {
                if acknowledgement != nil {
                    bus.reports.delivered(seq)
                } else {
                    bus.reports.failed(seq, error.map { NATSBus.describe($0.pointee) } ?? "no acknowledgement")
                }
            }
            natsMsg_Destroy(message)
        }
        jsOptions.PublishAsync.AckHandlerClosure = Unmanaged.passUnretained(self).toOpaque()
        let context = natsConnection_JetStream(&jetStream, made, &jsOptions)
        guard context == NATS_OK else {
            natsConnection_Destroy(made)
            reports.say("no JetStream context (\(Self.text(context)))")
            return
        }
        connection = made
        reports.connection(up: true, nil)
    }

    private static func bus(_ closure: UnsafeMutableRawPointer?) -> NATSBus {
        Unmanaged<NATSBus>.fromOpaque(closure!).takeUnretainedValue()
    }

    private static func check(_ status: natsStatus, _ what: String) throws {
        guard status != NATS_OK else { return }
        var detail = ""
        if let last = nats_GetLastError(nil) { detail = String(cString: last) }
        throw StageError("nats: \(what): \(detail.isEmpty ? text(status) : detail)")
    }

    private static func text(_ status: natsStatus) -> String { String(cString: natsStatus_GetText(status)) }

    private static func describe(_ e: jsPubAckErr) -> String {
        if let t = e.ErrText { return String(cString: t) }
        return text(e.Err) + (e.ErrCode.rawValue != 0 ? " (JetStream error \(e.ErrCode.rawValue))" : "")
    }

    /// The sequence number at the end of the message's id (`source:origin:seq`).
    private static func seq(of message: OpaquePointer?) -> UInt64? {
        var value: UnsafePointer<CChar>?
        guard natsMsgHeader_Get(message, "Nats-Msg-Id", &value) == NATS_OK, let value else { return nil }
        return String(cString: value).split(separator: ":").last.flatMap { UInt64($0) }
    }

    public var ready: Bool { !closed && connection != nil && natsConnection_Status(connection) == NATS_CONN_STATUS_CONNECTED }

    public func send(_ record: RecordSpool.Record, id: String) -> Bool {
        var message: OpaquePointer?
        let made = record.body.withUnsafeBytes { bytes in
            natsMsg_Create(&message, configuration.subject, nil, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(bytes.count))
        }
        guard made == NATS_OK else { return false }
        defer { natsMsg_Destroy(message) }
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = configuration.acknowledgementWait
        let status = id.withCString { id in
            options.MsgId = id
            return js_PublishMsgAsync(jetStream, &message, &options)
        }
        return status == NATS_OK
    }

    /// Makes the first connection. Once connected: says so when no stream captures the subject (the
    /// records then wait, and are sent once an operator adds one).
    public func serve() {
        guard !closed else { return }
        if connection == nil { connect() }
        guard !checkedStream, ready else { return }
        checkedStream = true
        let subject = (try? JSONEncoder().encode(configuration.subject)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
        let request = "{\"subject\":\(subject)}"
        var reply: OpaquePointer?
        let status = natsConnection_RequestString(&reply, connection, "$JS.API.STREAM.NAMES", request, 2000)
        defer { natsMsg_Destroy(reply) }
        guard status == NATS_OK, let data = natsMsg_GetData(reply) else {
            reports.say("the server does not answer JetStream requests (\(Self.text(status))): is it started with -js? Records wait (spool) until it does")
            return
        }
        let body = Data(bytes: data, count: Int(natsMsg_GetDataLength(reply)))
        let streams = (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["streams"] as? [String] ?? []
        if streams.isEmpty {
            reports.say("no JetStream stream captures subject \(configuration.subject): records wait (spool) until one does (nats stream add …)")
        }
    }

    public func close() {
        guard !closed else { return }
        closed = true
        if connection != nil {
            natsConnection_Close(connection)
            _ = closedCallback.wait(timeout: .now() + 2)
        }
        jsCtx_Destroy(jetStream)
        if connection != nil { natsConnection_Destroy(connection) }
        natsOptions_Destroy(options)
    }
}
