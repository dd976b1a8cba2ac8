/// Multi-object tracking in the manner of ByteTrack (Zhang et al. 2022) on SORT's filter: each
/// track a constant-velocity Kalman filter of its box (`KalmanBox`); detections paired with
/// tracks by IoU with the Hungarian method (`Assignment`) in passes —
///   1. detections scoring at least `highScore` against the confirmed tracks (found on the last
///      frame or lost for a while),
///   2. the remaining detections scoring at least `lowScore` against the confirmed tracks still
///      unpaired that were found on the last frame (a partly hidden object's weak detection
///      keeps its track; ByteTrack's point),
///   3. the remaining strong detections against the tentative tracks;
/// strong detections left over start tentative tracks, which are confirmed, age and are
/// forgotten as `TrackBook` says (`minHits`, `maxAge`). Tracks pair only with detections of
/// their own class unless `perClass` is off.
///
/// Frames come in two kinds: `update` with the detector's results of this frame, and `predict`
/// for a frame the detector did not look at (lensdetect `interval`): every track moves on by
/// its velocity.
public final class MultiObjectTracker: BookKeepingTracker {
    public typealias Settings = TrackerSettings
    public typealias Report = TrackReport
    public typealias Input = TrackerInput

    public static let name = "bytetrack"
    public static let help = "ByteTrack's two passes by score (high-score, low-score) on a Kalman filter per track: boxes move on between detector runs and through short occlusions"

    public var book: TrackBook<KalmanBox>
    public init(book: TrackBook<KalmanBox>) { self.book = book }

    /// ByteTrack's passes over a detector frame's detections, the tracks moved on by their
    /// filters; strong detections left over start tracks.
    public func pair(_ detections: [Input], with tracks: [TrackBook<KalmanBox>.Track], settings: TrackerSettings) -> TrackBook<KalmanBox>.Pairing {
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
                    return 1 - track.motion.box.iou(det.box)
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

        return .init(track: pairedTrack, newcomers: newcomers)
    }
}
