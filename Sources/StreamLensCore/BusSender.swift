import Foundation
import Synchronization

/// A message bus as `BusSender` drives it (Kafka, NATS JetStream): hands records over, and tells
/// the sender through `BusReports` which ones the bus acknowledged. Its library's calls stay in
/// its own file (one C fence per library); the order, the spool and the figures are the sender's.
public protocol RecordBus: AnyObject, Sendable {
    /// Whether records can be handed over now (connected, as far as the library knows).
    var ready: Bool { get }
    /// Hands one record over, with `id` (unique for this source and sequence number, the same
    /// when it is sent again) for buses that drop repeats. Its outcome comes later through the
    /// reports (or before this returns). False: not taken now (not connected, the library's
    /// queue full); it is handed over again later.
    func send(_ record: RecordSpool.Record, id: String) -> Bool
    /// Serves the library's callbacks where it wants a thread to call it (Kafka's poll); called
    /// by the sender's thread between records, every 20 ms at most.
    func serve()
    /// Ends the connection at once; what is in flight stays in the spool for the next run.
    func close()
}

/// Where a bus reports: acknowledgements, failures, the connection's state. Called from any thread.
public protocol BusReports: AnyObject, Sendable {
    func delivered(_ seq: UInt64)
    func failed(_ seq: UInt64, _ why: String)
    func connection(up: Bool, _ why: String?)
    /// A warning for the user, said once with the location before it (a subject no JetStream
    /// stream captures…).
    func say(_ warning: String)
}

/// At least once onto a bus: each record takes the next sequence number of its source (written
/// into the record as `source` and `seq`, first), goes into the `RecordSpool` (memory up to
/// max-queued, then the spool folder) and is handed to the bus by a thread of its own, oldest
/// first; a failed or unacknowledged one is handed over again, after a pause. `take` never
/// waits on the bus: beyond the bounds the spool drops the oldest, counted and said once.
public final class BusSender: BusReports, Sendable {
    public let spool: RecordSpool
    public let source: String
    /// What the summary and metrics call it ("nats://127.0.0.1:4222/streamlens.cam1"; "nats").
    public let location: String
    public let kind: String

    struct Figures {
        var bus: (any RecordBus)?
        var connected = false
        var connections = 0
        var failures = 0
        var lastError: String?
        var notices: [StageNotice] = []
        var saidDrops = false
        var saidWriteError = false
        var saidAway = false
        var pauseUntil: ContinuousClock.Instant?
        var stopping = false
        var finished = false
    }
    private let figures = Mutex(Figures())
    private let wake = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    /// The record's opening `{"source":…,"seq":` before the number.
    private let head: Data

