import Foundation
import StreamLensCore
import Synchronization

/// lensmetadata's sink for `http://HOST[:PORT]/PATH`, a webhook: each record POSTed as it is —
/// the JSON line the file sink writes, newline included — one record per request,
/// `Content-Type: application/json` with its Content-Length (docs/metadata.md, "HTTP").
///
/// Requests go out one at a time, in frame order, from the sink's own `OutputQueue`
/// (`max-queued` records; beyond it the newest are dropped, counted, one warning), on the
/// project's one HTTP client (`HTTPClient`, kept-alive connections). Every request has its
/// deadline (`timeout-ms`: connecting, sending, the answer); one that gets no answer, an answer
/// 5xx, 408 or 429 is tried again up to `retries` times, waiting 250 ms, doubling, in between;
/// any other answer but 2xx is final. A record that failed every try makes the sink call the
/// peer failing: later records get one try each, no waits, until one gets through, so an
/// outage costs records at once instead of a backlog of stale ones. At the end the queue
/// drains within lensmetadata's deadline; what is left is given up and counted.
///
/// No TLS (the client is plain sockets): https:// is refused at start with the way round it.
final class HTTPRecordSink: RecordSink {
    static let schemes = ["http", "https"]
    static let usage = "http://HOST:PORT/PATH to POST each record as one JSON request (a webhook; https:// is refused: the client has no TLS)"
    struct Settings: StageSettings {
        var maxQueued = 1000
        var timeoutMs = 2000
        var retries = 2
        static let properties: [Property<Settings>] = [
            .maxQueued(\.maxQueued),
            .int("timeout-ms", \.timeoutMs, 10...600_000, help: "http://: time one request may take (connecting, sending, the whole answer)"),
            .int("retries", \.retries, 0...10,
                 help: "http://: tries again of a request that got no answer or 5xx, 408, 429 (back-off 250 ms, doubling); while the peer keeps failing a record gets one try"),
        ]
    }

    /// Where the records go, as given in `location`.
    struct Address: Equatable {
        var host: String
        var port: Int
        /// The request target: the path with its query, "/" at least.
        var path: String

        var description: String {
            "http://\(URLAuthority(host: host, port: port).description)\(path)"
        }

        /// A StageError naming the `location` property and what is wrong.
        init(parsing location: String) throws {
            func bad(_ why: String) -> StageError { StageError("property location=\(location): \(why)") }
            if location.lowercased().hasPrefix("https://") {
                throw bad("https is not supported: StreamLens's HTTP client has no TLS; give an http:// address (a TLS proxy on this host, e.g. stunnel or nginx, can forward to the https one)")
            }
            guard location.lowercased().hasPrefix("http://") else { throw bad("not an http://HOST:PORT/PATH address") }
            var rest = Substring(location.dropFirst("http://".count))
            if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
            let end = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
            let authority = rest[..<end]
            let target = rest[end...]
            path = target.isEmpty ? "/" : target.hasPrefix("?") ? "/" + target : String(target)
            guard !path.contains(where: { $0 == " " || $0.isNewline }) else { throw bad("the path holds a space or a line break (write them %-encoded)") }
            let parsed = try URLAuthority(parsing: authority, defaultPort: 80,
                                          noHost: "no host (write http://HOST:PORT/PATH, e.g. http://127.0.0.1:8080/streamlens)",
                                          credentials: "no user or password in the URL", bad: bad)
            host = parsed.host
            port = parsed.port
        }
    }

    /// What the queue's thread and the stage's share.
    private final class Ledger: Sendable {
        let state = Mutex(State())
    }

    private struct State {
        var sent = 0
        var failed = 0
        /// Why the last record failed ("HTTP 500", "connection refused").
        var lastFailure: String?
        /// The last record failed every try: the next get one try each.
        var failing = false
        /// The first failure, not yet told.
        var untold: String?
        var told = false
    }

    private let address: Address
    private let client: HTTPClient
    private let retries: Int
    private let queue: OutputQueue
    private let ledger = Ledger()
    private var final: OutputQueue.Counts?

    init(location: String, settings: Settings) throws {
        address = try Address(parsing: location)
        // Only an answer's status counts: a few KB of its body are read, then the connection is
        // closed (a receiver answering without end held each request for its whole deadline).
        client = HTTPClient(host: address.host, port: address.port, timeout: Double(settings.timeoutMs) / 1000, limits: .statusOnly)
        retries = settings.retries
        queue = OutputQueue(name: "streamlens.http", capacity: settings.maxQueued)
    }

