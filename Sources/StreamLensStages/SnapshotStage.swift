import Foundation
import StreamLensCore
import StreamLensGst

/// `lenssnapshot`: on an event — a new tracked object, a zone event, a label appearing, or every
/// `interval` seconds of stream time — writes the frame, or the region's crop, as a JPEG with a
/// JSON file beside it (time, ids, boxes), under a rate limit (`min-gap`) and a folder limit
/// (`max-folder-bytes`). Frames go on unchanged; encoding and writing happen off the worker.
///
///     streamlens run 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! lensdetect model=Models/face-full-range.json draw=false ! lenstrack ! lenssnapshot on=track what=crop path=faces/%Y%m%d-%H%M%S-{id}.jpg ! fakesink'
///
/// Rules (README, "Snapshots"):
/// - `track`: a region whose object id (≥ 0) this stage has not seen before; `zone`: each frame
///   event (lenszone's crossed, entered, left; `zone-events` chooses); `label`: a label on this
///   frame that the previous frame did not have (its most confident region); `interval`: the
///   first frame, then the first frame at or after each further multiple of `interval` seconds
///   from it (30 frames at 10 fps with interval=1: frames 0, 10, 20 — three snapshots).
/// - `what=frame`: at most one picture a frame, whatever and however many triggers; `what=crop`:
///   one picture per triggering region, its box grown by `margin`, clamped to the frame. A
///   trigger about no region (interval on a frame with no region; a zone event whose object is
///   not on the frame) writes the full frame; interval crops every region on the frame.
/// - `min-gap`: seconds of stream time between two snapshot moments of the same object (crops of
///   a tracked object) or of the frame (everything else); all snapshots of one frame go.
public final class SnapshotStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lenssnapshot",
        summary: "Write the frame or a region's crop as JPEG (with its JSON beside it) on a new track, a zone event, a label appearing or every N seconds; rate and folder size limited",
        example: "videotestsrc num-buffers=20 ! video/x-raw,width=160,height=120,framerate=10/1 ! videoconvert ! video/x-raw,format=BGRx ! lenssnapshot on=interval interval=1 path=/tmp/streamlens-snapshots/%Y%m%d-%H%M%S-{n}.jpg max-folder-bytes=200000 ! fakesink",
        sinkCaps: RegionPainter.sinkCaps,
        placement: .inLine,
        properties: Settings.table)

    public struct Settings: StageSettings {
        public var on = "track"
        public var zoneEvents = ""
        public var labels = ""
        public var interval = 10.0
        public var what = What.frame
        public var margin = 0.15
        public var path = "snapshots/%Y%m%d-%H%M%S-{frame}-{id}.jpg"
        public var quality = 85
        public var minGap = 0.0
        /// A string, not an int: GObject int properties stop at 2^31 (2 GB), and 500M reads better.
        public var maxFolderBytes = "0"
        public enum What: String, Sendable, CaseIterable { case frame, crop }
        public init() {}

        public static let properties: [Property<Settings>] = [
            .string("on", \.on,
                    help: "what triggers a snapshot, comma-separated: track (an object id not seen before), zone (a frame event: lenszone's), label (a label the previous frame did not have), interval (every interval seconds)"),
            .string("zone-events", \.zoneEvents, help: "on=zone: only these event types, comma-separated: crossed, entered, left (empty: all)"),
            LabelFilter.property(\.labels, "only regions with these labels trigger and are cropped", live: false),
            .double("interval", \.interval, 0.01...86_400,
                    help: "on=interval: seconds of stream time between snapshots (the first frame, then every interval from it)"),
            .choice("what", \.what,
                    help: "frame: the whole frame; crop: the triggering region's box grown by margin (the frame when a trigger has no region)"),
            .double("margin", \.margin, 0...2, help: "what=crop: grow the box by this fraction of its larger side on every side (clamped to the frame)"),
            .string("path", \.path,
                    help: "file pattern: strftime fields (local wall-clock time) and {frame}, {id} (object id, untracked, or frame), {label}, {event}, {n} (counter); folders are made; an existing file is never overwritten (-2, -3… added)"),
            .int("quality", \.quality, 1...100, help: "JPEG quality (jpegenc's)"),
            .double("min-gap", \.minGap, 0...86_400,
                    help: "seconds of stream time between snapshots of one object (crops) or of the frame; those suppressed are counted (0: no limit)"),
            .string("max-folder-bytes", \.maxFolderBytes,
                    help: "bytes (or 500K, 200M, 2G: powers of 1000) this stage's snapshots (JPEG + JSON, with this path pattern) may take in the folders it writes into: the oldest pairs are deleted to make room; other files are never counted nor touched (0: no limit)"),
            .reading("snapshots", help: "snapshots written so far"),
        ]
    }

    enum Trigger: String, CaseIterable, Comparable {
        case track, zone, label, interval
        static func < (a: Trigger, b: Trigger) -> Bool { allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)! }
    }
    static let zoneEventTypes = ["crossed", "entered", "left"]

    /// The settings checked and decoded, at start.
    struct Snapping {
        /// The settings as given; what they say that needs checking or decoding follows.
        let given: Settings
        var triggers: Set<Trigger>
        var zoneEvents: Set<String>?
        var labels: LabelFilter
        var pattern: FilePattern
        var maxFolderBytes: Int
        var crop: Bool { given.what == .crop }
        var intervalNanoseconds: UInt64 { UInt64((given.interval * 1e9).rounded()) }
        var minGapNanoseconds: UInt64 { UInt64((given.minGap * 1e9).rounded()) }

        init(_ settings: Settings) throws {
            given = settings
            let on = commaList(settings.on)
            guard !on.isEmpty else { throw StageError("property on is empty: name one or more of \(Trigger.allCases.map(\.rawValue).joined(separator: ", "))") }
            triggers = []
            for name in on {
                guard let t = Trigger(rawValue: name) else {
                    throw StageError("property on=\(settings.on): '\(name)' is not a trigger; the triggers are \(Trigger.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                triggers.insert(t)
            }
            let events = commaList(settings.zoneEvents)
            for e in events where !Self.zoneEventTypesContain(e) {
                throw StageError("property zone-events=\(settings.zoneEvents): '\(e)' is not an event type; they are \(SnapshotStage.zoneEventTypes.joined(separator: ", "))")
            }
            if !events.isEmpty && !triggers.contains(.zone) {
                throw StageError("property zone-events is for on=zone (on=\(settings.on))")
            }
            zoneEvents = events.isEmpty ? nil : Set(events)
            labels = LabelFilter(text: settings.labels)
            pattern = try FilePattern(settings.path, property: "path", extensions: ["jpg", "jpeg"], fields: ["frame", "id", "label", "event", "n"],
                                      example: "snapshots/%Y%m%d-%H%M%S-{id}.jpg")
            maxFolderBytes = try Self.bytes(settings.maxFolderBytes)
        }

        /// "20000", "500K", "200M", "2G" (powers of 1000).
        static func bytes(_ text: String, property: String = "max-folder-bytes") throws -> Int {
            let t = text.trimmingCharacters(in: .whitespaces).uppercased()
            let scale: [Character: Double] = ["K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12]
            let (digits, factor) = t.last.flatMap { scale[$0] }.map { (String(t.dropLast()), $0) } ?? (t, 1)
            guard let v = Double(digits), v.isFinite, v >= 0, v * factor < 1e18 else {
                throw StageError("property \(property)=\(text) is not a size: write bytes, or a number with K, M or G (e.g. 500M); 0 for no limit")
            }
            return Int((v * factor).rounded())
        }

        private static func zoneEventTypesContain(_ e: String) -> Bool { SnapshotStage.zoneEventTypes.contains(e) }
    }

    private let settings: Snapping
    private let writer: SnapshotWriter
    /// Object ids seen (on=track): ids are never reused by lenstrack, so a set of them is all it
    /// takes (8 bytes an object for the run).
    private var seenIds = Set<Int>()
    private var previousLabels = Set<String>()
    /// on=interval: the stream time of the next snapshot (nil until the first frame).
    private var nextInterval: UInt64?
    /// min-gap: the stream time of the last snapshot moment, by key ("frame", "id N").
    private var lastShot: [String: UInt64] = [:]
    private var suppressed = 0
    private var submitted = 0
    private var taken: [FrameEvent] = []
    private var framerate: Double = 0
    private var ended = false
    private var unfinished = false

    public init(settings: Settings) throws {
        self.settings = try Snapping(settings)
        // The folder the first snapshot would go into is made now, so a path that cannot be
        // written stops the run at start, with its reason (later ones, with strftime fields in
        // the folders, are made when written into; a failure then is a warning and counted).
        let sample = self.settings.pattern.expand(["frame": "0", "id": "frame", "label": "frame", "event": "interval", "n": "1"], at: Date())
        let folder = Folders.folder(sample)
        if let problem = Folders.make(folder) { throw StageError("property path=\(self.settings.pattern.text): \(problem)") }
        guard access(folder.isEmpty ? "." : folder, W_OK) == 0 else {
            throw StageError("property path=\(self.settings.pattern.text): cannot write in folder \(folder.isEmpty ? "." : folder) (\(String(cString: strerror(errno))))")
        }
        // One picture encoded now, before frames flow: a missing jpegenc stops the run at start
        // with its reason (and the plugin is loaded before the first snapshot).
        do {
            _ = try JPEGEncoder.encode(pixels: [UInt8](repeating: 128, count: 16 * 16 * 4), pixelFormat: "BGRx", width: 16, height: 16,
                                       quality: self.settings.given.quality)
        } catch {
            throw StageError("cannot encode JPEG pictures: \(error)")
        }
        writer = SnapshotWriter(quality: self.settings.given.quality, maxFolderBytes: self.settings.maxFolderBytes, pattern: self.settings.pattern.text)
    }

    public func formatChanged(_ format: VideoFormat) throws {
        framerate = format.framerate.denominator > 0 ? Double(format.framerate.numerator) / Double(format.framerate.denominator) : 0
    }

    /// One picture to take: a region's crop (region nil: the frame), why, the zone events.
    private struct Shot {
        var region: RegionOfInterest?
        var triggers: Set<Trigger>
        var events: [FrameEvent] = []
        var key: String
        /// The labels of the regions that triggered it (a frame's {label}).
        var labels: Set<String> = []
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        let all = frame.pixels.regionsOfInterest()
        let regions = all.filter { settings.labels.admits($0.label) }
        let now = time(of: frame)
        var shots: [Shot] = []
        func add(_ region: RegionOfInterest?, _ trigger: Trigger, event: FrameEvent? = nil) {
            let source = region
            let region = settings.crop ? region : nil
            // One shot per object (crops) or per frame: triggers on the same one add up.
            let key = region.map { $0.objectId >= 0 ? "id \($0.objectId)" : "box \($0.x),\($0.y),\($0.width),\($0.height)" } ?? "frame"
            if let i = shots.firstIndex(where: { $0.key == key }) {
                shots[i].triggers.insert(trigger)
                if let event { shots[i].events.append(event) }
                if let source { shots[i].labels.insert(source.label) }
            } else {
                shots.append(Shot(region: region, triggers: [trigger], events: event.map { [$0] } ?? [], key: key,
                                  labels: source.map { [$0.label] } ?? []))
            }
        }
        if settings.triggers.contains(.track) {
            for r in regions where r.objectId >= 0 && seenIds.insert(r.objectId).inserted { add(r, .track) }
        }
        if settings.triggers.contains(.zone) {
            for e in frame.pixels.events() where settings.zoneEvents?.contains(e.type) ?? true {
                add(e.objectId >= 0 ? regions.first { $0.objectId == e.objectId } : nil, .zone, event: e)
            }
        }
        if settings.triggers.contains(.label) {
            let labels = Set(regions.map(\.label))
            for label in labels.subtracting(previousLabels).sorted() {
                add(regions.filter { $0.label == label }.max { ($0.confidence ?? 0) < ($1.confidence ?? 0) }, .label)
            }
            previousLabels = labels
        }
        // Time that went back (a new segment, a looped file) before the last interval snapshot
        // starts the grid afresh, rather than waiting for the old times to come again.
        if let next = nextInterval, now + settings.intervalNanoseconds < next { nextInterval = nil }
        if settings.triggers.contains(.interval), now >= (nextInterval ?? now) {
            // The next multiple of the interval after now, from the first frame's time: the grid
            // does not drift, and a gap in the stream gives one snapshot, not a burst.
            let start = nextInterval ?? now, step = max(1, settings.intervalNanoseconds)
            nextInterval = start + ((now - start) / step + 1) * step
            if settings.crop && !regions.isEmpty { regions.forEach { add($0, .interval) } } else { add(nil, .interval) }
        }
        guard !shots.isEmpty else { return .forward }

        // min-gap, by key: every shot of this frame goes or none of that key's.
        let allowed = shots.filter { shot in
            let key = shot.region.map { $0.objectId >= 0 ? "id \($0.objectId)" : "frame" } ?? "frame"
            // (A time before the last one: time went back, the gap starts afresh.)
            if let last = lastShot[key], now > last, now < last + settings.minGapNanoseconds {
                suppressed += 1
                return false
            }
            lastShot[key] = now
            return true
        }
        // Objects long gone keep no entry (a busy camera sees thousands of ids).
        if lastShot.count > 4096 { lastShot = lastShot.filter { now < $0.value || now - $0.value < settings.minGapNanoseconds } }
        let wall = Date()
        for shot in allowed { take(shot, frame: frame, regions: all, wall: wall) }
        return .forward
    }

    private func take(_ shot: Shot, frame: Frame, regions: [RegionOfInterest], wall: Date) {
        let f = frame.format
        let bpp = f.pixelFormat.count == 3 ? 3 : 4
        var rect = SnapshotRecord.Rect(x: 0, y: 0, width: f.width, height: f.height)
        var isCrop = false
        if let r = shot.region {
            let grow = settings.given.margin * max(r.width, r.height)
            let x0 = max(0, Int((r.x - grow).rounded(.down))), y0 = max(0, Int((r.y - grow).rounded(.down)))
            let x1 = min(f.width, Int((r.x + r.width + grow).rounded(.up))), y1 = min(f.height, Int((r.y + r.height + grow).rounded(.up)))
            // A box wholly outside the frame (a prediction gone past the edge): the frame instead.
            if x1 - x0 >= 2 && y1 - y0 >= 2 {
                rect = SnapshotRecord.Rect(x: x0, y: y0, width: x1 - x0, height: y1 - y0)
                isCrop = true
            }
        }
        let rowBytes = rect.width * bpp, stride = f.strides[0]
        var pixels = [UInt8](repeating: 0, count: rowBytes * rect.height)
        frame.pixels.withBytes { bytes in
            pixels.withUnsafeMutableBytes { out in
                for y in 0..<rect.height {
                    let from = f.offsets[0] + (rect.y + y) * stride + rect.x * bpp
                    guard from + rowBytes <= bytes.count else { return }
                    out.baseAddress!.advanced(by: y * rowBytes).copyMemory(from: bytes.baseAddress!.advanced(by: from), byteCount: rowBytes)
                }
            }
        }
        submitted += 1
        let triggers = shot.triggers.sorted()
        let event = triggers.map { t in
            t == .zone ? Array(Set(shot.events.map(\.type))).sorted().joined(separator: "+") : t.rawValue
        }.joined(separator: "+")
        let region = isCrop ? shot.region : nil
        let label = region?.label ?? (shot.labels.isEmpty ? "frame" : shot.labels.sorted().joined(separator: "+"))
        let id = region.map { $0.objectId >= 0 ? String($0.objectId) : "untracked" } ?? "frame"
        let path = settings.pattern.expand(["frame": String(frame.index), "id": id, "label": label, "event": event, "n": String(submitted)], at: wall)
        let record = SnapshotRecord(pattern: settings.pattern.text, trigger: triggers.map(\.rawValue),
                                    events: shot.events.isEmpty ? nil : shot.events, frame: frame.index,
                                    time: frame.pts.map { Double($0) / 1e9 }, wallTime: Self.iso8601(wall),
                                    width: f.width, height: f.height, crop: isCrop ? rect : nil,
                                    objectId: region?.objectId, detections: regions.map(MetadataRecord.Region.init))
        // Live (the frame has an age): 4 waiting at most; a file: up to 256 MB (SnapshotWriter).
        if writer.submit(.init(pixels: pixels, pixelFormat: f.pixelFormat, width: rect.width, height: rect.height, path: path, record: record),
                         live: frame.ageOnArrival != nil) {
            taken.append(FrameEvent(type: "snapshot", zone: "", objectId: region?.objectId ?? -1, label: label,
                                    time: frame.pts.map { Double($0) / 1e9 }, path: path))
        }
    }

    public func takeEvents() -> [FrameEvent] {
        defer { taken = [] }
        return taken
    }

    /// Local time with its offset and milliseconds: 2026-12-02T09:15:03.250+01:00.
    static func iso8601(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.timeZone = TimeZone.current
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: date)
    }

    /// Nanoseconds of stream time: the presentation time, else the frame's index at the
    /// negotiated rate (30 frames a second when the caps say none).
    private func time(of frame: Frame) -> UInt64 {
        if let pts = frame.pts { return pts }
        return UInt64(Double(frame.index) / (framerate > 0 ? framerate : 30) * 1e9)
    }

    public func streamEnded() {
        guard !ended else { return }
        ended = true
        // Every snapshot promised is on disk when the run ends (bounded: a disk that hangs
        // does not hold the end of the run for ever; the summary says so).
        unfinished = !writer.finish()
    }

    public var readings: [String: String] { ["snapshots": String(writer.snapshot.written)] }

    public func takeNotices() -> [StageNotice] { writer.takeNotices() }

    public var summary: String? {
        let c = writer.snapshot
        var text = String(format: "%d snapshots written (%.2f MB), %d suppressed by min-gap, %d skipped (busy), %d deleted for max-folder-bytes",
                          c.written, Double(c.bytes) / 1e6, suppressed, c.skippedBusy, c.deleted)
        if c.tooBig > 0 { text += ", \(c.tooBig) larger than max-folder-bytes on their own (not written)" }
        if c.failed > 0 { text += ", \(c.failed) failed" }
        if unfinished && c.leftAtEnd > 0 { text += ", \(c.leftAtEnd) still being written at the end (given up)" }
        return text
    }
}
