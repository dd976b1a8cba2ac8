import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

// HTTP/1.1 over plain TCP sockets, connections kept alive: the transport of the Open Inference
// Protocol client, and the only Swift in StreamLens that touches sockets.
//
// Why not URLSession: on Linux (swift-corelibs-foundation, libcurl underneath) one 197 KB POST
// to a loopback Triton took 15 ms at the median where the same request on a kept-alive socket
// took 7 ms, and NVIDIA's own tritonclient 6.9 ms (measured here, release builds) — more than
// the 2 ms a request the protocol may add. HTTP/1.1 with Content-Length bodies is all the
// protocol needs; chunked answers are read too.

/// A failed exchange. `transient`: worth trying again (the connection failed or was lost, or
/// no answer came in time), as opposed to an answer the server meant.
struct HTTPFailure: Error {
    var message: String
    var transient: Bool
}

struct HTTPResponse {
    var status: Int
    /// Header names in lower case.
    var headers: [String: String]
    var body: Data
    var keepAlive: Bool
}

/// One TCP connection to `host:port`.
///
/// @unchecked Sendable: used by one request at a time; between requests it rests in
/// `HTTPClient`'s pool, handed over under its lock.
final class HTTPConnection: @unchecked Sendable {
    private let fd: Int32
    /// Bytes read past the end of the last answer (none with well-behaved servers).
    private var pending = Data()

    init(host: String, port: Int, timeout: Double) throws {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let first = found else {
            throw HTTPFailure(message: "host \(host) not found (\(String(cString: gai_strerror(status))))", transient: true)
        }
        defer { freeaddrinfo(found) }
        var lastError: Int32 = 0
        var address: UnsafeMutablePointer<addrinfo>? = first
        var connected: Int32 = -1
        while let a = address, connected < 0 {
            let fd = socket(a.pointee.ai_family, a.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), a.pointee.ai_protocol)
            if fd >= 0 {
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
        guard connected >= 0 else { throw HTTPFailure(message: Self.describe(lastError), transient: true) }
        var one: Int32 = 1
        setsockopt(connected, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
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

    /// One request and its answer.
    func exchange(method: String, path: String, host: String, headers: [(String, String)], body: Data) throws -> HTTPResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\n\r\n"
        try write(Data(head.utf8))
        if !body.isEmpty { try write(body) }
        return try readResponse()
    }

    private func write(_ data: Data) throws {
        try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < bytes.count {
                let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw HTTPFailure(message: Self.describe(errno), transient: true)
                }
                offset += n
            }
        }
    }

    /// More bytes into `pending`; false at end of stream.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                pending.append(contentsOf: chunk[0..<n])
                return true
            }
            if n == 0 { return false }
            if errno == EINTR { continue }
            throw HTTPFailure(message: Self.describe(errno), transient: true)
        }
    }

    private func take(_ count: Int) throws -> Data {
        while pending.count < count {
            guard try fill() else { throw HTTPFailure(message: "connection lost", transient: true) }
        }
        let out = pending.prefix(count)
        pending = pending.dropFirst(count)
        return Data(out)
    }

    private func line() throws -> String {
        let crlf = Data("\r\n".utf8)
        while true {
            if let r = pending.range(of: crlf) {
                let text = String(decoding: pending[pending.startIndex..<r.lowerBound], as: UTF8.self)
                pending = pending[r.upperBound...]
                return text
            }
            guard try fill() else { throw HTTPFailure(message: "connection lost", transient: true) }
        }
    }

    private func readResponse() throws -> HTTPResponse {
        let statusLine = try line()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw HTTPFailure(message: "not an HTTP answer (\(statusLine.prefix(60)))", transient: false)
        }
        var headers: [String: String] = [:]
        while true {
            let text = try line()
            if text.isEmpty { break }
            guard let colon = text.firstIndex(of: ":") else { continue }
            headers[text[..<colon].lowercased()] = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var keepAlive = headers["connection"]?.lowercased() != "close" && parts[0] != "HTTP/1.0"
        let body: Data
        if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            var data = Data()
            while true {
                let size = Int(try line().split(separator: ";")[0].trimmingCharacters(in: .whitespaces), radix: 16) ?? 0
                if size == 0 {
                    while try !line().isEmpty {} // trailers
                    break
                }
                data.append(try take(size))
                _ = try line()
            }
            body = data
        } else if let length = headers["content-length"].flatMap({ Int($0) }) {
            body = try take(length)
        } else {
            while try fill() {}
            body = pending
            pending = Data()
            keepAlive = false
        }
        return HTTPResponse(status: status, headers: headers, body: body, keepAlive: keepAlive)
    }
}

/// Connections to one server, kept alive and shared by requests that run at the same time
/// (one connection per request in flight).
final class HTTPClient: Sendable {
    let host: String
    let port: Int
    let timeout: Double
    private let idle = Mutex<[HTTPConnection]>([])

    init(host: String, port: Int, timeout: Double) {
        self.host = host; self.port = port; self.timeout = timeout
    }

    /// One exchange on an idle connection (or a new one). A kept-alive connection the server
    /// closed meanwhile fails at once: that one is tried again on a new connection.
    func exchange(method: String, path: String, headers: [(String, String)] = [], body: Data = Data()) throws -> HTTPResponse {
        let hostHeader = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        if let reused = idle.withLock({ $0.popLast() }) {
            if let response = try? reused.exchange(method: method, path: path, host: hostHeader, headers: headers, body: body) {
                if response.keepAlive { idle.withLock { $0.append(reused) } }
                return response
            }
        }
        let connection = try HTTPConnection(host: host, port: port, timeout: timeout)
        let response = try connection.exchange(method: method, path: path, host: hostHeader, headers: headers, body: body)
        if response.keepAlive { idle.withLock { $0.append(connection) } }
        return response
    }
}
