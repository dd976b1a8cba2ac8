import Foundation

/// What went wrong with an answer from a server: malformed, too large, cut off, or too late.
/// `transient`: worth another try (the connection failed or was lost, or the answer did not come
/// in time), as opposed to an answer that is wrong as it stands.
public struct WireError: Error, CustomStringConvertible, Equatable, Sendable {
    public var message: String
    public var transient: Bool
    public init(_ message: String, transient: Bool = false) {
        self.message = message
        self.transient = transient
    }
    public var description: String { message }
}

/// One HTTP/1.1 answer.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    /// Header names in lower case.
    public var headers: [String: String]
    public var body: Data
    /// The connection may carry the next request.
    public var keepAlive: Bool
    public init(status: Int, headers: [String: String], body: Data, keepAlive: Bool) {
        self.status = status; self.headers = headers; self.body = body; self.keepAlive = keepAlive
    }
}

/// Reads HTTP/1.1 answers from a byte stream — the transport under the Open Inference Protocol
/// client — and believes nothing the server says: every length is checked before it is used, and
/// every part of an answer is bounded (line length, header count, body size), so a broken or
/// hostile server costs one failed request, never a trap or unbounded memory. Time is the
/// stream's business (the socket reader gives up at the request's deadline).
///
/// C-free and given its bytes by a closure, so it is unit-tested and fuzzed without a network
/// (Fuzz/, target `http-response`).
public struct HTTPResponseReader {
    public struct Limits: Sendable, Equatable {
        /// The status line or one header line.
        public var lineBytes = 16 * 1024
        /// Headers (and chunked trailers) in one answer.
        public var headers = 128
        /// The body, however it is framed.
        public var bodyBytes = 64 * 1024 * 1024
        /// Past `bodyBytes`: the answer is an error (a server's tensors must come whole), or,
        /// when the body is not needed (a webhook's answer), the body is cut there and the rest
        /// never read (the connection is then not kept: its next bytes are the rest).
        public var cutLongBodies = false
        public init() {}

        /// A webhook's answer: its status matters, its body hardly; a few KB of it are read.
        public static var statusOnly: Limits {
            var limits = Limits()
            limits.bodyBytes = 4096
            limits.cutLongBodies = true
            return limits
        }
    }

    /// More bytes of the stream, or nil at its end (the peer closed). Throws for a failure of
    /// the stream itself (a timeout, a reset).
    public typealias Source = () throws -> Data?

    public let limits: Limits
    /// Bytes received past the end of the last answer (a pipelining server sends them).
    private var buffer: [UInt8] = []
    private var start = 0
    private var source: Source = { nil }

    public init(limits: Limits = Limits()) { self.limits = limits }

    /// The next answer on the stream. 1xx interim answers are skipped.
    public mutating func read(from source: @escaping Source) throws -> HTTPResponse {
        self.source = source
        defer { self.source = { nil } }
        for _ in 0..<8 {
            let response = try readOne()
            if !(100..<200).contains(response.status) { return response }
        }
        throw WireError("the server sent only interim (1xx) answers")
    }

    private var available: Int { buffer.count - start }

