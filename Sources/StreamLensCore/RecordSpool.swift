import Foundation
import Synchronization

/// At least once, through an outage: the records a bus sink (Kafka, NATS) has not yet seen
/// acknowledged, each with its sequence number, kept in memory up to `maxQueued` and, with a
/// spool folder, on disk up to `spoolBytes`, handed out oldest first and handed out again when a
/// connection is lost before their acknowledgement — across a restart too.
///
/// Sequence numbers rise by one per record without gaps, and go on where the last run stopped
/// (the spool keeps the next one), so consumers see gaps (records dropped) and repeats (sent
/// twice) for what they are. Past the bounds the oldest records are dropped and counted.
///
/// The spool is a write-ahead log: every record is appended before it is sent (the memory
/// queue is a window onto it), in segment files `SEQ.spool` (each entry a line `SEQ LENGTH`,
/// the record's bytes, a newline), with `state.json` holding the next sequence number and the
/// highest one acknowledged with none missing below it. A segment is deleted once every record
/// in it is acknowledged; a torn last entry (a crash mid-write) is ignored when read back.
public final class RecordSpool: Sendable {
    public struct Record: Sendable, Equatable {
        public var seq: UInt64
        public var body: Data
        public init(seq: UInt64, body: Data) { (self.seq, self.body) = (seq, body) }
    }

    public struct Counts: Sendable, Equatable {
        public var appended = 0
        public var acknowledged = 0
        /// Dropped past the bounds (memory without a spool, or the spool full), oldest first.
        public var dropped = 0
        /// Records from earlier runs found in the spool at start.
        public var recovered = 0
    }

    /// `origin`: who numbers these records (random, made once per spool), so that a message id
    /// of source, origin and seq never collides with another spool's or a memory-only run's.
    struct State: Codable { var next: UInt64; var acknowledged: UInt64; var origin: String? }

    private struct Inner {
        var next: UInt64 = 1
        /// Every record below or at this is acknowledged (or dropped).
        var watermark: UInt64 = 0
        var acknowledgedAbove: Set<UInt64> = []
        /// Appended, not yet handed out, oldest first (the memory window).
        var waiting: [Record] = []
        /// Handed out, not yet acknowledged.
        var inFlight: [UInt64: Record] = [:]
        /// On disk beyond the window: the seq from which to read on (spool only).
        var diskFrom: UInt64?
        /// Where the last top-up from disk stopped: a segment and the byte after its last entry read.
        var diskCursor: (segment: UInt64, offset: Int)?
        var segments: [(first: UInt64, bytes: Int)] = []
        var writer: FileHandle?
        var counts = Counts()
        /// Why the last write to the spool failed (a full disk): records then live in memory only.
        var writeError: String?
        /// When the state was last written.
        var lastSaved = ContinuousClock.now
        /// After the disk refused a write, it is tried again from then on.
        var diskRetryAt: ContinuousClock.Instant?
    }

    public let directory: URL?
    public let maxQueued: Int
    public let spoolBytes: Int
    /// A segment's size: an eighth of the spool (so the bound is kept to an eighth), at most 1 MB.
    private var segmentBytes: Int { max(4096, min(1 << 20, spoolBytes / 8)) }
    private let inner = Mutex(Inner())
    /// Names this numbering in message ids: kept in the spool's state, new for each memory-only run.
    public let origin: String
    /// The spool's lock (flock on `lock`): one run per spool.
    private let lock: FileHandle?

