import Foundation
import StreamLensCore
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// `streamlens run --metrics ADDRESS:PORT`: serves `GET /metrics` in Prometheus' text format
/// (`MetricsRegistry.shared`, rendered at each scrape) over plain HTTP/1.1, one answer per
/// connection (`Connection: close`, which is what Prometheus' scraper and curl handle best with
/// no keep-alive state to bound).
///
/// Why a server of our own on POSIX sockets: the page is a few KB of text, asked every few
/// seconds by one scraper; what matters is that no client can hurt the pipeline. Each
/// connection gets its own short-lived thread, at most `maxConnections` at once (more are
/// answered 503 at once), a request of at most 8 KB, and `deadlines` (`PeerConnection`): 2 s
/// without a byte, 5 s for the whole exchange from connecting to closing, the drain before the
/// close included. A client that connects and says nothing costs one thread for 2 s; one that
/// trickles its request, or reads its answer a byte at a time, 5 s (a request not finished by
/// then gets 408) and nothing else. Only GET and HEAD of /metrics (and / for a pointer) are served.
public final class MetricsServer: Sendable {
    public struct Address: Sendable, Equatable {
        public var host: String
        public var port: Int

        /// "PORT" (loopback), "ADDRESS:PORT", "[IPv6]:PORT"; numeric addresses only, like lensrtsp.
        public init(parsing text: String) throws {
            var host = "127.0.0.1", portText = text
            if text.hasPrefix("[") {
                guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                    throw MetricsServerError("--metrics \(text): an IPv6 address goes in brackets, then :PORT ([::1]:9464)")
                }
                host = String(text[text.index(after: text.startIndex)..<close])
                portText = String(text[text.index(close, offsetBy: 2)...])
            } else if let colon = text.lastIndex(of: ":") {
                host = String(text[..<colon])
                portText = String(text[text.index(after: colon)...])
                guard !host.contains(":") else { throw MetricsServerError("--metrics \(text): an IPv6 address goes in brackets, then :PORT ([::1]:9464)") }
            }
            guard let port = Int(portText), (1...65535).contains(port) else {
                throw MetricsServerError("--metrics \(text): the port must be a number from 1 to 65535 (--metrics 9464 or --metrics 127.0.0.1:9464)")
            }
            guard !host.isEmpty else { throw MetricsServerError("--metrics \(text): the address is empty (--metrics 127.0.0.1:\(port))") }
            self.host = host
            self.port = port
        }