    func take(_ record: Data) -> [StageNotice] {
        let (client, ledger, retries, path) = (client, ledger, retries, address.path)
        let submitted = queue.submit { handle in
            HTTPRecordSink.post(record, to: path, client: client, retries: retries, ledger: ledger, handle: handle)
        }
        var notices: [StageNotice] = []
        if submitted == .dropped(first: true) {
            notices.append(StageNotice(.warning, "records to \(address.description) wait too long to be sent (\(queue.capacity) queued): records are dropped (the summary counts them), the video goes on"))
        }
        if let why = ledger.state.withLock({ s -> String? in defer { s.untold = nil }; return s.untold }) {
            notices.append(StageNotice(.warning, "records cannot be delivered to \(address.description) (\(why)): they are dropped (the summary counts them), the video goes on"))
        }
        return notices
    }

    /// One record's request and its retries, on the queue's thread.
    private static func post(_ record: Data, to path: String, client: HTTPClient, retries: Int, ledger: Ledger, handle: OutputQueue.Handle) {
        var tries = 0, wait = 0.25
        while true {
            tries += 1
            let why: String, again: Bool
            do {
                let answer = try client.exchange(method: "POST", path: path, headers: [("Content-Type", "application/json")], body: record)
                if (200..<300).contains(answer.status) {
                    // Past the end's deadline the queue counts it as given up: not counted twice.
                    if !handle.givingUp { ledger.state.withLock { $0.sent += 1; $0.failing = false } }
                    return
                }
                why = "HTTP \(answer.status)"
                again = answer.status >= 500 || answer.status == 408 || answer.status == 429
            } catch {
                why = "\(error)"
                again = true
            }
            if handle.givingUp { return }
            if again && tries <= retries && !ledger.state.withLock({ $0.failing }) {
                // The wait ends early at the end's deadline.
                let until = DispatchTime.now().uptimeNanoseconds + UInt64(wait * 1e9)
                while DispatchTime.now().uptimeNanoseconds < until && !handle.givingUp { usleep(10_000) }
                if handle.givingUp { return }
                wait *= 2
                continue
            }
            ledger.state.withLock { s in
                s.failed += 1
                s.lastFailure = tries > 1 ? "\(why), \(tries) tries" : why
                s.failing = true
                if !s.told { s.told = true; s.untold = why }
            }
            return
        }
    }

    func finish(quiet: Double, atMost: Double) -> [StageNotice] {
        guard final == nil else { return [] }
        // A request under way may take its own deadline before the queue counts as stalled.
        let counts = queue.finish(quiet: max(quiet, client.timeout), atMost: atMost)
        final = counts
        let s = ledger.state.withLock { $0 }
        let lost = s.failed + counts.dropped + counts.leftAtEnd
        guard lost > 0 else { return [] }
        return [StageNotice(.warning, "\(lost) of \(s.sent + lost) records not delivered to \(address.description) (\(reasons(s, counts))); the video went on")]
    }

    /// "3 failed (last: HTTP 500, 3 tries), 2 queue full, 1 given up at the end".
    private func reasons(_ s: State, _ c: OutputQueue.Counts) -> String {
        var why: [String] = []
        if s.failed > 0 { why.append("\(s.failed) failed" + (s.lastFailure.map { " (last: \($0))" } ?? "")) }
        if c.dropped > 0 { why.append("\(c.dropped) queue full") }
        if c.leftAtEnd > 0 { why.append("\(c.leftAtEnd) given up at the end") }
        return why.joined(separator: ", ")
    }

    var summary: String? {
        let s = ledger.state.withLock { $0 }, c = final ?? queue.counts
        let lost = s.failed + c.dropped + c.leftAtEnd
        return "\(address.description): \(s.sent) sent, \(lost) dropped" + (lost > 0 ? " (\(reasons(s, c)))" : "")
    }

    var metrics: [Metric] {
        let s = ledger.state.withLock { $0 }, c = final ?? queue.counts
        let dropped = "streamlens_http_records_dropped_total", help = "Records not delivered to the http:// location: failed (every try), queue_full (max-queued reached), unsent_at_end"
        return [
            .counter("streamlens_http_records_sent_total", "Records the http:// location answered 2xx to", s.sent),
            .counter(dropped, help, labels: [("reason", "failed")], s.failed),
            .counter(dropped, help, labels: [("reason", "queue_full")], c.dropped),
            .counter(dropped, help, labels: [("reason", "unsent_at_end")], c.leftAtEnd),
            .gauge("streamlens_http_records_queued", "Records waiting to be sent to the http:// location", Double(c.pending)),
        ]
    }
}
