/// SSD-style detectors whose graph ends in its own box decoding, in either of the two forms
/// such models come in:
/// - **DetectionOutput** (OpenVINO's and Caffe's layer, TF's converted SSDs, the Open Model Zoo
///   detectors): one output [1, 1, N, 7], per row image id, label, confidence, x_min, y_min,
///   x_max, y_max (0…1 of the input); a row with image id < 0 ends the list.
/// - **TF Object Detection API** (and TFLite's `TFLite_Detection_PostProcess`): four outputs,
///   boxes [1, N, 4] as y_min, x_min, y_max, x_max (0…1), classes [1, N], scores [1, N] and the
///   count of valid rows [1].
/// The `decoder.parameters` of a model manifest (snake_case keys); every key may be left out.
public struct SSDDecoderOptions: DetectionDecoderParameters {
    public static let decoderName = "ssd"

    /// The DetectionOutput output (a tensor name or a decimal index).
    public var detectionsOutput: String? = nil
    /// The four TF outputs by name or index. When none of the five is given, the form and the
    /// outputs are told by shape (a last dimension of 7: DetectionOutput; else boxes [1, N, 4],
    /// count [1], and of the two [1, N] the one named like "class" or, failing names, the first
    /// (TFLite's order) is the classes).
    public var boxesOutput: String? = nil
    public var classesOutput: String? = nil
    public var scoresOutput: String? = nil
    public var countOutput: String? = nil
    /// Subtracted from the model's class numbers to give label ids: 1 when class 0 is the
    /// background (most DetectionOutput models, TF's SavedModels), so labels start at the first
    /// real class. A detection whose id is then negative (the background) is dropped.
    public var labelOffset: Int = 0
    /// Default 0.5.
    public var minScore: Double = 0.5
    /// Default nms at IoU 0.45, per class (the model's own suppression has usually run; this
    /// one costs little and catches what a model without it leaves).
    public var suppression: SuppressionOptions = SSDDecoderOptions.defaultSuppression

    public static let defaultSuppression = SuppressionOptions(method: .nms, iouThreshold: 0.45)

    enum CodingKeys: String, CodingKey {
        case detectionsOutput = "detections_output"
        case boxesOutput = "boxes_output"
        case classesOutput = "classes_output"
        case scoresOutput = "scores_output"
        case countOutput = "count_output"
        case labelOffset = "label_offset"
        case minScore = "min_score"
        case suppression
    }

    /// Nothing here depends on the input (the boxes come normalised).
    public func validate(input: ModelManifest.Input) throws { try validate() }

    public func validate() throws {
        guard (0...1000).contains(labelOffset) else { throw StageError("decoder.parameters.label_offset \(labelOffset) is outside 0…1000") }
        guard detectionsOutput == nil || [boxesOutput, classesOutput, scoresOutput, countOutput].allSatisfy({ $0 == nil }) else {
            throw StageError("decoder.parameters: detections_output is the one-output form; boxes_output, classes_output, scores_output and count_output the four-output form: give one form's")
        }
        try validateScoring()
    }

    public func makeDecoder(input: ModelManifest.Input, classes: DetectionClasses) throws -> any DetectionDecoder {
        try SSDDecoder(options: self, classes: classes)
    }
}

extension SSDDecoderOptions {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        detectionsOutput = try c.decodeIfPresent(String.self, forKey: .detectionsOutput)
        boxesOutput = try c.decodeIfPresent(String.self, forKey: .boxesOutput)
        classesOutput = try c.decodeIfPresent(String.self, forKey: .classesOutput)
        scoresOutput = try c.decodeIfPresent(String.self, forKey: .scoresOutput)
        countOutput = try c.decodeIfPresent(String.self, forKey: .countOutput)
        labelOffset = try c.decodeIfPresent(Int.self, forKey: .labelOffset) ?? 0
        minScore = try c.decodeIfPresent(Double.self, forKey: .minScore) ?? 0.5
        suppression = try c.decodeSuppression(forKey: .suppression, defaults: Self.defaultSuppression)
    }
}

/// Decodes either SSD form (the one `bind` found), then suppresses per class by default.
public struct SSDDecoder: DetectionDecoder {
    public enum Form: Sendable, Equatable {
        /// [1, 1, N, 7].
        case detectionOutput
        /// Boxes, classes, scores, count (bound in that order).
        case fourOutputs
    }

    public let options: SSDDecoderOptions
    public let classes: DetectionClasses
    let thresholds: ScoreThresholds
    /// Set by `bind` (the names the manifest gives decide it before then).
    public private(set) var form: Form

    public init(options: SSDDecoderOptions, classes: DetectionClasses) throws {
        try options.validate()
        self.options = options
        self.classes = classes
        thresholds = classes.scoreThresholds(minScore: options.minScore)
        let named = [options.boxesOutput, options.classesOutput, options.scoresOutput, options.countOutput].contains { $0 != nil }
        form = named ? .fourOutputs : .detectionOutput
    }

