import Foundation
import Glibc
import StreamLensCore
import StreamLensGst
import Synchronization

/// lensrecord's clips after their last frame, on a thread of their own (the stage's worker
/// never waits for a disk): the writer finished (its MP4 index written), the file given its
/// name (never over another), the JSON written beside it, retention applied, and the `clip`
/// event reported (the bus and the API through the stage, `events=` through its record sink).
///
/// A clip is under its name only if it decodes: one whose writing failed (a full disk, a disk
/// too slow) is cut back to its last whole fragment (`MP4Fragments`) and kept with
/// `"complete": false`, counted as failed; with no whole fragment it is deleted.
final class ClipFinisher: Sendable {
    struct Figures: Sendable {
        var written = 0, bytes = 0, deleted = 0, failed = 0
        /// Milliseconds from a clip's end (its writer told to finish) to its file and JSON in place.
        var finalizeMilliseconds: [Double] = []
    }

    private let queue = DispatchQueue(label: "streamlens.record")
    private let group = DispatchGroup()
    private let pattern: FilePattern
    private let retention: ClipRetention
    private struct Sink: @unchecked Sendable { let sink: (any RecordSink)? }
    // @unchecked: the sink is used on `queue` only (take, then finish from drain's block).
    private let sink: Sink
    private let state = Mutex((figures: Figures(), events: [FrameEvent](), notices: [StageNotice]()))

    init(pattern: FilePattern, retention: ClipRetention.Limits, sink: (any RecordSink)?) {
        self.pattern = pattern
        self.retention = ClipRetention(pattern: pattern.text, limits: retention)
        self.sink = Sink(sink: sink)
    }

    static func json(of clip: String) -> String { String(clip.dropLast(4)) + ".json" }

    var written: Int { state.withLock { $0.figures.written } }
    var figures: Figures { state.withLock { $0.figures } }
    func takeEvents() -> [FrameEvent] { state.withLock { s in defer { s.events = [] }; return s.events } }
    func takeNotices() -> [StageNotice] { state.withLock { $0.notices.take() } }

    private func warn(_ text: String) {
        state.withLock { $0.notices.append(StageNotice(.warning, text)); $0.figures.failed += 1 }
    }

    func finish(writer: ClipWriter, record: ClipRecord, path: String, temporary: String) {
        let asked = DispatchTime.now().uptimeNanoseconds
        queue.async(group: group) { [self] in
            let failure = writer.finish(timeout: 10)
            var record = record
            if let why = record.incomplete ?? failure {
                // Written only in part: what is whole stays, the cut-off end goes.
                record.incomplete = why
                record.complete = false
                record.end = nil
                guard let whole = MP4Fragments.whole(path: temporary), whole.hasMovie, whole.fragments > 0 else {
                    unlink(temporary)
                    return warn("no clip \(path): \(why); not one whole fragment was written")
                }
                guard truncate(temporary, off_t(whole.length)) == 0 else {
                    let error = String(cString: strerror(errno))
                    unlink(temporary)
                    return warn("no clip \(path): \(why); it could not be cut back to its last whole fragment (\(error))")
                }
                record.frames = whole.videoFrames
            }
            guard let size = (try? FileManager.default.attributesOfItem(atPath: temporary))?[.size] as? Int, size > 0 else {
                unlink(temporary)
                return warn("no clip \(path): nothing was written (\(failure ?? "empty"))")
            }
            // Its own name, never over another file: link(2) fails if the name is taken.
            let stem = String(path.dropLast(4))
            var placed: String?
            for k in 1...10_000 {
                let name = k == 1 ? path : "\(stem)-\(k).mp4"
                guard !FileManager.default.fileExists(atPath: Self.json(of: name)) else { continue }
                if link(temporary, name) == 0 { placed = name; break }
                if errno == EEXIST { continue }
                // A file system without hard links: renamed (rename would replace, so only to a free name).
                if !FileManager.default.fileExists(atPath: name), rename(temporary, name) == 0 { placed = name; break }
                unlink(temporary)
                return warn("no clip \(path): cannot name it (\(String(cString: strerror(errno))))")
            }
            unlink(temporary)
            guard let clip = placed else { return warn("no clip \(path): no free name (10000 taken)") }
            record.clip = Folders.name(clip)
            guard var data = try? JSONEncoder.stable().encode(record) else { return warn("cannot encode the JSON of \(clip)") }
            data.append(0x0A)
            let made = SnapshotWriter.createExclusive(Self.json(of: clip), data)
            if made != 0 { warn("clip \(clip) written, its JSON not (\(String(cString: strerror(made))))") }
            let ms = Double(DispatchTime.now().uptimeNanoseconds - asked) / 1e6
            let deleted = retention.apply(keeping: clip)
            if !record.complete {
                warn("clip \(clip) cut short: \(record.incomplete ?? "write failed"); kept up to its last whole fragment (\(record.frames) frames), \"complete\": false in its JSON")
            }
            state.withLock {
                if record.complete {
                    $0.figures.written += 1
                    $0.figures.bytes += size + data.count
                }
                $0.figures.deleted += deleted
                $0.figures.finalizeMilliseconds.append(ms)
                $0.events.append(FrameEvent(type: "clip", zone: "", objectId: record.events.first?.objectId ?? -1,
                                            label: record.trigger.joined(separator: "+"), time: record.start, path: clip))
            }
            if let sink = sink.sink {
                let notices = sink.take(data)
                if !notices.isEmpty { state.withLock { $0.notices += notices } }
            }
        }
    }

    /// Waits (at most `timeout` s) for the clips being finished; then the record sink sends what waits.
    func drain(timeout: Double) {
        if group.wait(timeout: .now() + timeout) == .timedOut {
            state.withLock { $0.notices.append(StageNotice(.warning, "a clip was still being finished after \(Int(timeout)) s; left as it is")) }
            return
        }
        if let sink = sink.sink {
            let notices = queue.sync { sink.finish(quiet: 2, atMost: 10) }
            if !notices.isEmpty { state.withLock { $0.notices += notices } }
        }
    }
}

/// Retention of lensrecord's clips: by count, bytes and age, over the clips this location
/// pattern wrote (a JSON beside the clip saying lensrecord wrote it with this pattern) in the
/// folders written into; other files are never counted nor touched. Oldest first.
struct ClipRetention: Sendable {
    struct Limits: Sendable, Equatable {
        var count: Int
        var bytes: Int
        var age: Double
        var any: Bool { count > 0 || bytes > 0 || age > 0 }
    }
    let pattern: String
    let limits: Limits

    init(pattern: String, limits: Limits) {
        self.pattern = pattern
        self.limits = limits
    }

    /// After `newest` was written: deletes the oldest clips (with their JSON) beyond the limits;
    /// how many. The newest is never deleted.
    func apply(keeping newest: String) -> Int {
        guard limits.any else { return 0 }
        let folder = Folders.folder(newest)
        var clips = OwnedFiles.index(folder, stage: ClipRecord.stageName, pattern: pattern, fileKey: "clip")
        let now = Date().timeIntervalSince1970
        var total = clips.reduce(0) { $0 + $1.bytes }
        var deleted = 0
        while let oldest = clips.first, oldest.file != newest {
            let tooMany = limits.count > 0 && clips.count > limits.count
            let tooBig = limits.bytes > 0 && total > limits.bytes
            let tooOld = limits.age > 0 && now - oldest.time > limits.age
            guard tooMany || tooBig || tooOld else { break }
            unlink(oldest.file)
            unlink(oldest.json)
            total -= oldest.bytes
            clips.removeFirst()
            deleted += 1
        }
        return deleted
    }
}
