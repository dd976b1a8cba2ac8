/// `lenstrack tracker=iou`: the plainest tracker that keeps ids — each frame's detections paired
/// with the tracks by the overlap (IoU) of a detection and the track's last detected box, by the
/// Hungarian method (`Assignment`), one pass over all tracks, no motion model and no use of
/// scores (the detector's threshold decides what is an object).
///
/// A detection left over starts a tentative track, confirmed (and given its id) after
/// `minHits` detections on consecutive detector frames; a tentative track missed once is
/// dropped; a confirmed one missed for more than `maxAge` frames is forgotten. Until then a
/// missed track is reported where it was last seen. Tracks pair only with detections of their
/// own class unless `perClass` is off. Reads `matchIoU`, `minHits`, `maxAge` and `perClass`.
///
/// Without a motion model, an object whose box overlaps its last one by less than `matchIoU`
/// from one detector run to the next (a fast one, or a long detector interval) comes back as a
/// new track: this suits still or slow objects seen on every frame; bytetrack follows faster ones.
public final class IoUTracker: ObjectTracker {
    public static let name = "iou"
    public static let help = "plain IoU matching of each detection to a track's last box (reads match-iou, min-hits, max-age, per-class): no motion model, boxes stay where they were last seen"

    private struct Track {
        var id: Int            // -1 until confirmed
        var box: Box           // the last detection's box
        var labelId: Int
        var label: String
        var score: Double?
        var hits: Int
        var missed: Int        // frames since the last detection
        var confirmed: Bool { id >= 0 }
    }

    public var settings: TrackerSettings
    private var tracks: [Track] = []
    private var ids: TrackIds
    public var confirmedCount: Int { ids.given }

    public init(settings: TrackerSettings = TrackerSettings(), firstId: Int = 1) {
        self.settings = settings
        ids = TrackIds(first: firstId)
    }

    public var trackCount: Int { tracks.count }

    public func update(_ detections: [TrackerInput]) -> [TrackReport] {
        var pairedTrack = [Int?](repeating: nil, count: detections.count)
        var trackPaired = [Bool](repeating: false, count: tracks.count)
        if !tracks.isEmpty && !detections.isEmpty {
            let cost = tracks.map { track in
                detections.map { d -> Double in
                    // Above any allowed cost: a pair of two classes is never made.
                    if settings.perClass && track.labelId != d.labelId { return 2 }
                    return 1 - track.box.iou(d.box)
                }
            }
            for (t, d) in Assignment.solve(cost, maxCost: 1 - settings.matchIoU) {
                pairedTrack[d] = t
                trackPaired[t] = true
            }
        }
        for (d, t) in pairedTrack.enumerated() {
            guard let t else { continue }
            let det = detections[d]
            tracks[t].box = det.box
            tracks[t].label = det.label
            tracks[t].score = det.score
            tracks[t].hits += 1
            tracks[t].missed = 0
            if !tracks[t].confirmed && tracks[t].hits >= settings.minHits { confirm(t) }
        }
        var keep = [Bool](repeating: true, count: tracks.count)
        for t in tracks.indices where !trackPaired[t] {
            if tracks[t].confirmed {
                tracks[t].missed += 1
                keep[t] = tracks[t].missed <= settings.maxAge
            } else {
                keep[t] = false
            }
        }
        var newTrack = [Int: Int]()
        for d in detections.indices where pairedTrack[d] == nil {
            let det = detections[d]
            tracks.append(Track(id: -1, box: det.box, labelId: det.labelId, label: det.label, score: det.score, hits: 1, missed: 0))
            keep.append(true)
            newTrack[d] = tracks.count - 1
            if settings.minHits <= 1 { confirm(tracks.count - 1) }
        }
        var reports: [TrackReport] = []
        for d in detections.indices {
            guard let t = pairedTrack[d] ?? newTrack[d] else { continue }
            reports.append(report(tracks[t], detection: d))
        }
        for t in tracks.indices where keep[t] && tracks[t].confirmed && tracks[t].missed > 0 {
            reports.append(report(tracks[t], detection: nil))
        }
        tracks = tracks.indices.filter { keep[$0] }.map { tracks[$0] }
        return reports
    }

    /// Nothing moves: each track is where it was last detected. A track missed on the last
    /// detector frame ages by this frame too, as in bytetrack.
    public func predict() -> [(report: TrackReport, lastDetected: Box)] {
        for t in tracks.indices where tracks[t].missed > 0 { tracks[t].missed += 1 }
        tracks.removeAll { $0.confirmed && $0.missed > settings.maxAge }
        return tracks.map { (report($0, detection: nil), $0.box) }
    }

    public func forgetOutside(width: Double, height: Double) {
        tracks.removeAll { t in t.box.xMax <= 0 || t.box.yMax <= 0 || t.box.xMin >= width || t.box.yMin >= height }
    }

    private func confirm(_ t: Int) {
        tracks[t].id = ids.give()
    }

    private func report(_ track: Track, detection: Int?) -> TrackReport {
        TrackReport(id: track.id, box: track.box, labelId: track.labelId, label: track.label, score: track.score,
                    detection: detection, missed: track.missed)
    }
}
