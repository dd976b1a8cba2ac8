/// A multi-object tracker as lenstrack holds it: detections in, the same objects' ids out, frame
/// after frame. Trackers are chosen by name (`lenstrack tracker=NAME`) from `TrackerRegistry`.
///
/// The contract lenstrack relies on:
/// - ids are given once a track is confirmed (after `settings.minHits` detections), count up
///   from `firstId` and are never reused; a tentative track reports id -1;
/// - `update` takes the detections of a frame the detector looked at and returns every track
///   paired on this frame (with the index of its detection), then the confirmed tracks missed
///   on it (detection nil, at the place the tracker expects them), until they are forgotten
///   (missed for more than `settings.maxAge` frames);
/// - `predict` is a frame the detector skipped (lensdetect `interval`): every track where the
///   tracker expects it now, with the box it was last detected at (which finds the held
///   detection that is this track's);
/// - `settings` may change between frames (lenstrack's live properties).
public protocol ObjectTracker: AnyObject, SendableMetatype {
    /// The name `lenstrack tracker=` takes.
    static var name: String { get }
    /// What it does, in a few words, for lenstrack's help text.
    static var help: String { get }

    init(settings: TrackerSettings, firstId: Int)
    var settings: TrackerSettings { get set }

    func update(_ detections: [TrackerInput]) -> [TrackReport]
    func predict() -> [(report: TrackReport, lastDetected: Box)]
    /// Drops the tracks whose box has left a frame of this size entirely.
    func forgetOutside(width: Double, height: Double)

    /// Ids given so far.
    var confirmedCount: Int { get }
    /// Tracks alive now, tentative and confirmed.
    var trackCount: Int { get }
}

/// The trackers this build knows, by the name `lenstrack tracker=` gives. A new tracker is one
/// file (a class conforming to `ObjectTracker`) plus its line here: Swift has no static
/// initialisers, so this list is where trackers are named once. The first is the default.
public enum TrackerRegistry {
    public static let trackers: [any ObjectTracker.Type] = [
        MultiObjectTracker.self,
        IoUTracker.self,
    ]

    public static var names: [String] { trackers.map { $0.name } }

    /// The tracker named `name`, nil when there is none.
    public static func tracker(named name: String) -> (any ObjectTracker.Type)? {
        trackers.first { $0.name == name }
    }
}

/// What a tracker is told. Not every tracker reads every field: each says which it uses.
public struct TrackerSettings: Sendable, Equatable {
    /// bytetrack: detections scoring at least `highScore` are matched first and may start
    /// tracks; weaker ones down to `lowScore` only continue tracks.
    public var highScore = 0.5, lowScore = 0.1
    /// Minimum IoU between a track's box and a detection to pair them; bytetrack's weak
    /// detections need `lowMatchIoU` (a closer fit).
    public var matchIoU = 0.2, lowMatchIoU = 0.5
    /// A track is confirmed (gets its id) after `minHits` detections, and lives on `maxAge`
    /// frames without one, then is forgotten.
    public var minHits = 3, maxAge = 30
    /// A track pairs only with detections of its own label.
    public var perClass = true
    public init() {}
}

/// A detection as a tracker takes it.
public struct TrackerInput: Sendable, Equatable {
    public var box: Box
    public var score: Double?
    public var labelId: Int
    public var label: String
    public init(box: Box, score: Double?, labelId: Int, label: String) {
        self.box = box; self.score = score; self.labelId = labelId; self.label = label
    }
}

/// One track as the caller sees it after a frame.
public struct TrackReport: Sendable, Equatable {
    /// Its id once confirmed, -1 while tentative.
    public var id: Int
    public var box: Box
    public var labelId: Int
    public var label: String
    public var score: Double?
    /// The index of the detection it was paired with on this frame; nil when it was not
    /// (the box is where the tracker expects it).
    public var detection: Int?
    /// Frames since its last detection (0: detected on this frame).
    public var missed: Int
    public init(id: Int, box: Box, labelId: Int, label: String, score: Double?, detection: Int?, missed: Int) {
        self.id = id; self.box = box; self.labelId = labelId; self.label = label; self.score = score
        self.detection = detection; self.missed = missed
    }
}

/// The ids a tracker gives its confirmed tracks: counting up from the first, never reused.
public struct TrackIds: Sendable {
    private var next: Int
    /// Ids given so far (tracks confirmed).
    public private(set) var given = 0
    public init(first: Int) { next = first }
    /// The id of a track confirmed now.
    public mutating func give() -> Int {
        defer { next += 1; given += 1 }
        return next
    }
}