    public mutating func bind(_ outputs: [ModelOutput]) throws -> [Int] {
        func rows7(_ shape: [Int]) -> Bool { shape.count >= 2 && shape.last == 7 && shape.allSatisfy { $0 > 0 } }
        let named = [options.boxesOutput, options.classesOutput, options.scoresOutput, options.countOutput].contains { $0 != nil }
        if options.detectionsOutput != nil || (!named && outputs.contains { rows7($0.shape) }) {
            form = .detectionOutput
            return [try bindOutput(outputs, reference: options.detectionsOutput, family: "ssd", wanted: "[1, 1, N, 7] (DetectionOutput)", fits: rows7)]
        }
        form = .fourOutputs
        func elements(_ shape: [Int]) -> Int { TensorShape.elementCount(shape) ?? 0 }
        func isBoxes(_ shape: [Int]) -> Bool { shape.count >= 2 && shape.last == 4 && elements(shape) > 0 }
        let boxes = try bindOutput(outputs, reference: options.boxesOutput, family: "ssd",
                                wanted: "[1, N, 4] boxes or [1, 1, N, 7] detections", fits: isBoxes)
        let n = elements(outputs[boxes].shape) / 4
        let count = try bindOutput(outputs, reference: options.countOutput, family: "ssd", wanted: "a count [1]") { elements($0) == 1 }
        // Classes and scores have the same shape: names tell them apart, else the model's order.
        let perBox = outputs.indices.filter { $0 != boxes && $0 != count && elements(outputs[$0].shape) == n }
        func namedLike(_ word: String) -> Int? { perBox.first { outputs[$0].name.lowercased().contains(word) } }
        let classesIndex = options.classesOutput == nil ? namedLike("class") ?? perBox.first : nil
        let classes = try classesIndex ?? bindOutput(outputs, reference: options.classesOutput, family: "ssd", wanted: "[1, \(n)] classes") { elements($0) == n }
        let scoresIndex = options.scoresOutput == nil ? namedLike("score") ?? perBox.first { $0 != classes } : nil
        let scores = try scoresIndex ?? bindOutput(outputs, reference: options.scoresOutput, family: "ssd", wanted: "[1, \(n)] scores") { elements($0) == n }
        guard classes != scores else {
            throw StageError("ssd: the model's outputs (\(describe(outputs))) need boxes [1, N, 4], classes [1, N], scores [1, N] and a count [1], or one [1, 1, N, 7]")
        }
        return [boxes, classes, scores, count]
    }

    public func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection] {
        suppress(candidates(outputs), options.suppression)
    }

    /// The rows that reach their class's threshold, before suppression (in the model's order).
    public func candidates(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection] {
        var found: [Detection] = []
        func add(_ rawClass: Float, _ rawScore: Float, _ box: Box) {
            // A label as a float: NaN, or one too large for Int, is no class (Int(_:) would trap).
            guard rawClass.isFinite, abs(rawClass) < 1e6 else { return }
            let id = Int(rawClass.rounded()) - options.labelOffset
            let score = Double(rawScore)
            guard id >= 0, thresholds.admits(id, score) else { return }
            guard [box.xMin, box.yMin, box.xMax, box.yMax].allSatisfy(\.isFinite), box.xMax >= box.xMin, box.yMax >= box.yMin else { return }
            found.append(Detection(box: box, score: score, label: classes.label(id), labelId: id))
        }
        switch form {
        case .detectionOutput:
            guard let rows = outputs.first else { return [] }
            for r in 0..<(rows.count / 7) {
                let v = r * 7
                if rows[v] < 0 { break }   // image id -1: the end of the list
                add(rows[v + 1], rows[v + 2], Box(xMin: Double(rows[v + 3]), yMin: Double(rows[v + 4]), xMax: Double(rows[v + 5]), yMax: Double(rows[v + 6])))
            }
        case .fourOutputs:
            guard outputs.count == 4, let rawCount = outputs[3].first else { return [] }
            let (boxes, labels, scores) = (outputs[0], outputs[1], outputs[2])
            let n = min(boxes.count / 4, labels.count, scores.count)
            // Clamped as a float first: Int(_:) traps on -1e30 (found by GarbageOutputTests).
            let count = rawCount.isFinite ? Int(min(max(rawCount, 0), Float(n))) : 0
            for i in 0..<count {
                let b = i * 4
                add(labels[i], scores[i], Box(xMin: Double(boxes[b + 1]), yMin: Double(boxes[b]), xMax: Double(boxes[b + 3]), yMax: Double(boxes[b + 2])))
            }
        }
        return found
    }
}
