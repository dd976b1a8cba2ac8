/// The classes a detector reports and which of them a stage keeps: the labels (index = label
/// id), the manifest's per-class thresholds and the stage's `classes=` filter. Every family
/// takes one, so labels, per-class thresholds and the filter mean the same whichever decoder
/// made the boxes.
public struct DetectionClasses: Sendable, Equatable {
    /// The manifest's labels (its `labels` or `labels_file`); may be empty (ids unnamed).
    public let labels: [String]
    /// Minimum scores by label id, replacing the family's `min_score` for those classes.
    public let thresholds: [Int: Double]
    /// The label ids kept; nil keeps every class (also ids beyond the labels).
    public let kept: Set<Int>?

    /// `classThresholds` and `keeping` name classes by label; a name that is not a label, or a
    /// threshold outside 0…1, is a StageError listing the labels.
    public init(labels: [String] = [], classThresholds: [String: Double] = [:], keeping: [String]? = nil) throws {
        func id(_ name: String, _ what: String) throws -> Int {
            guard let i = labels.firstIndex(of: name) else {
                let known = labels.isEmpty ? "the model has no labels" : "its labels: \(labels.joined(separator: ", "))"
                throw StageError("\(what): '\(name)' is not a label of this model; \(known)")
            }
            return i
        }
        var thresholds: [Int: Double] = [:]
        for (name, score) in classThresholds.sorted(by: { $0.key < $1.key }) {
            guard score >= 0, score <= 1 else { throw StageError("class_thresholds: \(name)'s \(score) is outside 0…1") }
            thresholds[try id(name, "class_thresholds")] = score
        }
        self.labels = labels
        self.thresholds = thresholds
        self.kept = try keeping.map { Set(try $0.map { try id($0, "classes") }) }
    }

    /// The label of `id`, nil when the labels do not name it.
    public func label(_ id: Int) -> String? { labels.indices.contains(id) ? labels[id] : nil }

    /// The score each class must reach, for a decoder whose family's threshold is `minScore`.
    public func scoreThresholds(minScore: Double) -> ScoreThresholds {
        let count = Swift.max(labels.count, (thresholds.keys.max() ?? -1) + 1)
        let byId = (0..<count).map { i in (kept?.contains(i) ?? true) ? thresholds[i] ?? minScore : .infinity }
        return ScoreThresholds(byId: byId, others: kept == nil ? minScore : .infinity)
    }

    /// How many classes a model's outputs hold: the family's `classes` parameter, else the
    /// labels' count. A StageError when neither is given or they disagree.
    public func classCount(declared: Int?, family: String) throws -> Int {
        if let declared {
            guard declared > 0 else { throw StageError("decoder.parameters.classes is \(declared); a detector has at least one class") }
            guard labels.isEmpty || labels.count == declared else {
                throw StageError("decoder.parameters.classes is \(declared) but the manifest has \(labels.count) labels")
            }
            return declared
        }
        guard !labels.isEmpty else {
            throw StageError("\(family) needs the class count: give labels, labels_file or decoder.parameters.classes")
        }
        return labels.count
    }
}

/// The minimum score of each class, looked up per candidate box: a class the stage filters out
/// needs an infinite score.
public struct ScoreThresholds: Sendable, Equatable {
    let byId: [Double]
    /// For ids beyond the labels.
    let others: Double
    /// The lowest threshold of any class: a box scoring below it is skipped before its class
    /// is even looked at.
    public let lowest: Double

    init(byId: [Double], others: Double) {
        self.byId = byId
        self.others = others
        lowest = byId.reduce(others, Swift.min)
    }

    /// Whether a box of class `id` scoring `score` is kept (never for NaN or an infinite score:
    /// a model's garbage, not a confidence).
    @inline(__always) public func admits(_ id: Int, _ score: Double) -> Bool {
        score.isFinite && score >= (id >= 0 && id < byId.count ? byId[id] : others)
    }
}
