/// How overlapping detections of the same object become one. Boxes of different classes never
/// suppress each other (a person on a bicycle is two objects) unless `classAgnostic` says so.
public struct SuppressionOptions: Sendable, Codable, Equatable {
    public enum Method: String, Sendable, Codable, CaseIterable {
        /// Average the overlapping group, weighted by score (steadier boxes from frame to frame).
        case weighted
        /// Keep the best of each overlapping group, drop the rest.
        case nms
        /// Keep everything (sorted by score, capped by `maxDetections` and `candidateLimit`).
        case none
    }

    public var method: Method
    /// Detections overlapping the group's best by more than this IoU join its group.
    public var iouThreshold: Double
    /// At most this many results, best first; nil for no limit.
    public var maxDetections: Int?
    /// Whether boxes of different classes suppress each other too (one box per object whatever
    /// its class; default false: per class).
    public var classAgnostic: Bool

    /// Candidates considered per frame, best first: grouping compares every candidate with each
    /// kept one, so its cost grows with the square of their number, and an answer (a remote
    /// server's above all) may score every cell of a map above the threshold: CenterFace's
    /// 96x160 heatmap is 15,360 candidates, 236 million overlap tests, seconds a frame. The
    /// shipped detectors' real frames give tens; 2,048 bounds a frame's grouping to ~4 million.
    public static let candidateLimit = 2048

    public init(method: Method = .weighted, iouThreshold: Double = 0.3, maxDetections: Int? = nil, classAgnostic: Bool = false) {
        self.method = method
        self.iouThreshold = iouThreshold
        self.maxDetections = maxDetections
        self.classAgnostic = classAgnostic
    }

    enum CodingKeys: String, CodingKey {
        case method
        case iouThreshold = "iou_threshold"
        case maxDetections = "max_detections"
        case classAgnostic = "class_agnostic"
    }

    /// Every key may be left out: weighted, 0.3, no limit, per class.
    public init(from decoder: any Decoder) throws {
        self = try Self(from: decoder, defaults: SuppressionOptions())
    }

    /// The keys given, the family's `defaults` for the others (a YOLO manifest that only sets
    /// `iou_threshold` keeps YOLO's nms, not the BlazeFace-era weighted default).
    public init(from decoder: any Decoder, defaults: SuppressionOptions) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        method = try c.decodeIfPresent(Method.self, forKey: .method) ?? defaults.method
        iouThreshold = try c.decodeIfPresent(Double.self, forKey: .iouThreshold) ?? defaults.iouThreshold
        maxDetections = try c.decodeIfPresent(Int.self, forKey: .maxDetections) ?? defaults.maxDetections
        classAgnostic = try c.decodeIfPresent(Bool.self, forKey: .classAgnostic) ?? defaults.classAgnostic
    }

    /// What JSON types cannot rule out.
    public func validate() throws {
        guard iouThreshold >= 0, iouThreshold <= 1 else {
            throw StageError("decoder: suppression iou_threshold \(iouThreshold) is outside 0…1")
        }
    }
}

extension KeyedDecodingContainer {
    /// A family's `suppression` block: absent, the family's `defaults`; keys left out, theirs.
    func decodeSuppression(forKey key: Key, defaults: SuppressionOptions) throws -> SuppressionOptions {
        guard contains(key) else { return defaults }
        return try SuppressionOptions(from: try superDecoder(forKey: key), defaults: defaults)
    }
}

/// Merges or drops overlapping detections. The result comes in the order of each group's best
/// detection (so `maxDetections` keeps the groups with the strongest evidence).
///
/// `weighted` is the iOS app's "average maximum suppression": take the best remaining
/// detection, gather every remaining one (itself included) whose IoU with it is above the
/// threshold and remove them all; a group of one is kept as it is, a larger group becomes one
/// detection whose box corners and keypoints are the score-weighted means of the group's, whose
/// score is the plain mean of the group's scores and whose label is the best one's.
/// (MediaPipe's C++ `WEIGHTED` keeps the best score instead. The mean never falls below the
/// decoder's `min_score`, since every member passed it.)
///
/// `nms` is plain greedy non-maximum suppression.
///
/// Groups form within a class (same `labelId`) unless `classAgnostic`: one mechanism for every
/// family, so a multi-class detector's overlapping car and person both survive.
public func suppress(_ detections: [Detection], _ options: SuppressionOptions) -> [Detection] {
    let limit = max(0, options.maxDetections ?? Int.max)
    // Stable sort, so equal scores keep the decoder's (anchor) order; the best
    // `candidateLimit` go on.
    var remaining = detections.enumerated()
        .sorted { $0.element.score > $1.element.score || ($0.element.score == $1.element.score && $0.offset < $1.offset) }
        .prefix(SuppressionOptions.candidateLimit)
        .map(\.element)
    var kept: [Detection] = []
    func overlaps(_ candidate: Detection, _ best: Detection) -> Bool {
        (options.classAgnostic || candidate.labelId == best.labelId) && candidate.box.iou(best.box) > options.iouThreshold
    }

    switch options.method {
    case .none:
        return Array(remaining.prefix(limit))
    case .nms:
        while let best = remaining.first, kept.count < limit {
            kept.append(best)
            remaining = remaining.dropFirst().filter { !overlaps($0, best) }
        }
    case .weighted:
        while let best = remaining.first, kept.count < limit {
            var group = [best]
            var rest: [Detection] = []
            for candidate in remaining.dropFirst() {
                if overlaps(candidate, best) { group.append(candidate) } else { rest.append(candidate) }
            }
            remaining = rest
            kept.append(group.count == 1 ? best : weightedMean(group))
        }
    }
    return kept
}

/// Score-weighted mean of box corners and keypoints, plain mean of scores; `group[0]` is the
/// best and gives the label. Keypoints are averaged only when every member has as many.
func weightedMean(_ group: [Detection]) -> Detection {
    let totalScore = group.reduce(0) { $0 + $1.score }
    // All-zero scores (only with min_score 0): fall back to equal weights.
    let weights = totalScore > 0 ? group.map { $0.score / totalScore } : group.map { _ in 1 / Double(group.count) }
    func mean(_ value: (Detection) -> Double) -> Double {
        zip(group, weights).reduce(0) { $0 + value($1.0) * $1.1 }
    }
    let box = Box(xMin: mean { $0.box.xMin }, yMin: mean { $0.box.yMin },
                  xMax: mean { $0.box.xMax }, yMax: mean { $0.box.yMax })
    let best = group[0]
    var keypoints = best.keypoints
    if group.allSatisfy({ $0.keypoints.count == best.keypoints.count }) {
        keypoints = best.keypoints.indices.map { k in
            Point(x: mean { $0.keypoints[k].x }, y: mean { $0.keypoints[k].y })
        }
    }
    return Detection(box: box, score: totalScore / Double(group.count), keypoints: keypoints, label: best.label, labelId: best.labelId)
}
