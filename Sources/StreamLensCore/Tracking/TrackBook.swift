/// Where a tracker keeps a track's box from frame to frame: as it was last detected
/// (`LastDetectedBox`, the IoU tracker) or a motion model's estimate (`KalmanBox`, bytetrack).
public protocol TrackMotion: Sendable {
    /// A track starting at its first detection.
    init(_ box: Box)
    /// Where the track is now.
    var box: Box { get }
    /// A detection was paired with the track.
    mutating func update(_ box: Box)
    /// A frame passed; `holdingSize` when the track was missed on the last detector frame.
    mutating func predict(holdingSize: Bool)
}

extension KalmanBox: TrackMotion {}

/// Nothing moves between detections: the track is where it was last detected.
public struct LastDetectedBox: TrackMotion {
    public private(set) var box: Box
    public init(_ box: Box) { self.box = box }
    public mutating func update(_ box: Box) { self.box = box }
    public mutating func predict(holdingSize: Bool) {}
}

/// The tracks' lives, the same whatever pairs detections with tracks: a detection no track
/// takes may start a tentative track, confirmed (and given its id, `TrackIds`) after
/// `minHits` detections on consecutive detector frames; a tentative track missed once is
/// dropped; a confirmed one missed for more than `maxAge` frames is forgotten, and until then
/// reported where its motion puts it. This is `ObjectTracker`'s contract kept in one place.
public struct TrackBook<Motion: TrackMotion>: Sendable {
    public struct Track: Sendable {
        /// -1 until confirmed.
        public fileprivate(set) var id: Int
        public fileprivate(set) var motion: Motion
        public let labelId: Int
        public fileprivate(set) var label: String
        public fileprivate(set) var score: Double?
        public fileprivate(set) var hits = 1
        /// Detector frames since the last detection.
        public fileprivate(set) var missed = 0
        /// The last detection's own box, as it came.
        public fileprivate(set) var lastDetected: Box
        public var confirmed: Bool { id >= 0 }

        fileprivate init(_ detection: TrackerInput) {
            id = -1
            motion = Motion(detection.box)
            labelId = detection.labelId
            label = detection.label
            score = detection.score
            lastDetected = detection.box
        }
    }

    /// What a tracker's pairing found on a detector frame: `track[d]` is the index of the
    /// track detection d goes with (nil: none); `newcomers` the unpaired detections that start
    /// tracks.
    public struct Pairing {
        public var track: [Int?]
        public var newcomers: [Int]
        public init(track: [Int?], newcomers: [Int]) { self.track = track; self.newcomers = newcomers }
    }

    /// What the tracker is told; the book reads `minHits` and `maxAge`.
    public var settings: TrackerSettings
    public private(set) var tracks: [Track] = []
    private var ids: TrackIds
    public var confirmedCount: Int { ids.given }

    /// `firstId`: the first id given (ids then count up, never reused).
    public init(settings: TrackerSettings, firstId: Int) {
        self.settings = settings
        ids = TrackIds(first: firstId)
    }

    /// A frame the detector looked at: every track's motion moves on to this frame, `pair`
    /// says which detection goes with which track (seeing the tracks moved), then the tracks
    /// live or die as the type says. Returns `ObjectTracker.update`'s reports.
    public mutating func update(_ detections: [TrackerInput], pair: ([Track], TrackerSettings) -> Pairing) -> [TrackReport] {
        for i in tracks.indices { tracks[i].motion.predict(holdingSize: tracks[i].missed > 0) }
        let pairing = pair(tracks, settings)
        var keep = [Bool](repeating: false, count: tracks.count)
        for (d, t) in pairing.track.enumerated() {
            guard let t else { continue }
            let det = detections[d]
            tracks[t].motion.update(det.box)
            tracks[t].lastDetected = det.box
            tracks[t].label = det.label
            tracks[t].score = det.score
            tracks[t].hits += 1
            tracks[t].missed = 0
            keep[t] = true
            if !tracks[t].confirmed && tracks[t].hits >= settings.minHits { confirm(t) }
        }
        // Unpaired: tentative ones go, confirmed ones age.
        for t in tracks.indices where !keep[t] && tracks[t].confirmed {
            tracks[t].missed += 1
            keep[t] = tracks[t].missed <= settings.maxAge
        }
        var newTrack = [Int: Int]()
        for d in pairing.newcomers {
            tracks.append(Track(detections[d]))
            keep.append(true)
            newTrack[d] = tracks.count - 1
            if settings.minHits <= 1 { confirm(tracks.count - 1) }
        }
        var reports: [TrackReport] = []
        for d in detections.indices {
            guard let t = pairing.track[d] ?? newTrack[d] else { continue }
            reports.append(report(tracks[t], detection: d, box: detections[d].box))
        }
        for t in tracks.indices where keep[t] && tracks[t].confirmed && tracks[t].missed > 0 {
            reports.append(report(tracks[t], detection: nil, box: tracks[t].motion.box))
        }
        tracks = tracks.indices.filter { keep[$0] }.map { tracks[$0] }
        return reports
    }

    /// A frame the detector skipped: every track moves on; a track missed on the last detector
    /// frame ages by this frame too. Returns `ObjectTracker.predict`'s reports.
    public mutating func predict() -> [(report: TrackReport, lastDetected: Box)] {
        for t in tracks.indices {
            tracks[t].motion.predict(holdingSize: tracks[t].missed > 0)
            if tracks[t].missed > 0 { tracks[t].missed += 1 }
        }
        tracks.removeAll { $0.confirmed && $0.missed > settings.maxAge }
        return tracks.map { (report($0, detection: nil, box: $0.motion.box), $0.lastDetected) }
    }

    /// Drops the tracks whose box has left a frame of this size entirely.
    public mutating func forgetOutside(width: Double, height: Double) {
        tracks.removeAll { t in
            let b = t.motion.box
            return b.xMax <= 0 || b.yMax <= 0 || b.xMin >= width || b.yMin >= height
        }
    }

    private mutating func confirm(_ t: Int) {
        tracks[t].id = ids.give()
    }

    private func report(_ track: Track, detection: Int?, box: Box) -> TrackReport {
        TrackReport(id: track.id, box: box, labelId: track.labelId, label: track.label, score: track.score,
                    detection: detection, missed: track.missed)
    }
}

/// A tracker that keeps its tracks and settings in a `TrackBook` and decides only the pairing:
/// the rest of `ObjectTracker` comes from here.
public protocol BookKeepingTracker: ObjectTracker {
    associatedtype Motion: TrackMotion
    var book: TrackBook<Motion> { get set }
    init(book: TrackBook<Motion>)
    /// Which of a detector frame's detections goes with which of the tracks (moved on to
    /// this frame), and which start tracks.
    func pair(_ detections: [TrackerInput], with tracks: [TrackBook<Motion>.Track], settings: TrackerSettings) -> TrackBook<Motion>.Pairing
}

extension BookKeepingTracker {
    public init(settings: TrackerSettings = TrackerSettings(), firstId: Int = 1) {
        self.init(book: TrackBook(settings: settings, firstId: firstId))
    }
    public var settings: TrackerSettings {
        get { book.settings }
        set { book.settings = newValue }
    }
    public func update(_ detections: [TrackerInput]) -> [TrackReport] {
        book.update(detections) { pair(detections, with: $0, settings: $1) }
    }
    public func predict() -> [(report: TrackReport, lastDetected: Box)] { book.predict() }
    public func forgetOutside(width: Double, height: Double) { book.forgetOutside(width: width, height: height) }
    public var confirmedCount: Int { book.confirmedCount }
    public var trackCount: Int { book.tracks.count }
}