    /// `directory`: the spool (created if missing; nil: memory only). Throws a message when the
    /// folder cannot be made or its state read.
    public init(directory: URL?, maxQueued: Int, spoolBytes: Int) throws {
        self.directory = directory
        self.maxQueued = max(1, maxQueued)
        self.spoolBytes = spoolBytes
        let fresh = String(UInt64.random(in: 0...UInt64.max), radix: 36)
        guard let directory else { (origin, lock) = (fresh, nil); return }
        do { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) } catch {
            throw StageError("spool \(directory.path): cannot create it (\(error.localizedDescription))")
        }
        let lockPath = directory.appendingPathComponent("lock").path
        guard FileManager.default.fileExists(atPath: lockPath) || FileManager.default.createFile(atPath: lockPath, contents: nil),
              let lock = FileHandle(forUpdatingAtPath: lockPath) else {
            throw StageError("spool \(directory.path): cannot write in it")
        }
        guard flock(lock.fileDescriptor, LOCK_EX | LOCK_NB) == 0 else {
            throw StageError("spool \(directory.path) is in use by another run: give each lensmetadata a spool of its own (spool=…/${NAME} in serve)")
        }
        self.lock = lock
        var state = State(next: 1, acknowledged: 0, origin: nil)
        let stateFile = directory.appendingPathComponent("state.json")
        if let data = FileManager.default.contents(atPath: stateFile.path) {
            guard let s = try? JSONDecoder().decode(State.self, from: data) else { throw StageError("spool \(directory.path): state.json is not what StreamLens writes; move the folder away to start afresh") }
            state = s
        }
        let found = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .compactMap { name -> UInt64? in name.hasSuffix(".spool") ? UInt64(name.dropLast(6)) : nil }.sorted()
            .map { first -> (first: UInt64, bytes: Int, entries: [Record]) in
                let url = Self.segment(directory, first)
                return (first, (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0, Self.read(url))
            }
        let next = max(state.next, state.acknowledged + 1, (found.last { !$0.entries.isEmpty }?.entries.last?.seq ?? 0) + 1)
        // A run that ended cleanly wrote the next number; one that did not (a crash, a disk too
        // full for the state) may have numbered records past what the disk holds and sent them:
        // a new origin keeps their message ids from colliding with the numbers given again.
        origin = state.origin.flatMap { next == state.next ? $0 : nil } ?? fresh
        inner.withLock { i in
            i.watermark = state.acknowledged
            i.next = next
            for segment in found {
                i.segments.append((segment.first, segment.bytes))
                i.counts.recovered += segment.entries.filter { $0.seq > i.watermark }.count
            }
            if i.counts.recovered > 0 { i.diskFrom = i.watermark + 1 }
        }
        // Recovered records join the window now; new ones go to a new segment.
        inner.withLock { fill(&$0); saveState(&$0) }
    }

    deinit { close() }

    private static func segment(_ directory: URL, _ first: UInt64) -> URL {
        directory.appendingPathComponent(String(format: "%020llu.spool", first))
    }

    /// The entries of a segment file; a torn last entry is left out.
    static func read(_ url: URL) -> [Record] {
        var out: [Record] = []
        _ = entries(url, from: 0) { out.append($0); return true }
        return out
    }

    /// Hands the entries of a segment file from byte `offset` to `take`, read 64 KB at a time,
    /// until `take` says no (that entry is left for next time) or the file, or a torn entry,
    /// ends; the offset after the last entry taken.
    static func entries(_ url: URL, from offset: Int, _ take: (Record) -> Bool) -> Int {
        guard let file = try? FileHandle(forReadingFrom: url), (try? file.seek(toOffset: UInt64(offset))) != nil else { return offset }
        defer { try? file.close() }
        var buffer = Data(), consumed = offset
        while let chunk = try? file.read(upToCount: 1 << 16), !chunk.isEmpty {
            buffer.append(chunk)
            var i = 0
            while let newline = buffer[i...].firstIndex(of: 0x0A) {
                let header = String(decoding: buffer[i..<newline], as: UTF8.self).split(separator: " ")
                // A length past any record StreamLens writes is a torn or foreign header.
                guard header.count == 2, let seq = UInt64(header[0]), let length = Int(header[1]), (0...(64 << 20)).contains(length) else { return consumed }
                let start = newline + 1
                guard buffer.count - start >= length + 1 else { break } // the rest is in the next chunk
                guard buffer[start + length] == 0x0A, take(Record(seq: seq, body: buffer.subdata(in: start..<(start + length)))) else { return consumed }
                consumed += start + length + 1 - i
                i = start + length + 1
            }
            buffer = buffer.subdata(in: i..<buffer.count)
        }
        return consumed
    }

    // MARK: Appending and handing out

    /// Takes a record; its sequence number. Past the bounds the oldest waiting record goes.
    @discardableResult
    public func append(_ body: Data) -> UInt64 { append { _ in body } }

