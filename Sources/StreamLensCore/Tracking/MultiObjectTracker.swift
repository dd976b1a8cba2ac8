/// Multi-object tracking in the manner of ByteTrack (Zhang et al. 2022) on SORT's filter: each
/// track a constant-velocity Kalman filter of its box (`KalmanBox`); detections paired with
/// tracks by IoU with the Hungarian method (`Assignment`) in passes —
///   1. detections scoring at least `highScore` against the confirmed tracks (found on the last
///      frame or lost for a while),
///   2. the remaining detections scoring at least `lowScore` against the confirmed tracks still
///      unpaired that were found on the last frame (a partly hidden object's weak detection
///      keeps its track; ByteTrack's point),
///   3. the remaining strong detections against the tentative tracks;
/// strong detections left over start tentative tracks, which become confirmed (and get their
/// id) after `minHits` detections; a tentative track missed once is dropped; a confirmed one
/// missed for more than `maxAge` frames is forgotten. Tracks pair only with detections of their
/// own class unless `perClass` is off.
///
/// Frames come in two kinds: `update` with the detector's results of this frame, and `predict`
/// for a frame the detector did not look at (lensdetect `interval`): every track moves on by
/// its velocity.
public final class MultiObjectTracker: ObjectTracker {
    public typealias Settings = TrackerSettings
    public typealias Report = TrackReport
    public typealias Input = TrackerInput

    public static let name = "bytetrack"
    public static let help = "ByteTrack's two passes by score (high-score, low-score) on a Kalman filter per track: boxes move on between detector runs and through short occlusions"

    struct Track {
        var id: Int            // -1 until confirmed
        var filter: KalmanBox
        var labelId: Int
        var label: String
        var score: Double?
        var hits: Int
        var missed: Int        // frames since the last detection
        var lastDetected: Box  // the detection's own box, as it came
        var confirmed: Bool { id >= 0 }
    }

    public var settings: Settings
    private var tracks: [Track] = []
    private var ids: TrackIds
    public var confirmedCount: Int { ids.given }

    /// `firstId`: the first id given (ids then count up, never reused).
    public init(settings: Settings = Settings(), firstId: Int = 1) {
        self.settings = settings
        ids = TrackIds(first: firstId)
    }

    public var trackCount: Int { tracks.count }

    /// A frame the detector looked at: its detections (any order). Returns every track that is
    /// confirmed or was paired on this frame, in the order of the detections first, then the
    /// confirmed tracks that were missed (at their predicted places).
    public func update(_ detections: [Input]) -> [Report] {
        for i in tracks.indices { tracks[i].filter.predict(holdingSize: tracks[i].missed > 0) }
        let score = { (d: Input) in d.score ?? 1 }
        let strong = detections.indices.filter { score(detections[$0]) >= settings.highScore }
        let weak = detections.indices.filter { score(detections[$0]) < settings.highScore && score(detections[$0]) >= settings.lowScore }
        var pairedTrack = [Int?](repeating: nil, count: detections.count)
        var trackPaired = [Bool](repeating: false, count: tracks.count)

        func associate(_ candidates: [Int], _ trackIndices: [Int], minIoU: Double) -> [Int] {
            guard !candidates.isEmpty, !trackIndices.isEmpty else { return candidates }
            let cost = trackIndices.map { t in
                candidates.map { d -> Double in
                    let track = tracks[t], det = detections[d]
                    if settings.perClass && track.labelId != det.labelId { return 2 }
                    return 1 - track.filter.box.iou(det.box)
                }
            }
            var left = Set(candidates)
            for (row, column) in Assignment.solve(cost, maxCost: 1 - minIoU) {
                let t = trackIndices[row], d = candidates[column]
                pairedTrack[d] = t
                trackPaired[t] = true
                left.remove(d)
            }
            return candidates.filter { left.contains($0) }
        }

        let confirmed = tracks.indices.filter { tracks[$0].confirmed }
        let strongLeft = associate(strong, confirmed, minIoU: settings.matchIoU)
        _ = associate(weak, confirmed.filter { !trackPaired[$0] && tracks[$0].missed == 0 }, minIoU: settings.lowMatchIoU)
        let tentative = tracks.indices.filter { !tracks[$0].confirmed }
        let newcomers = associate(strongLeft, tentative, minIoU: settings.matchIoU)

        // Paired tracks take their detection.
        for (d, t) in pairedTrack.enumerated() {
            guard let t else { continue }
            let det = detections[d]
            tracks[t].filter.update(det.box)
            tracks[t].hits += 1
            tracks[t].missed = 0
            tracks[t].lastDetected = det.box
            tracks[t].score = det.score
            tracks[t].label = det.label
            if !tracks[t].confirmed && tracks[t].hits >= settings.minHits { confirm(t) }
        }
        // Unpaired: tentative ones go, confirmed ones age.
        var keep = [Bool](repeating: true, count: tracks.count)
        for t in tracks.indices where !trackPaired[t] {
            if !tracks[t].confirmed { keep[t] = false } else { tracks[t].missed += 1; if tracks[t].missed > settings.maxAge { keep[t] = false } }
        }
        // New tentative tracks (confirmed at once when one hit is enough).
        var newTrack = [Int: Int]()
        for d in newcomers {
            let det = detections[d]
            tracks.append(Track(id: -1, filter: KalmanBox(det.box), labelId: det.labelId, label: det.label, score: det.score,
                                hits: 1, missed: 0, lastDetected: det.box))
            keep.append(true)
            newTrack[d] = tracks.count - 1
            if settings.minHits <= 1 { confirm(tracks.count - 1) }
        }
        var reports: [Report] = []
        for d in detections.indices {
            guard let t = pairedTrack[d] ?? newTrack[d] else { continue }
            reports.append(report(tracks[t], detection: d, box: detections[d].box))
        }
        for t in tracks.indices where keep[t] && tracks[t].confirmed && tracks[t].missed > 0 {
            reports.append(report(tracks[t], detection: nil, box: tracks[t].filter.box))
        }
        tracks = tracks.indices.filter { keep[$0] }.map { tracks[$0] }
        return reports
    }

    /// A frame the detector did not look at: every track moves by its velocity. Returns the
    /// confirmed tracks and the tentative ones found on the last detector frame, at their
    /// predicted places, with the box each was last detected at (to find the held detection
    /// that is this track's).
    public func predict() -> [(report: Report, lastDetected: Box)] {
        for i in tracks.indices { tracks[i].filter.predict(holdingSize: tracks[i].missed > 0) }
        var out: [(Report, Box)] = []
        for t in tracks.indices {
            tracks[t].missed += tracks[t].missed > 0 ? 1 : 0
            if tracks[t].confirmed && tracks[t].missed > settings.maxAge { continue }
            out.append((report(tracks[t], detection: nil, box: tracks[t].filter.box), tracks[t].lastDetected))
        }
        tracks.removeAll { $0.confirmed && $0.missed > settings.maxAge }
        return out
    }

    /// Drops the tracks whose predicted box has left the frame entirely.
    public func forgetOutside(width: Double, height: Double) {
        tracks.removeAll { t in
            let b = t.filter.box
            return b.xMax <= 0 || b.yMax <= 0 || b.xMin >= width || b.yMin >= height
        }
    }

    private func confirm(_ t: Int) {
        tracks[t].id = ids.give()
    }

    private func report(_ track: Track, detection: Int?, box: Box) -> Report {
        Report(id: track.id, box: box, labelId: track.labelId, label: track.label, score: track.score, detection: detection,
               missed: track.missed)
    }
}