    public init(spool: RecordSpool, source: String, location: String, kind: String) {
        (self.spool, self.source, self.location, self.kind) = (spool, source, location, kind)
        let name = (try? JSONEncoder().encode(source)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
        head = Data("{\"source\":\(name),\"seq\":".utf8)
    }

    /// Starts handing records to `bus` on a thread of its own.
    public func start(_ bus: any RecordBus) {
        figures.withLock { $0.bus = bus }
        let thread = Thread { [self] in run(bus) }
        thread.name = "streamlens.\(kind)"
        thread.start()
    }

    /// One record (a JSON object, its newline optional): numbered, spooled, handed over later.
    /// What to tell the user now.
    public func take(_ record: Data) -> [StageNotice] {
        var body = record.last == 0x0A ? record.dropLast() : record[...]
        guard body.first == UInt8(ascii: "{") else { return [] }
        body = body.dropFirst()
        let more = body.first != UInt8(ascii: "}")
        spool.append { seq in
            var out = head
            out.append(contentsOf: String(seq).utf8)
            if more { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: body)
            return out
        }
        wake.signal()
        let trouble = spool.trouble
        return figures.withLock { f in
            if trouble.dropped > 0 && !f.saidDrops {
                f.saidDrops = true
                let bound = spool.directory.map { "records beyond max-queued in memory and spool-max-mb in \($0.path)" } ?? "records beyond max-queued (in memory; spool=DIR keeps more on disk)"
                f.notices.append(StageNotice(.warning, "\(location): the bus is behind: \(bound) are dropped, oldest first (the summary counts them), the video goes on"))
            }
            if let writeError = trouble.writeError, !f.saidWriteError {
                f.saidWriteError = true
                f.notices.append(StageNotice(.warning, "\(location): the spool cannot be written (\(writeError)): records wait in memory only, up to max-queued"))
            }
            return f.notices.take()
        }
    }

    /// End of stream, once (a sink let go of without it calls it with no wait): waits while
    /// the bus acknowledges records, up to `quiet` seconds without one (half a second when not
    /// connected: nothing can come) or `atMost` in all, then closes the bus and the spool: what
    /// is unacknowledged stays in the spool for the next run.
    public func finish(quiet: Double, atMost: Double) -> [StageNotice] {
        guard figures.withLock({ f in defer { f.finished = true }; return !f.finished }) else { return [] }
        let start = ContinuousClock.now
        var lastProgress = start, lastAcknowledged = spool.counts.acknowledged, awayFor = 0.0
        while spool.unacknowledged > 0, start.duration(to: .now) < .seconds(atMost) {
            let step = 0.05
            Thread.sleep(forTimeInterval: step)
            let acknowledged = spool.counts.acknowledged
            if acknowledged != lastAcknowledged { (lastAcknowledged, lastProgress) = (acknowledged, .now) }
            awayFor = figures.withLock { $0.connected } ? 0 : awayFor + step
            if lastProgress.duration(to: .now) > .seconds(quiet) || awayFor >= 0.5 { break }
        }
        // The bus holds the sender (its reports): letting go of it here ends the cycle. A bus
        // was given only by `start`, whose thread is then waited for.
        let bus = figures.withLock { f -> (any RecordBus)? in
            f.stopping = true
            defer { f.bus = nil }
            return f.bus
        }
        if let bus {
            wake.signal()
            done.wait()
            bus.close()
        }
        let left = spool.unacknowledged
        spool.close()
        guard left > 0 else { return [] }
        let disk = spool.writeError == nil ? "" : " as far as the disk took them (the rest, in memory, is lost)"
        let whereTo = spool.directory.map { "kept in the spool \($0.path)\(disk) for the next run" } ?? "lost (no spool=DIR)"
        return [StageNotice(.warning, "\(location): \(left) record\(left == 1 ? "" : "s") not acknowledged at the end, \(whereTo)")]
    }

    private func run(_ bus: any RecordBus) {
        defer { done.signal() }
        let idPrefix = "\(source):\(spool.origin):"
        while true {
            bus.serve()
            let (stopping, paused) = figures.withLock { f in
                (f.stopping, f.pauseUntil.map { ContinuousClock.now < $0 } ?? false)
            }
            if stopping { return }
            if !paused && bus.ready {
                let records = spool.take(max: 256)
                for (k, r) in records.enumerated() where !bus.send(r, id: idPrefix + String(r.seq)) {
                    spool.giveBack(records[k...].map(\.seq))
                    figures.withLock { $0.pauseUntil = .now + Self.retryPause }
                    break
                }
            }
            _ = wake.wait(timeout: .now() + .milliseconds(20))
        }
    }

    /// How long sending waits after the bus refused or failed a record.
    static let retryPause = Duration.milliseconds(500)

    // MARK: BusReports

    public func delivered(_ seq: UInt64) {
        spool.acknowledge(seq)
        if !figures.withLock({ $0.connected }) { connection(up: true, nil) }
    }

    public func failed(_ seq: UInt64, _ why: String) {
        spool.giveBack([seq])
        figures.withLock { f in
            guard !f.stopping else { return } // the end abandons what is in flight: not a failure
            f.failures += 1
            f.lastError = why
            f.pauseUntil = .now + Self.retryPause
        }
        wake.signal()
    }

    /// Said once when the bus cannot be reached, and once more when it is reached again.
    public func connection(up: Bool, _ why: String?) {
        figures.withLock { f in
            if up && !f.connected { f.connections += 1 }
            f.connected = up
            if let why { f.lastError = why }
            if !up && !f.saidAway && !f.stopping {
                f.saidAway = true
                let waiting = spool.directory.map { "in memory up to max-queued, then in the spool \($0.path)" } ?? "in memory up to max-queued"
                f.notices.append(StageNotice(.warning, "\(location) cannot be reached\(why.map { " (\($0))" } ?? ""): records wait \(waiting), the video goes on"))
            } else if up && f.saidAway {
                f.saidAway = false
                f.notices.append(StageNotice(.info, "\(location) reached again: sending what waits, oldest first"))
            }
        }
        wake.signal()
    }

    public func say(_ warning: String) { figures.withLock { $0.notices.append(StageNotice(.warning, "\(location): \(warning)")) } }

    // MARK: Figures

    /// "nats://…: 340 acknowledged, 2 dropped (spool full), 1 reconnect, 12 left in the spool".
    public var summary: String {
        let c = spool.counts, left = spool.unacknowledged
        let (connections, failures, lastError) = figures.withLock { ($0.connections, $0.failures, $0.lastError) }
        let why = lastError.map { " (\($0))" } ?? ""
        var parts = ["\(c.acknowledged) acknowledged"]
        if c.recovered > 0 { parts.append("\(c.recovered) from the spool of an earlier run") }
        if c.dropped > 0 { parts.append("\(c.dropped) dropped (past max-queued or spool-max-mb)") }
        if failures > 0 { parts.append("\(failures) deliveries failed and retried" + (lastError.map { " (last: \($0))" } ?? "")) }
        if connections > 1 { parts.append("\(connections - 1) reconnect\(connections == 2 ? "" : "s")") }
        if left > 0 { parts.append("\(left) unacknowledged" + (spool.directory.map { ", kept in \($0.path)" } ?? ", lost")) }
        if connections == 0 { parts.append("never connected" + why) }
        return "\(location): " + parts.joined(separator: ", ")
    }

    public var metrics: [Metric] {
        let c = spool.counts
        let connected = figures.withLock { $0.connected }
        let p = "streamlens_\(kind)"
        return [
            .counter("\(p)_records_acknowledged_total", "Records the bus acknowledged", c.acknowledged),
            .counter("\(p)_records_dropped_total", "Records dropped past max-queued (memory) or spool-max-mb (disk), oldest first", c.dropped),
            .gauge("\(p)_records_unacknowledged", "Records not yet acknowledged: in memory, in flight or in the spool", Double(spool.unacknowledged)),
            .gauge("\(p)_records_in_memory", "Records held in memory (at most max-queued)", Double(spool.inMemory)),
            .gauge("\(p)_connected", "1 while connected to the bus", connected ? 1 : 0),
        ]
    }
}
