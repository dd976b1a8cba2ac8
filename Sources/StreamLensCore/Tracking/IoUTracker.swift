/// `lenstrack tracker=iou`: the plainest tracker that keeps ids — each frame's detections paired
/// with the tracks by the overlap (IoU) of a detection and the track's last detected box, by the
/// Hungarian method (`Assignment`), one pass over all tracks, no motion model and no use of
/// scores (the detector's threshold decides what is an object).
///
/// Tracks start, are confirmed, age and are forgotten as `TrackBook` says (`minHits`, `maxAge`);
/// a missed track is reported where it was last seen. Tracks pair only with detections of their
/// own class unless `perClass` is off. Reads `matchIoU`, `minHits`, `maxAge` and `perClass`.
///
/// Without a motion model, an object whose box overlaps its last one by less than `matchIoU`
/// from one detector run to the next (a fast one, or a long detector interval) comes back as a
/// new track: this suits still or slow objects seen on every frame; bytetrack follows faster ones.
public final class IoUTracker: BookKeepingTracker {
    public static let name = "iou"
    public static let help = "plain IoU matching of each detection to a track's last box (reads match-iou, min-hits, max-age, per-class): no motion model, boxes stay where they were last seen"

    public var book: TrackBook<LastDetectedBox>
    public init(book: TrackBook<LastDetectedBox>) { self.book = book }

    public func pair(_ detections: [TrackerInput], with tracks: [TrackBook<LastDetectedBox>.Track], settings: TrackerSettings) -> TrackBook<LastDetectedBox>.Pairing {
        var pairedTrack = [Int?](repeating: nil, count: detections.count)
        if !tracks.isEmpty && !detections.isEmpty {
            let cost = tracks.map { track in
                detections.map { d -> Double in
                    // Above any allowed cost: a pair of two classes is never made.
                    if settings.perClass && track.labelId != d.labelId { return 2 }
                    return 1 - track.motion.box.iou(d.box)
                }
            }
            for (t, d) in Assignment.solve(cost, maxCost: 1 - settings.matchIoU) { pairedTrack[d] = t }
        }
        return .init(track: pairedTrack, newcomers: detections.indices.filter { pairedTrack[$0] == nil })
    }
}
