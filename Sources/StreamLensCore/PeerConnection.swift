import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// How long a peer we serve may hold its connection: `idle`, the longest wait for its next byte
/// (or for it to take ours); `exchange`, the whole of one exchange — a request's bytes, the
/// answer's, and for HTTP the drain before closing — whatever the peer trickles.
public struct PeerDeadlines: Sendable, Equatable {
    public var idle: Duration
    public var exchange: Duration
    public init(idle: Duration, exchange: Duration) {
        self.idle = idle
        self.exchange = exchange
    }
}

/// One accepted connection of a listener of ours (the control socket, /metrics), reading and
/// writing under `PeerDeadlines`: every wait is a poll() bounded by the idle deadline and, while
/// an exchange is open, by the exchange's end. So a peer that says nothing, or says a byte now
/// and then, holds its slot for a bounded time, never for good.
///
/// Owns its socket: closed when the connection is released.
public final class PeerConnection {
    /// What a read brought: bytes, or why none.
    public enum Received: Equatable {
        case bytes(Int)
        /// The peer closed (or reset) its side.
        case closed
        /// No byte for `deadlines.idle`.
        case idle
        /// The open exchange reached its end.
        case overtime
    }

    public let fd: Int32
    public let deadlines: PeerDeadlines
    private var exchangeEnd: ContinuousClock.Instant?

    public init(fd: Int32, deadlines: PeerDeadlines) {
        self.fd = fd
        self.deadlines = deadlines
    }

    deinit { close(fd) }

    /// The exchange's clock starts now (a request begins); until `endExchange()` every wait also
    /// ends at `deadlines.exchange` from now.
    public func startExchange() {
        exchangeEnd = .now + deadlines.exchange
    }

    /// Between exchanges only the idle deadline applies.
    public func endExchange() {
        exchangeEnd = nil
    }

    public var inExchange: Bool { exchangeEnd != nil }

    /// Reads what is there, waiting at most until the next deadline.
    public func receive(into buffer: inout [UInt8]) -> Received {
        while true {
            switch wait(for: Int16(POLLIN)) {
            case .idle: return .idle
            case .overtime: return .overtime
            case .closed: return .closed
            case .ready:
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if n > 0 { return .bytes(n) }
                if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
                return .closed
            }
        }
    }

    /// Writes all of `bytes` unless the peer stops taking them for `idle`, the exchange ends, or
    /// it hangs up (MSG_NOSIGNAL: EPIPE, never SIGPIPE). True when all were written.
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let w = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if w > 0 { sent += w; continue }
            guard w < 0, errno == EINTR || errno == EAGAIN else { return false }
            guard wait(for: Int16(POLLOUT)) == .ready else { return false }
        }
        return true
    }

    @discardableResult
    public func send(_ line: String) -> Bool { send(Array(line.utf8)) }

    /// Ends our side, then reads what the peer still sends (a request's body, the rest of a
    /// request too large), at most `limit` bytes and never past the exchange's end or an idle
    /// wait: closing with unread bytes resets the connection, and the peer could lose the answer.
    public func finish(draining limit: Int) {
        shutdown(fd, Int32(SHUT_WR))
        var sink = [UInt8](repeating: 0, count: 4096), total = 0
        while total < limit, case .bytes(let n) = receive(into: &sink) {
            total += n
        }
    }

    private enum Readiness { case ready, closed, idle, overtime }

    /// poll() until `events`, the peer's hang-up, or the nearer deadline.
    private func wait(for events: Int16) -> Readiness {
        var end = ContinuousClock.now + deadlines.idle
        var byExchange = false
        if let exchangeEnd, exchangeEnd < end { end = exchangeEnd; byExchange = true }
        while true {
            let now = ContinuousClock.now
            if end <= now { return byExchange ? .overtime : .idle }
            let (seconds, attoseconds) = (end - now).components
            let ms = Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
            var p = pollfd(fd: fd, events: events, revents: 0)
            let r = poll(&p, 1, ms)
            if r < 0 {
                if errno == EINTR { continue }
                return .closed
            }
            if r == 0 { continue } // the loop's top says the deadline passed
            if p.revents & events != 0 { return .ready }
            return .closed // POLLHUP, POLLERR, POLLNVAL without the event
        }
    }
}

/// What a listener does with a connection it has no slot for: one answer ("too many", 503), then
/// `PeerConnection.finish` for a second at most, so the peer reads the answer instead of
/// a reset or EPIPE on the request it is still sending. On a thread of its own, so the accept
/// loop never waits; at most `limit` at once, beyond that answered and closed at once.
public final class PeerRefusals: Sendable {
    public static let deadlines = PeerDeadlines(idle: .seconds(1), exchange: .seconds(1))
    public let limit: Int
    private let inFlight = Atomic<Int>(0)

    public init(limit: Int) {
        self.limit = limit
    }

    public func refuse(_ fd: Int32, answer: [UInt8], drainingAtMost drain: Int) {
        guard inFlight.add(1, ordering: .relaxed).newValue <= limit else {
            inFlight.subtract(1, ordering: .relaxed)
            let peer = PeerConnection(fd: fd, deadlines: Self.deadlines)
            peer.startExchange()
            peer.send(answer)
            return
        }
        Thread.detachNewThread { [self] in
            defer { inFlight.subtract(1, ordering: .relaxed) }
            let peer = PeerConnection(fd: fd, deadlines: Self.deadlines)
            peer.startExchange()
            peer.send(answer)
            peer.finish(draining: drain)
        }
    }
}
