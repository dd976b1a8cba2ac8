import CHTTPShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// An address to listen on: "PORT" (loopback), "ADDRESS:PORT", "[IPv6]:PORT"; numeric
/// addresses only, like lensrtsp. `option` names the flag in messages (--http, --metrics).
public struct HTTPAddress: Sendable, Equatable {
    public var host: String
    public var port: Int

    public init(parsing text: String, option: String = "--http") throws {
        var host = "127.0.0.1", portText = text
        let bracketed = "\(option) \(text): an IPv6 address goes in brackets, then :PORT ([::1]:9464)"
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { throw HTTPServerError(bracketed) }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = String(text[text.index(close, offsetBy: 2)...])
        } else if let colon = text.lastIndex(of: ":") {
            host = String(text[..<colon])
            portText = String(text[text.index(after: colon)...])
            guard !host.contains(":") else { throw HTTPServerError(bracketed) }
        }
        guard let port = Int(portText), (1...65535).contains(port) else {
            throw HTTPServerError("\(option) \(text): the port must be a number from 1 to 65535 (\(option) 9464 or \(option) 127.0.0.1:9464)")
        }
        guard !host.isEmpty else { throw HTTPServerError("\(option) \(text): the address is empty (\(option) 127.0.0.1:\(port))") }
        var v4 = in_addr(), v6 = in6_addr()
        guard inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1 else {
            throw HTTPServerError("\(option): \(host) is not a numeric IP address (127.0.0.1, 0.0.0.0, ::1)")
        }
        self.host = host
        self.port = port
    }

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public var url: String { "http://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
    /// 127.0.0.0/8 and ::1: only this machine can connect.
    public var isLoopback: Bool { host == "::1" || host.hasPrefix("127.") }
}

public struct HTTPServerError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ text: String) { description = text }
}

/// One request, read whole (its body bounded by `HTTPServer.Limits.maxBody`).
public struct HTTPRequest: Sendable {
    public var id: UInt64
    public var method: String
    /// Percent-decoded.
    public var path: String
    public var query: [String: String]
    /// Lower-cased names.
    public var headers: [String: String]
    public var body: [UInt8]
    public var remote: String
    /// The user owning the client's socket when the client is on this machine's loopback (the
    /// kernel says, by sock_diag); nil for a client elsewhere or when the kernel could not tell.
    public var peerUID: UInt32?

    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The body's media type, lower-cased, without parameters ("application/json"); nil without
    /// a Content-Type.
    public var mediaType: String? {
        header("content-type")?.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }

    /// `a=1&b=two+words` (a query, or a form's application/x-www-form-urlencoded body) as names
    /// and values, percent-decoded.
    public static func formFields(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            fields[key] = parts.count > 1 ? (String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : ""
        }
        return fields
    }
}

/// An answer: a status, headers (Content-Type among them) and a body.
public struct HTTPReply: Error, Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public static func text(_ status: Int, _ text: String, type: String = "text/plain; charset=utf-8") -> HTTPReply {
        HTTPReply(status: status, headers: [("Content-Type", type)], body: Array(text.utf8))
    }

    public func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
}

/// The HTTP server behind `--http`: libsoup 3 on a thread of its own (CHTTPShim, the one C fence
/// for it). Requests reach `handler` on that thread, which must not wait: it answers through the
/// `HTTPExchange` at once, or hands the work to another thread and answers from there.
public final class HTTPServer: Sendable {
    /// What one client may cost; see streamlens_http.h.
    public struct Limits: Sendable {
        public var maxBody = 64 * 1024
        public var maxConnections = 1024
        /// To send the request, head and body, from connecting (one request a connection).
        public var requestSeconds = 10
        /// To take each answer.
        public var responseSeconds = 30
        /// Bytes of a stream (events) its client has not read, at most.
        public var maxStreamBacklog = 1 << 20
        public init() {}
    }

