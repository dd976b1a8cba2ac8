/// Ultralytics YOLOv5 as its `export.py --include onnx` writes it (YOLOv7's export has the same
/// layout): one output of [1, N, 5+nc], per box its centre x, centre y, width and height in
/// input pixels, its objectness, then nc class probabilities; a box's score for a class is
/// objectness × that class's probability. The `decoder.parameters` of a model manifest
/// (snake_case keys); every key may be left out.
public struct YOLOv5DecoderOptions: DetectionDecoderParameters {
    public static let decoderName = "yolov5"

    /// The output to read: a tensor name or a decimal index; nil: the first output shaped
    /// [1, N, 5+nc].
    public var output: String?
    /// How many classes the model scores; nil: as many as the manifest's labels.
    public var classes: Int?
    /// Default pixels of the model input.
    public var coordinates: BoxCoordinates
    /// Default 0.25 (YOLOv5's `conf_thres`), on objectness × class.
    public var minScore: Double
    /// Default nms at IoU 0.45 (YOLOv5's `iou_thres`), per class.
    public var suppression: SuppressionOptions

    public static let defaultSuppression = SuppressionOptions(method: .nms, iouThreshold: 0.45)

    public init(output: String? = nil, classes: Int? = nil, coordinates: BoxCoordinates = .pixels, minScore: Double = 0.25,
                suppression: SuppressionOptions = Self.defaultSuppression) {
        self.output = output
        self.classes = classes
        self.coordinates = coordinates
        self.minScore = minScore
        self.suppression = suppression
    }

    typealias CodingKeys = YOLOParameterKeys

    public init(from decoder: any Decoder) throws {
        let p = try YOLOParameters(from: decoder, defaultSuppression: Self.defaultSuppression)
        self.init(output: p.output, classes: p.classes, coordinates: p.coordinates, minScore: p.minScore, suppression: p.suppression)
    }

    public func validate(input: ModelManifest.Input) throws {
        try YOLOParameters.validate(classes: classes)
        try validateScoring()
    }

    public func makeDecoder(input: ModelManifest.Input, classes: DetectionClasses) throws -> any DetectionDecoder {
        try YOLOv5Decoder(options: self, input: input, classes: classes)
    }
}

/// Decodes a YOLOv5 output: per box the best class by objectness × class probability, kept when
/// that score reaches the class's threshold, then suppression (per class by default).
public struct YOLOv5Decoder: DetectionDecoder {
    public let options: YOLOv5DecoderOptions
    public let classes: DetectionClasses
    /// Values per box: 5 + the class count.
    public let valuesPerBox: Int
    let thresholds: ScoreThresholds
    let xScale: Double, yScale: Double

    /// A StageError when the class count is unknown or disagrees with the labels.
    public init(options: YOLOv5DecoderOptions, input: ModelManifest.Input, classes: DetectionClasses) throws {
        try options.validate(input: input)
        self.options = options
        self.classes = classes
        valuesPerBox = 5 + (try classes.classCount(declared: options.classes, family: "yolov5"))
        thresholds = classes.scoreThresholds(minScore: options.minScore)
        (xScale, yScale) = options.coordinates == .pixels ? (1 / Double(input.width), 1 / Double(input.height)) : (1, 1)
    }

    /// [1, N, 5+nc] (or [N, 5+nc]).
    func fits(_ shape: [Int]) -> Bool {
        let dims = shape.count == 3 && shape[0] == 1 ? Array(shape.dropFirst()) : shape
        return dims.count == 2 && dims[0] > 0 && dims[1] == valuesPerBox
    }

    public func bind(_ outputs: [ModelOutput]) throws -> [Int] {
        let wanted = "[1, N, \(valuesPerBox)] (4 box values, objectness and \(valuesPerBox - 5) class scores per box)"
        return [try bindOutput(outputs, reference: options.output, family: "yolov5", wanted: wanted, fits: fits)]
    }

    public func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection] {
        guard let output = outputs.first else { return [] }
        return suppress(candidates(output), options.suppression)
    }

    /// Every box whose best class reaches its threshold, before suppression (in box order).
    public func candidates(_ values: UnsafeBufferPointer<Float>) -> [Detection] {
        let v = valuesPerBox
        var found: [Detection] = []
        for i in 0..<(values.count / v) {
            let base = i * v
            let objectness = Double(values[base + 4])
            // Class probabilities are at most 1: a box whose objectness misses every threshold
            // cannot make any (most of YOLOv5's 25200 boxes stop here).
            guard objectness >= thresholds.lowest else { continue }
            var best = 0, bestScore = -Float.infinity
            for c in 0..<(v - 5) where values[base + 5 + c] > bestScore {
                (best, bestScore) = (c, values[base + 5 + c])
            }
            let score = objectness * Double(bestScore)
            guard thresholds.admits(best, score) else { continue }
            guard let box = Box(centreX: Double(values[base]) * xScale, centreY: Double(values[base + 1]) * yScale,
                                width: Double(values[base + 2]) * xScale, height: Double(values[base + 3]) * yScale) else { continue }
            found.append(Detection(box: box, score: score, label: classes.label(best), labelId: best))
        }
        return found
    }
}