    /// Takes the record `body` makes with its sequence number (a record that carries it).
    @discardableResult
    public func append(_ body: (UInt64) -> Data) -> UInt64 {
        inner.withLock { i in
            let record = Record(seq: i.next, body: body(i.next))
            i.next += 1
            i.counts.appended += 1
            if let directory, i.diskRetryAt.map({ ContinuousClock.now >= $0 }) ?? true, write(record, to: directory, &i) {
                if i.diskFrom == nil, i.waiting.count + i.inFlight.count < maxQueued { i.waiting.append(record) } else if i.diskFrom == nil { i.diskFrom = record.seq }
                trim(&i, directory)
            } else {
                i.waiting.append(record)
                while i.waiting.count + i.inFlight.count > maxQueued, !i.waiting.isEmpty {
                    let oldest = i.waiting.removeFirst()
                    i.counts.dropped += 1
                    settle(oldest.seq, &i)
                }
            }
            return record.seq
        }
    }

    /// The next `max` records to send, oldest first (they are in flight until acknowledged or
    /// given back).
    public func take(max: Int) -> [Record] {
        inner.withLock { i in
            fill(&i)
            let out = Array(i.waiting.prefix(max))
            i.waiting.removeFirst(out.count)
            for r in out { i.inFlight[r.seq] = r }
            return out
        }
    }

    /// The bus took record `seq` (an acknowledgement, a delivery report).
    public func acknowledge(_ seq: UInt64) {
        inner.withLock { i in
            guard i.inFlight.removeValue(forKey: seq) != nil else { return }
            i.counts.acknowledged += 1
            settle(seq, &i)
        }
    }

    /// A connection was lost with these in flight: they are sent again first, in order.
    public func giveBack() {
        inner.withLock { i in
            let back = i.inFlight.values.sorted { $0.seq < $1.seq }
            i.inFlight = [:]
            i.waiting = back + i.waiting
        }
    }

    /// These were not taken (a failed delivery, a full queue): they are sent again, in order.
    public func giveBack(_ seqs: [UInt64]) {
        inner.withLock { i in
            let back = seqs.compactMap { i.inFlight.removeValue(forKey: $0) }
            guard !back.isEmpty else { return }
            i.waiting = (back + i.waiting).sorted { $0.seq < $1.seq }
        }
    }

    public var counts: Counts { inner.withLock { $0.counts } }
    /// Records in memory (waiting and in flight): at most `maxQueued` with a spool.
    public var inMemory: Int { inner.withLock { $0.waiting.count + $0.inFlight.count } }
    /// Why the spool could not be written, if it could not (records then stay in memory only).
    public var writeError: String? { inner.withLock { $0.writeError } }
    /// Records dropped so far and the disk's refusal, if any: what a sender tells the user, read
    /// at once.
    public var trouble: (dropped: Int, writeError: String?) { inner.withLock { ($0.counts.dropped, $0.writeError) } }
    /// Records not yet acknowledged (waiting, in flight, on disk).
    public var unacknowledged: Int { inner.withLock { Int($0.next - 1 - $0.watermark) - $0.acknowledgedAbove.count } }
    /// The sequence number the next record will get.
    public var nextSeq: UInt64 { inner.withLock { $0.next } }

    /// Writes the state and closes the segment (the end of a run; what is unacknowledged stays
    /// for the next).
    public func close() {
        inner.withLock { i in
            try? i.writer?.synchronize()
            try? i.writer?.close()
            i.writer = nil
            saveState(&i)
        }
        try? lock?.close()
    }

    // MARK: Inside

    private func settle(_ seq: UInt64, _ i: inout Inner) {
        i.acknowledgedAbove.insert(seq)
        while i.acknowledgedAbove.remove(i.watermark + 1) != nil { i.watermark += 1 }
        guard let directory else { return }
        // Segments whose every record is at or below the watermark go.
        while i.segments.count > 1, i.segments[1].first <= i.watermark + 1 {
            try? FileManager.default.removeItem(at: Self.segment(directory, i.segments[0].first))
            i.segments.removeFirst()
            saveState(&i)
        }
        // The watermark on disk at most a second behind: after a crash, at most a second of
        // acknowledged records is sent again.
        if i.lastSaved.duration(to: .now) > .seconds(1) { saveState(&i) }
    }

