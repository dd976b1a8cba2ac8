import Foundation
import Glibc
import StreamLensCore
import StreamLensGst
import Synchronization

/// What lenssnapshot writes beside each picture (same name, .json). `stage` and `pattern` are
/// also how the folder limit knows a pair as its own: only pairs whose JSON says lenssnapshot
/// wrote them with this same `path=` pattern are ever deleted.
struct SnapshotRecord: Encodable, Sendable {
    /// 1: the first version.
    static let schemaVersion = 1
    static let stageName = "lenssnapshot"

    struct Rect: Encodable, Sendable, Equatable { var x, y, width, height: Int }

    var schemaVersion = Self.schemaVersion
    var stage = Self.stageName
    var pattern: String
    /// The picture's file name (in the same folder), filled in when it is written.
    var image = ""
    /// What triggered it (track, zone, label, interval), in that order.
    var trigger: [String]
    /// The zone events that triggered it.
    var events: [FrameEvent]?
    var frame: Int
    /// The frame's presentation time, seconds.
    var time: Double?
    var wallTime: String
    /// The frame's size (a crop's picture is `crop`'s size).
    var width: Int
    var height: Int
    /// A crop: the rectangle of the frame the picture holds, frame pixels.
    var crop: Rect?
    /// A crop: the object's id (-1 untracked).
    var objectId: Int?
    /// Every region on the frame, as lensmetadata writes them (docs/metadata.md).
    var detections: [MetadataRecord.Region]

    enum CodingKeys: String, CodingKey {
        case stage, pattern, image, trigger, events, frame, time, width, height, crop, detections
        case schemaVersion = "schema_version"
        case wallTime = "wall_time"
        case objectId = "object_id"
    }
}

/// Encodes and writes lenssnapshot's pictures from an `OutputQueue` of its own: the stage hands
/// over a copy of the pixels and goes on, never waiting. A live stream's snapshots wait at most
/// `maxPending` at a time; beyond that one is skipped and counted (a disk slower than the
/// triggers loses snapshots, never frames). A file's (a lossless run: its frames have no age on
/// arrival) may wait up to `maxPendingBytes` of pixels, so that a run over a file writes the same
/// snapshots on a fast machine and a slow one unless the triggers outrun the disk by that much.
final class SnapshotWriter: Sendable {
    struct Job: Sendable {
        /// Packed rows, no padding.
        var pixels: [UInt8]
        var pixelFormat: String
        var width: Int
        var height: Int
        /// The expanded pattern: the picture's path before any suffix that keeps it from
        /// overwriting a file already there.
        var path: String
        var record: SnapshotRecord
    }

    struct Counts: Sendable {
        var written = 0, bytes = 0, deleted = 0, skippedBusy = 0, failed = 0, tooBig = 0, pending = 0, leftAtEnd = 0
    }

    static let maxPending = 4
    let quality: Int
    /// 0: no limit.
    let maxFolderBytes: Int
    let pattern: String

    private let queue = OutputQueue(name: "streamlens.snapshot", capacity: SnapshotWriter.maxPending)
    private let counts = Mutex(Counts())
    private let notices = Mutex<[StageNotice]>([])

    /// A pair this stage's pattern wrote (this run or an earlier one), for the folder limit.
    private struct Pair: Sendable {
        var image: String, json: String, bytes: Int, order: Double
    }
    /// The folders written into and their pairs, oldest first. Touched only on the queue's
    /// thread (the mutex is never contended: it makes the confinement checkable).
    private let folders = Mutex<[String: [Pair]]>([:])

    init(quality: Int, maxFolderBytes: Int, pattern: String) {
        self.quality = quality
        self.maxFolderBytes = maxFolderBytes
        self.pattern = pattern
    }

    var snapshot: Counts {
        let q = queue.counts
        return counts.withLock { c in
            var c = c
            c.skippedBusy = q.dropped; c.pending = q.pending; c.leftAtEnd = q.leftAtEnd
            return c
        }
    }

    /// A file's snapshots may wait up to this many bytes of pixels in all (see the type's comment).
    static let maxPendingBytes = 256 << 20

    /// False, counted, when there is no room: `maxPending` snapshots waiting (live), or
    /// `maxPendingBytes` of pixels (a file). Never waits: a stage worker blocked here while the
    /// pipeline starts can deadlock the bridge's start-up (stage_element.c, sl_change_state).
    @discardableResult
    func submit(_ job: Job, live: Bool) -> Bool {
        queue.submit(bytes: job.pixels.count, overflowBytes: live ? 0 : Self.maxPendingBytes) { [self] _ in store(job) } == .queued
    }

    /// Waits for the snapshots still being written (at most 2 s without one written, 10 s in
    /// all); true when none is left.
    func finish() -> Bool {
        queue.finish().leftAtEnd == 0
    }

    func takeNotices() -> [StageNotice] {
        notices.withLock { $0.take() }
    }

