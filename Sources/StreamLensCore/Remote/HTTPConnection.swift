import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

// HTTP/1.1 over plain TCP sockets, connections kept alive: the one HTTP client of StreamLens —
// the Open Inference Protocol client's transport (StreamLensInference) and lensmetadata's
// http:// record sink. Plain POSIX sockets, so it lives in the core with no C of its own.
//
// Why not URLSession: on Linux (swift-corelibs-foundation, libcurl underneath) a request took
// about twice as long as on a kept-alive socket of our own, more than the time a remote
// inference may add (the figures are in the commit that brought this file). HTTP/1.1 with
// Content-Length bodies is all StreamLens sends; chunked answers are read too
// (HTTPResponseReader). No TLS: https:// addresses are refused where they are given.

/// One TCP connection to `host:port`. Answers are read by `HTTPResponseReader`,
/// which checks every length the server gives; this reads and writes the socket under one
/// deadline for the whole exchange, so a server that trickles its answer a byte at a time costs
/// at most the request's timeout.
///
/// @unchecked Sendable: used by one request at a time; between requests it rests in
/// `HTTPClient`'s pool, handed over under its lock.
final class HTTPConnection: @unchecked Sendable {
    private let fd: Int32
    private var reader: HTTPResponseReader
    /// Bytes received for the exchange in progress (a kept-alive connection the server closed
    /// fails before the first).
    private(set) var receivedAny = false

    init(host: String, port: Int, timeout: Double, limits: HTTPResponseReader.Limits) throws {
        reader = HTTPResponseReader(limits: limits)
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let first = found else {
            throw WireError("host \(host) not found (\(String(cString: gai_strerror(status))))", transient: true)
        }
        defer { freeaddrinfo(found) }
        var lastError: Int32 = 0
        var address: UnsafeMutablePointer<addrinfo>? = first
        var connected: Int32 = -1
        while let a = address, connected < 0 {
            let fd = Sockets.stream(family: a.pointee.ai_family, protocol: a.pointee.ai_protocol) // hints ask for SOCK_STREAM
            if fd >= 0 {
                // Bounds connect(); reads and writes wait in poll() for the exchange's deadline.
                Self.setTimeout(fd, timeout)
                if connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 {
                    connected = fd
                } else {
                    lastError = errno
                    close(fd)
                }
            } else {
                lastError = errno
            }
            address = a.pointee.ai_next
        }
        guard connected >= 0 else { throw WireError(Self.describe(lastError), transient: true) }
        Sockets.enable(connected, level: Int32(IPPROTO_TCP), option: TCP_NODELAY)
        fd = connected
    }

    deinit { close(fd) }

    private static func setTimeout(_ fd: Int32, _ seconds: Double) {
        var t = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, socklen_t(MemoryLayout<timeval>.size))
    }

    static func describe(_ code: Int32) -> String {
        switch code {
        case ECONNREFUSED: return "connection refused"
        case EAGAIN, ETIMEDOUT, EINPROGRESS: return "no answer in time"
        case ECONNRESET, EPIPE: return "connection lost"
        case EHOSTUNREACH, ENETUNREACH: return "host unreachable"
        default: return String(cString: strerror(code))
        }
    }

    /// One request and its answer, all of it within `timeout` seconds.
    func exchange(method: String, path: String, host: String, headers: [(String, String)], body: Data, timeout: Double) throws -> HTTPResponse {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, timeout) * 1e9)
        receivedAny = false
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\n\r\n"
        try write(Data(head.utf8), deadline: deadline, timeout: timeout)
        if !body.isEmpty { try write(body, deadline: deadline, timeout: timeout) }
        return try reader.read { [self] in try receive(deadline: deadline, timeout: timeout) }
    }

    /// Waits until the socket is ready for `events` or the deadline passes.
    private func wait(_ events: Int16, deadline: UInt64, timeout: Double) throws {
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { throw WireError("no answer within \(Self.seconds(timeout))", transient: true) }
            var p = pollfd(fd: fd, events: events, revents: 0)
            let milliseconds = Int32(min(Double(Int32.max), ceil(Double(deadline - now) / 1e6)))
            let ready = poll(&p, 1, milliseconds)
            if ready > 0 { return }
            if ready < 0 && errno != EINTR { throw WireError(Self.describe(errno), transient: true) }
        }
    }

    private static func seconds(_ t: Double) -> String { t == t.rounded() ? "\(Int(t)) s" : "\(t) s" }

    private func write(_ data: Data, deadline: UInt64, timeout: Double) throws {
        try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < bytes.count {
                try wait(Int16(POLLOUT), deadline: deadline, timeout: timeout)
                let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                if n < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    throw WireError(Self.describe(errno), transient: true)
                }
                offset += n
            }
        }
    }

    /// What the socket has (at most 256 KB), nil once the server closed it.
    private func receive(deadline: UInt64, timeout: Double) throws -> Data? {
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            try wait(Int16(POLLIN), deadline: deadline, timeout: timeout)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                receivedAny = true
                return Data(chunk[0..<n])
            }
            if n == 0 { return nil }
            if errno == EINTR || errno == EAGAIN { continue }
            throw WireError(Self.describe(errno), transient: true)
        }
    }
}

/// Connections to one server, kept alive and shared by requests that run at the same time
/// (one connection per request in flight).
public final class HTTPClient: Sendable {
    public let host: String
    public let port: Int
    /// Each exchange's deadline, in seconds: connecting, sending, the whole answer.
    public let timeout: Double
    /// What an answer may be (`HTTPResponseReader.Limits`): every byte a server sends is read
    /// within these, so a server that answers forever costs a bounded read.
    public let limits: HTTPResponseReader.Limits
    private let idle = Mutex<[HTTPConnection]>([])

    public init(host: String, port: Int, timeout: Double, limits: HTTPResponseReader.Limits = HTTPResponseReader.Limits()) {
        self.host = host; self.port = port; self.timeout = timeout; self.limits = limits
    }

    /// One exchange on an idle connection (or a new one). A kept-alive connection the server
    /// closed meanwhile fails before any byte of an answer: that one is tried again on a new
    /// connection. Any other failure is the request's.
    public func exchange(method: String, path: String, headers: [(String, String)] = [], body: Data = Data()) throws -> HTTPResponse {
        let hostHeader = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        if let reused = idle.withLock({ $0.popLast() }) {
            do {
                let response = try reused.exchange(method: method, path: path, host: hostHeader, headers: headers, body: body, timeout: timeout)
                if response.keepAlive { idle.withLock { $0.append(reused) } }
                return response
            } catch let error as WireError where error.transient && !reused.receivedAny {
                // closed while idle: a new connection below
            }
        }
        let connection = try HTTPConnection(host: host, port: port, timeout: timeout, limits: limits)
        let response = try connection.exchange(method: method, path: path, host: hostHeader, headers: headers, body: body, timeout: timeout)
        if response.keepAlive { idle.withLock { $0.append(connection) } }
        return response
    }
}