    /// Appends the record to the last segment (a new one when it is full); false when the disk
    /// refuses (full, gone): the record then lives in memory only, and the disk is tried again
    /// a second later.
    private func write(_ record: Record, to directory: URL, _ i: inout Inner) -> Bool {
        do {
            if i.writer == nil || (i.segments.last?.bytes ?? segmentBytes) >= segmentBytes {
                try? i.writer?.synchronize()
                try? i.writer?.close()
                i.writer = nil
                let url = Self.segment(directory, record.seq)
                guard FileManager.default.createFile(atPath: url.path, contents: nil) else { throw StageError("cannot create \(url.lastPathComponent)") }
                i.writer = try FileHandle(forWritingTo: url)
                i.segments.append((record.seq, 0))
                saveState(&i)
            }
            var entry = Data("\(record.seq) \(record.body.count)\n".utf8)
            entry.append(record.body)
            entry.append(0x0A)
            try i.writer?.write(contentsOf: entry)
            i.segments[i.segments.count - 1].bytes += entry.count
            i.writeError = nil
            i.diskRetryAt = nil
            return true
        } catch {
            // A torn entry may be left at the end of the segment: a new segment starts next time
            // (reading stops at a torn entry); a segment left empty goes.
            try? i.writer?.close()
            i.writer = nil
            if let last = i.segments.last, last.bytes == 0 {
                try? FileManager.default.removeItem(at: Self.segment(directory, last.first))
                i.segments.removeLast()
            }
            i.writeError = Self.describe(error)
            i.diskRetryAt = .now + .seconds(1)
            return false
        }
    }

    /// "No space left on device" rather than Foundation's wrapping of it.
    private static func describe(_ error: any Error) -> String {
        let e = error as NSError
        if let posix = e.userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(posix.code)))
        }
        return e.domain == NSPOSIXErrorDomain ? String(cString: strerror(Int32(e.code))) : error.localizedDescription
    }

    /// Past `spoolBytes`: the oldest segment goes, its unacknowledged records counted dropped.
    private func trim(_ i: inout Inner, _ directory: URL) {
        while i.segments.count > 1, i.segments.reduce(0, { $0 + $1.bytes }) > spoolBytes {
            let first = i.segments[0].first, end = i.segments[1].first
            try? FileManager.default.removeItem(at: Self.segment(directory, first))
            i.segments.removeFirst()
            for seq in first..<end where seq > i.watermark && !i.acknowledgedAbove.contains(seq) {
                i.counts.dropped += 1
                i.inFlight[seq] = nil
            }
            i.waiting.removeAll { $0.seq < end }
            if let from = i.diskFrom, from < end { i.diskFrom = end }
            i.acknowledgedAbove = i.acknowledgedAbove.filter { $0 >= end }
            i.watermark = max(i.watermark, end - 1)
            saveState(&i)
        }
    }

    /// Tops the memory window up from disk (spool only), reading on from where the last top-up
    /// stopped (`diskCursor`), so a replay reads each record once.
    private func fill(_ i: inout Inner) {
        guard let directory, let from = i.diskFrom, i.waiting.count + i.inFlight.count < maxQueued else { return }
        let hadWaiting = !i.waiting.isEmpty
        var next = from, full = false
        for (k, segment) in i.segments.enumerated() where !full {
            if k + 1 < i.segments.count, i.segments[k + 1].first <= next { continue } // wholly below
            let start = i.diskCursor.flatMap { $0.segment == segment.first ? $0.offset : nil } ?? 0
            let end = Self.entries(Self.segment(directory, segment.first), from: start) { r in
                guard r.seq >= next else { return true }
                guard i.waiting.count + i.inFlight.count < maxQueued else { full = true; return false }
                if r.seq > i.watermark, !i.acknowledgedAbove.contains(r.seq), i.inFlight[r.seq] == nil { i.waiting.append(r) }
                next = r.seq + 1
                return true
            }
            i.diskCursor = (segment.first, end)
        }
        i.diskFrom = next < i.next ? next : nil
        // Records the disk refused wait in memory beside those read back: oldest first.
        if hadWaiting { i.waiting.sort { $0.seq < $1.seq } }
    }

    private func saveState(_ i: inout Inner) {
        i.lastSaved = .now
        guard let directory, let data = try? JSONEncoder().encode(State(next: i.next, acknowledged: i.watermark, origin: origin)) else { return }
        let url = directory.appendingPathComponent("state.json")
        let temporary = directory.appendingPathComponent("state.json.tmp")
        if FileManager.default.createFile(atPath: temporary.path, contents: data) { _ = rename(temporary.path, url.path) }
    }
}