    /// More bytes into the buffer; false at the end of the stream.
    private mutating func fill() throws -> Bool {
        guard let more = try source(), !more.isEmpty else { return false }
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: more)
        return true
    }

    private mutating func take(_ count: Int) throws -> Data {
        while available < count {
            guard try fill() else { throw WireError("the connection was closed after \(available) of \(count) body bytes", transient: true) }
        }
        let data = Data(buffer[start..<(start + count)])
        start += count
        compact()
        return data
    }

    /// Drops consumed bytes once they are most of the buffer.
    private mutating func compact() {
        if start > 64 * 1024 && start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
    }

    /// One CRLF-terminated line (a bare LF is accepted too), without its end.
    private mutating func line() throws -> String {
        var searched = 0 // bytes after `start` already looked through
        while true {
            if let lf = buffer[(start + searched)...].firstIndex(of: 0x0A) {
                var end = lf
                if end > start && buffer[end - 1] == 0x0D { end -= 1 }
                guard end - start <= limits.lineBytes else { throw lineTooLong() }
                let text = String(decoding: buffer[start..<end], as: UTF8.self)
                start = lf + 1
                compact()
                return text
            }
            guard available <= limits.lineBytes else { throw lineTooLong() }
            searched = available
            guard try fill() else {
                throw WireError(available == 0 ? "the connection was closed before an answer" : "the connection was closed in the middle of a header line",
                                transient: available == 0)
            }
        }
    }

    private func lineTooLong() -> WireError { WireError("a header line longer than \(limits.lineBytes) bytes") }

    private mutating func readOne() throws -> HTTPResponse {
        let statusLine = try line()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == "HTTP/1.1" || parts[0] == "HTTP/1.0",
              parts[1].count == 3, parts[1].allSatisfy(\.isASCIIDigit), let status = Int(parts[1]), (100..<600).contains(status) else {
            throw WireError("not an HTTP answer (\(Self.printable(statusLine)))")
        }
        let headers = try headerBlock()
        var keepAlive = parts[0] == "HTTP/1.1" && headers["connection"]?.lowercased() != "close"
        let body: Data
        if (100..<200).contains(status) || status == 204 || status == 304 {
            body = Data()
        } else if let encoding = headers["transfer-encoding"] {
            guard encoding.lowercased() == "chunked" else { throw WireError("Transfer-Encoding \(Self.printable(encoding)) (only chunked is read)") }
            let chunked = try chunkedBody()
            body = chunked.body
            if chunked.cut { keepAlive = false }
        } else if let text = headers["content-length"] {
            let length = try Self.length(text, what: "Content-Length")
            if length > limits.bodyBytes {
                guard limits.cutLongBodies else { throw tooLarge(length) }
                body = try take(limits.bodyBytes)
                keepAlive = false
            } else {
                body = try take(length)
            }
        } else {
            // The body runs to the end of the connection.
            while try fill() {
                guard available <= limits.bodyBytes else {
                    guard limits.cutLongBodies else { throw tooLarge(available) }
                    break
                }
            }
            body = Data(buffer[start..<min(buffer.count, start + limits.bodyBytes)])
            start = buffer.count
            keepAlive = false
        }
        return HTTPResponse(status: status, headers: headers, body: body, keepAlive: keepAlive)
    }

    /// Header lines up to the empty one; names in lower case. A repeated Content-Length must
    /// agree with itself.
    private mutating func headerBlock() throws -> [String: String] {
        var headers: [String: String] = [:]
        var count = 0
        while true {
            let text = try line()
            if text.isEmpty { return headers }
            count += 1
            guard count <= limits.headers else { throw WireError("more than \(limits.headers) header lines") }
            guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else {
                throw WireError("a malformed header line (\(Self.printable(text)))")
            }
            let name = text[..<colon].lowercased()
            let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if let earlier = headers[name] {
                if name == "content-length", earlier != value { throw WireError("two different Content-Length headers") }
                if name != "content-length" { headers[name] = earlier + ", " + value }
            } else {
                headers[name] = value
            }
        }
    }

    /// The chunks' bytes; `cut` when they went past `bodyBytes` and `cutLongBodies` kept only
    /// that much (the rest left unread).
    private mutating func chunkedBody() throws -> (body: Data, cut: Bool) {
        var body = Data()
        while true {
            let sizeLine = try line()
            let digits = sizeLine.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces)
            guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy(\.isHexDigit), let size = Int(digits, radix: 16) else {
                throw WireError("a malformed chunk size (\(Self.printable(sizeLine)))")
            }
            if size == 0 {
                _ = try headerBlock() // trailers
                return (body, false)
            }
            if body.count + size > limits.bodyBytes {
                guard limits.cutLongBodies else { throw tooLarge(body.count + size) }
                body.append(try take(limits.bodyBytes - body.count))
                return (body, true)
            }
            body.append(try take(size))
            guard try line().isEmpty else { throw WireError("a chunk longer than its size") }
        }
    }

    private func tooLarge(_ size: Int) -> WireError {
        WireError("an answer of \(size) bytes or more, over the \(limits.bodyBytes / (1024 * 1024)) MiB StreamLens takes")
    }

    /// A non-negative decimal length, all digits (no sign, no spaces inside), that fits an Int.
    public static func length(_ text: String, what: String) throws -> Int {
        guard !text.isEmpty, text.count <= 18, text.allSatisfy(\.isASCIIDigit), let value = Int(text) else {
            throw WireError("\(what) \(printable(text)) is not a length")
        }
        return value
    }

    /// At most `limit` characters of what the server sent, control characters shown as '?'.
    static func printable(_ text: String, limit: Int = 60) -> String {
        String(text.prefix(limit).map { $0.isControl ? "?" : $0 })
    }
}

private extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
    var isControl: Bool { unicodeScalars.contains { $0.properties.generalCategory == .control } }
}