    public let address: HTTPAddress
    public let limits: Limits
    private let server = Mutex<CServer?>(nil)
    /// The C server (its functions may be called from any thread until it is stopped).
    struct CServer: @unchecked Sendable { let pointer: OpaquePointer }
    private let handler: @Sendable (HTTPRequest, HTTPExchange) -> Void
    private let streams = Mutex<[UInt64: @Sendable () -> Void]>([:])
    /// The retained Dispatcher the C server calls back through.
    private nonisolated(unsafe) let dispatcher: UnsafeMutableRawPointer

    /// Listens now (a busy port or a bad address is an error before anything else starts).
    /// `option` names the flag in messages.
    public init(address: HTTPAddress, option: String = "--http", limits: Limits = Limits(),
                handler: @escaping @Sendable (HTTPRequest, HTTPExchange) -> Void) throws {
        self.handler = handler
        self.limits = limits
        var bindError: Int32 = 0
        var message: UnsafeMutablePointer<CChar>?
        let c = SLHTTPLimits(max_body: limits.maxBody, max_connections: UInt32(limits.maxConnections),
                             request_seconds: UInt32(limits.requestSeconds), response_seconds: UInt32(limits.responseSeconds),
                             max_stream_backlog: limits.maxStreamBacklog)
        let dispatcher = Dispatcher()
        let box = Unmanaged.passRetained(dispatcher).toOpaque()
        let started = sl_http_server_start(address.host, Int32(address.port), c, { context, request in
            guard let context, let request else { return }
            Unmanaged<Dispatcher>.fromOpaque(context).takeUnretainedValue().request(request.pointee)
        }, { context, id in
            guard let context else { return }
            Unmanaged<Dispatcher>.fromOpaque(context).takeUnretainedValue().streamClosed(id)
        }, box, &bindError, &message)
        let text = message.map { String(cString: $0) } ?? ""
        free(message)
        let at = "\(option) \(address.host):\(address.port)"
        guard let started else {
            Unmanaged<Dispatcher>.fromOpaque(box).release()
            switch Int(bindError) {
            case Int(SL_HTTP_BIND_NOT_NUMERIC): throw HTTPServerError("\(option): \(address.host) is not a numeric IP address (127.0.0.1, 0.0.0.0, ::1)")
            case Int(SL_HTTP_BIND_IN_USE): throw HTTPServerError("\(at): cannot listen: the port is in use (another program listens there)")
            case Int(SL_HTTP_BIND_NO_ADDRESS): throw HTTPServerError("\(at): cannot listen: this machine has no such address")
            default: throw HTTPServerError("\(at): cannot listen: \(text)")
            }
        }
        self.address = HTTPAddress(host: address.host, port: Int(sl_http_server_port(started)))
        self.dispatcher = box
        server.withLock { $0 = CServer(pointer: started) }
        dispatcher.attach(self)
    }

    /// Connections open now.
    public var connections: Int { server.withLock { $0.map { Int(sl_http_server_connections($0.pointer)) } ?? 0 } }

    /// Stops listening and closes every connection; no handler runs after it returns and answers
    /// given later are dropped.
    public func stop() {
        guard let s = server.withLock({ s -> CServer? in defer { s = nil }; return s }) else { return }
        sl_http_server_stop(s.pointer)
        Unmanaged<Dispatcher>.fromOpaque(dispatcher).release()
        let closed = streams.withLock { all -> [@Sendable () -> Void] in defer { all = [:] }; return Array(all.values) }
        closed.forEach { $0() }
    }

    deinit { stop() }

    fileprivate func handle(_ request: SLHTTPRequest) {
        func text(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }
        var headers: [String: String] = [:]
        for line in text(request.headers).split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased(), value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        let query = HTTPRequest.formFields(text(request.query))
        let rawPath = text(request.path)
        let body = request.body.map { Array(UnsafeBufferPointer(start: $0, count: request.body_length)) } ?? []
        let r = HTTPRequest(id: request.id, method: text(request.method), path: rawPath.removingPercentEncoding ?? rawPath,
                            query: query, headers: headers, body: body, remote: text(request.remote),
                            peerUID: request.peer_uid >= 0 ? UInt32(truncatingIfNeeded: request.peer_uid) : nil)
        handler(r, HTTPExchange(server: self, id: request.id))
    }