    private func fail(_ message: String) {
        let first = counts.withLock { c -> Bool in c.failed += 1; return c.failed == 1 }
        // The first failure is said; the summary counts the rest.
        if first { notices.withLock { $0.append(StageNotice(.warning, "\(message); snapshots go on (failures are counted)")) } }
    }

    private func store(_ job: Job) {
        let jpeg: Data
        do {
            jpeg = try JPEGEncoder.encode(pixels: job.pixels, pixelFormat: job.pixelFormat, width: job.width, height: job.height, quality: quality)
        } catch {
            return fail("cannot encode a snapshot: \(error)")
        }
        let folder = Folders.folder(job.path)
        if let problem = Folders.make(folder) { return fail(problem) }
        let ext = Folders.fileExtension(job.path)
        let stem = String(job.path.dropLast(ext.count + 1))
        let encoder = JSONEncoder.stable()

        // Never overwrite: the first free name of stem.jpg, stem-2.jpg, stem-3.jpg… whose .json
        // is free too. The picture is written under a temporary name and linked to its own:
        // link(2) fails if the name was taken meanwhile, and nobody sees half a JPEG.
        let temporary = (folder.isEmpty ? "" : folder + "/") + ".lenssnapshot-\(getpid())-\(UInt64.random(in: 0...UInt64.max)).partial"
        let made = Self.createExclusive(temporary, jpeg)
        guard made == 0 else { return fail("cannot write in \(folder.isEmpty ? "." : folder) (\(String(cString: strerror(made))))") }
        defer { unlink(temporary) }
        for k in 1...10_000 {
            let image = k == 1 ? job.path : "\(stem)-\(k).\(ext)"
            let json = String(image.dropLast(ext.count + 1)) + ".json"
            guard !FileManager.default.fileExists(atPath: json) else { continue }
            var record = job.record
            record.image = Folders.name(image)
            guard var data = try? encoder.encode(record) else { return fail("cannot encode a snapshot's JSON") }
            data.append(0x0A)
            let bytes = jpeg.count + data.count
            guard makeRoom(for: bytes, in: folder) else { return }
            if link(temporary, image) != 0 {
                let failure = errno
                if failure == EEXIST { continue }
                // A file system without hard links (vfat, some network mounts): written in place,
                // still never over another file.
                let direct = Self.createExclusive(image, jpeg)
                if direct == EEXIST { continue }
                guard direct == 0 else { return fail("cannot write \(image) (\(String(cString: strerror(direct))))") }
            }
            // The JSON last: once it is there, its picture is complete.
            let written = Self.createExclusive(json, data)
            guard written == 0 else {
                unlink(image)
                if written == EEXIST { continue }
                return fail("cannot write \(json) (\(String(cString: strerror(written))))")
            }
            if maxFolderBytes > 0 {
                folders.withLock { $0[folder, default: []].append(Pair(image: image, json: json, bytes: bytes, order: Date().timeIntervalSince1970)) }
            }
            counts.withLock { $0.written += 1; $0.bytes += bytes }
            return
        }
        fail("no free name for \(job.path) (10000 taken)")
    }

    /// Writes a new file (never over one: O_EXCL); 0, or the errno that stopped it (a partial
    /// file is removed).
    static func createExclusive(_ path: String, _ data: Data) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return errno }
        var failure: Int32 = 0
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 { if errno == EINTR { continue }; failure = errno; return }
                offset += n
            }
        }
        if close(fd) != 0 && failure == 0 { failure = errno }
        if failure != 0 { unlink(path) }
        return failure
    }

    /// The folder limit: deletes this pattern's oldest pairs in the folders written into until
    /// `bytes` more fit under `maxFolderBytes`. False (counted) when the one snapshot is bigger
    /// than the whole limit: it is not written, and nothing is deleted for it.
    private func makeRoom(for bytes: Int, in folder: String) -> Bool {
        guard maxFolderBytes > 0 else { return true }
        guard bytes <= maxFolderBytes else {
            counts.withLock { $0.tooBig += 1 }
            return false
        }
        var deleted = 0
        folders.withLock { folders in
            if folders[folder] == nil { folders[folder] = index(folder) }
            var total = folders.values.reduce(0) { $0 + $1.reduce(0) { $0 + $1.bytes } }
            while total + bytes > maxFolderBytes {
                // The oldest pair of every folder written into.
                guard let (name, _) = folders.filter({ !$0.value.isEmpty }).min(by: { $0.value[0].order < $1.value[0].order }) else { break }
                let pair = folders[name]!.removeFirst()
                unlink(pair.image); unlink(pair.json)
                total -= pair.bytes
                deleted += 1
            }
        }
        if deleted > 0 { counts.withLock { $0.deleted += deleted } }
        return true
    }

    /// The pairs already in a folder (an earlier run's) that this pattern wrote, oldest first.
    private func index(_ folder: String) -> [Pair] {
        OwnedFiles.index(folder, stage: SnapshotRecord.stageName, pattern: pattern, fileKey: "image")
            .map { Pair(image: $0.file, json: $0.json, bytes: $0.bytes, order: $0.time) }
    }
}