        public var url: String { "http://\(host.contains(":") ? "[\(host)]" : host):\(port)/metrics" }
        public var isLoopback: Bool { host == "::1" || host.hasPrefix("127.") }
    }

    public let address: Address
    public static let maxConnections = 8
    static let deadlines = PeerDeadlines(idle: .seconds(2), exchange: .seconds(5))
    static let maxRequestBytes = 8192

    private let listener: Int32
    private let stopping = Atomic<Bool>(false)
    private let open = Atomic<Int>(0)
    private let refusals = PeerRefusals(limit: MetricsServer.maxConnections)
    private let registry: MetricsRegistry
    private let stopped = DispatchSemaphore(value: 0)

    /// Binds and listens now (a busy port or a bad address is an error before the pipeline
    /// starts); serves on its own thread until `stop()`.
    public init(address: Address, registry: MetricsRegistry = .shared) throws {
        self.address = address
        self.registry = registry
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(address.host, String(address.port), &hints, &found)
        guard status == 0, let a = found else {
            throw MetricsServerError("--metrics: \(address.host) is not a numeric IP address (127.0.0.1, 0.0.0.0, ::1)")
        }
        defer { freeaddrinfo(found) }
        let fd = Sockets.stream(family: a.pointee.ai_family, protocol: a.pointee.ai_protocol)
        guard fd >= 0 else { throw MetricsServerError("--metrics: no socket (\(String(cString: strerror(errno))))") }
        Sockets.enable(fd, level: SOL_SOCKET, option: SO_REUSEADDR)
        guard bind(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 else {
            let e = errno
            close(fd)
            let why = e == EADDRINUSE ? "the port is in use (another program listens there)"
                : e == EADDRNOTAVAIL ? "this machine has no such address" : String(cString: strerror(e))
            throw MetricsServerError("--metrics \(address.host):\(address.port): cannot listen: \(why)")
        }
        guard listen(fd, 16) == 0 else {
            let e = errno
            close(fd)
            throw MetricsServerError("--metrics \(address.host):\(address.port): cannot listen: \(String(cString: strerror(e)))")
        }
        listener = fd
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "streamlens-metrics"
        thread.start()
    }

    /// Stops accepting and closes the socket (connections being answered finish on their own).
    public func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        _ = stopped.wait(timeout: .now() + 1)
        close(listener)
    }

    private func acceptLoop() {
        defer { stopped.signal() }
        while !stopping.load(ordering: .relaxed) {
            var p = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 200) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            if open.add(1, ordering: .relaxed).newValue > Self.maxConnections {
                open.subtract(1, ordering: .relaxed)
                refusals.refuse(client, answer: Self.response(status: "503 Service Unavailable", body: "too many connections\n"), drainingAtMost: Self.maxRequestBytes)
                continue
            }
            let thread = Thread { [self] in
                defer { open.subtract(1, ordering: .relaxed) }
                serve(PeerConnection(fd: client, deadlines: Self.deadlines))
            }
            thread.name = "streamlens-metrics-client"
            thread.start()
        }
    }

    /// One connection, one exchange, started as it was accepted: everything up to the close,
    /// the drain included, ends within `deadlines.exchange`.
    private func serve(_ peer: PeerConnection) {
        peer.startExchange()
        var request = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 2048)
        while Self.headerEnd(request) == nil {
            guard request.count < Self.maxRequestBytes else {
                peer.send(Self.response(status: "431 Request Header Fields Too Large", body: "request too large\n"))
                peer.finish(draining: Self.maxDrainBytes)
                return
            }
            switch peer.receive(into: &chunk) {
            case .bytes(let n):
                request += chunk[0..<n]
            case .closed:
                return
            case .idle, .overtime:
                // A request begun and not finished in time is told so (if its socket takes the
                // line at once); a client that said nothing is just closed.
                if !request.isEmpty { peer.send(Self.response(status: "408 Request Timeout", body: "request not finished in time\n")) }
                return
            }
        }
        peer.send(answer(to: String(decoding: request, as: UTF8.self)))
        peer.finish(draining: Self.maxDrainBytes)
    }

    /// What is read after the answer, at most, before closing (`PeerConnection.finish`).
    static let maxDrainBytes = 65536

    /// The answer to one request's head.
    func answer(to head: String) -> [UInt8] {
        let line = head.split(separator: "\r\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else {
            return Self.response(status: "400 Bad Request", body: "bad request line\n")
        }
        let method = parts[0], target = parts[1]
        guard method == "GET" || method == "HEAD" else {
            return Self.response(status: "405 Method Not Allowed", body: "only GET and HEAD\n", extra: "Allow: GET, HEAD\r\n")
        }
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        let body: String, type: String
        switch path {
        case "/metrics":
            body = registry.exposition()
            type = "text/plain; version=0.0.4; charset=utf-8"
        case "/":
            body = "StreamLens: metrics at /metrics\n"
            type = "text/plain; charset=utf-8"
        default:
            return Self.response(status: "404 Not Found", body: "not found: metrics are at /metrics\n")
        }
        return Self.response(status: "200 OK", body: body, type: type, headOnly: method == "HEAD")
    }

    static func response(status: String, body: String, type: String = "text/plain; charset=utf-8", extra: String = "", headOnly: Bool = false) -> [UInt8] {
        let bytes = Array(body.utf8)
        let head = "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(bytes.count)\r\n\(extra)Connection: close\r\n\r\n"
        return Array(head.utf8) + (headOnly ? [] : bytes)
    }

    static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
    }
}

public struct MetricsServerError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ text: String) { description = text }
}