    fileprivate func streamClosed(_ id: UInt64) {
        let onClose = streams.withLock { $0.removeValue(forKey: id) }
        onClose?()
    }

    func respond(_ id: UInt64, _ response: HTTPReply) {
        let headers = response.headers.map { "\($0.0): \($0.1)\n" }.joined()
        server.withLock { s in
            guard let s else { return }
            response.body.withUnsafeBufferPointer { sl_http_respond(s.pointer, id, UInt32(response.status), headers, $0.baseAddress, $0.count) }
        }
    }

    func openStream(_ id: UInt64, headers: [(String, String)], onClose: @escaping @Sendable () -> Void) -> Bool {
        let text = headers.map { "\($0.0): \($0.1)\n" }.joined()
        return server.withLock { s in
            guard let s else { return false }
            streams.withLock { $0[id] = onClose }
            sl_http_stream_open(s.pointer, id, text)
            return true
        }
    }

    func write(_ id: UInt64, _ bytes: [UInt8]) {
        server.withLock { s in
            guard let s else { return }
            bytes.withUnsafeBufferPointer { sl_http_stream_write(s.pointer, id, $0.baseAddress, $0.count) }
        }
    }

    func offer(_ id: UInt64, _ bytes: UnsafeRawBufferPointer) {
        server.withLock { s in
            guard let s else { return }
            sl_http_stream_offer(s.pointer, id, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
    }

    func closeStream(_ id: UInt64) {
        server.withLock { s in
            guard let s else { return }
            sl_http_stream_close(s.pointer, id)
        }
    }
}

/// One request's answer, given once: `respond`, or `openStream` then `write`s.
public struct HTTPExchange: Sendable {
    let server: HTTPServer
    public let id: UInt64

    public func respond(_ response: HTTPReply) { server.respond(id, response) }

    /// A 200 whose body goes on (chunked) until `close` or the client leaves (`onClose`, once,
    /// from the server's thread). False when the server has stopped.
    @discardableResult
    public func openStream(headers: [(String, String)], onClose: @escaping @Sendable () -> Void) -> Bool {
        server.openStream(id, headers: headers, onClose: onClose)
    }

    public func write(_ text: String) { server.write(id, Array(text.utf8)) }
    /// Bytes for the stream unless the client has not yet taken all that was written before
    /// (then dropped): for pictures, where a newer one is better than a late one.
    public func offer(_ bytes: UnsafeRawBufferPointer) { server.offer(id, bytes) }
    public func close() { server.closeStream(id) }
}

/// What the C callbacks reach: the context pointer given to the C server (retained until the
/// server stops), pointing back at its HTTPServer once that is made.
private final class Dispatcher: Sendable {
    private let target = Mutex<WeakServer>(WeakServer())
    struct WeakServer: @unchecked Sendable { weak var server: HTTPServer? }

    /// Signalled once the server is attached: a request that comes in the moment the socket
    /// listens, before `HTTPServer.init` has returned, waits for it (microseconds).
    private let attached = DispatchSemaphore(value: 0)
    private let isAttached = Atomic<Bool>(false)

    func attach(_ server: HTTPServer) {
        target.withLock { $0.server = server }
        isAttached.store(true, ordering: .releasing)
        attached.signal()
    }

    private var server: HTTPServer? {
        if !isAttached.load(ordering: .acquiring) {
            _ = attached.wait(timeout: .now() + 5)
            attached.signal()
        }
        return target.withLock { $0.server }
    }

    func request(_ request: SLHTTPRequest) {
        guard let server else { return }
        server.handle(request)
    }

    func streamClosed(_ id: UInt64) { server?.streamClosed(id) }
}
