/// Ultralytics' anchor-free detectors (YOLOv8, YOLO11) as `yolo export format=onnx` writes
/// them: one output of [1, 4+nc, N] (or transposed, [1, N, 4+nc]), per box its centre x, centre
/// y, width and height in input pixels, then nc class scores (already probabilities: the export
/// ends in a sigmoid). The `decoder.parameters` of a model manifest (snake_case keys); every key
/// may be left out.
public struct YOLOv8DecoderOptions: DetectionDecoderParameters {
    public static let decoderName = "yolov8"

    /// The output to read: a tensor name or a decimal index; nil: the first output whose shape
    /// fits the class count.
    public var output: String?
    /// How many classes the model scores; nil: as many as the manifest's labels.
    public var classes: Int?
    /// Units of the box values (default pixels of the model input; some TFLite exports give
    /// 0…1 of the input).
    public var coordinates: BoxCoordinates
    /// Default 0.25 (Ultralytics' `conf`).
    public var minScore: Double
    /// Default nms at IoU 0.7 (Ultralytics' `iou`), per class.
    public var suppression: SuppressionOptions

    public static let defaultSuppression = SuppressionOptions(method: .nms, iouThreshold: 0.7)

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
        try YOLOv8Decoder(options: self, input: input, classes: classes)
    }
}

/// The `decoder.parameters` keys yolov8 and yolov5 share (each family has its own defaults).
enum YOLOParameterKeys: String, CodingKey {
    case output, classes, coordinates, suppression
    case minScore = "min_score"
}

/// yolov8's and yolov5's parameters as read from a manifest: one reader for both families.
struct YOLOParameters {
    var output: String?
    var classes: Int?
    var coordinates: BoxCoordinates
    var minScore: Double
    var suppression: SuppressionOptions

    init(from decoder: any Decoder, defaultSuppression: SuppressionOptions) throws {
        let c = try decoder.container(keyedBy: YOLOParameterKeys.self)
        output = try c.decodeIfPresent(String.self, forKey: .output)
        classes = try c.decodeIfPresent(Int.self, forKey: .classes)
        coordinates = try c.decodeIfPresent(BoxCoordinates.self, forKey: .coordinates) ?? .pixels
        minScore = try c.decodeIfPresent(Double.self, forKey: .minScore) ?? 0.25
        suppression = try c.decodeSuppression(forKey: .suppression, defaults: defaultSuppression)
    }

    static func validate(classes: Int?) throws {
        if let classes, classes <= 0 { throw StageError("decoder.parameters.classes is \(classes); a detector has at least one class") }
    }
}

/// What a YOLO-family box's four values are measured in (yolov8's and yolov5's `coordinates`).
public enum BoxCoordinates: String, Sendable, Codable, CaseIterable {
    /// Pixels of the model's input (Ultralytics' ONNX and OpenVINO exports).
    case pixels
    /// 0…1 of the input.
    case normalized
}

/// Decodes a YOLOv8/YOLO11 output: per box the best class (argmax of the class scores), kept
/// when its score reaches that class's threshold, then suppression (per class by default).
public struct YOLOv8Decoder: DetectionDecoder {
    public let options: YOLOv8DecoderOptions
    public let classes: DetectionClasses
    /// Values per box: 4 + the class count.
    public let valuesPerBox: Int
    let thresholds: ScoreThresholds
    /// Box values to normalised input coordinates.
    let xScale: Double, yScale: Double
    /// Set by `bind`: whether the output is [1, 4+nc, N] (values of one kind together:
    /// Ultralytics' layout) rather than [1, N, 4+nc], and N.
    private(set) var channelsFirst = true
    private(set) var boxCount = 0

    /// A StageError when the class count is unknown or disagrees with the labels.
    public init(options: YOLOv8DecoderOptions, input: ModelManifest.Input, classes: DetectionClasses) throws {
        try options.validate(input: input)
        self.options = options
        self.classes = classes
        valuesPerBox = 4 + (try classes.classCount(declared: options.classes, family: "yolov8"))
        thresholds = classes.scoreThresholds(minScore: options.minScore)
        (xScale, yScale) = options.coordinates == .pixels ? (1 / Double(input.width), 1 / Double(input.height)) : (1, 1)
    }

    /// The layout an output of `shape` has: channels first ([1, 4+nc, N]), boxes first
    /// ([1, N, 4+nc]), or nil when neither fits. A leading 1 may be missing; when both fit
    /// (N = 4+nc) Ultralytics' channels first wins.
    public func layout(_ shape: [Int]) -> (channelsFirst: Bool, boxes: Int)? {
        let dims = shape.count == 3 && shape[0] == 1 ? Array(shape.dropFirst()) : shape
        guard dims.count == 2, dims.allSatisfy({ $0 > 0 }) else { return nil }
        if dims[0] == valuesPerBox { return (true, dims[1]) }
        if dims[1] == valuesPerBox { return (false, dims[0]) }
        return nil
    }

    /// The output by `output`, else the first shaped for the class count; its layout is kept.
    public mutating func bind(_ outputs: [ModelOutput]) throws -> [Int] {
        let wanted = "[1, \(valuesPerBox), N] or [1, N, \(valuesPerBox)] (4 box values and \(valuesPerBox - 4) class scores per box)"
        let i = try bindOutput(outputs, reference: options.output, family: "yolov8", wanted: wanted) { layout($0) != nil }
        if let (first, n) = layout(outputs[i].shape) { (channelsFirst, boxCount) = (first, n) }
        return [i]
    }

    public func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection] {
        guard let output = outputs.first else { return [] }
        return suppress(candidates(output), options.suppression)
    }

    /// Every box whose best class reaches its threshold, before suppression (in box order).
    /// The layout is the one `bind` saw (channels first, N from the buffer, before a bind).
    public func candidates(_ values: UnsafeBufferPointer<Float>) -> [Detection] {
        let v = valuesPerBox, nc = valuesPerBox - 4
        let n = boxCount > 0 ? min(boxCount, values.count / v) : values.count / v
        // Each box's best class, read in memory order: in Ultralytics' layout a class's scores
        // for all boxes are one row (8400 × 80 values a frame, better not read strided).
        var bestClass = [Int](repeating: 0, count: n), bestScore = [Float](repeating: -.infinity, count: n)
        if channelsFirst {
            for c in 0..<nc {
                let row = (4 + c) * n
                for i in 0..<n where values[row + i] > bestScore[i] { (bestClass[i], bestScore[i]) = (c, values[row + i]) }
            }
        } else {
            for i in 0..<n {
                let base = i * v + 4
                for c in 0..<nc where values[base + c] > bestScore[i] { (bestClass[i], bestScore[i]) = (c, values[base + c]) }
            }
        }
        var found: [Detection] = []
        for i in 0..<n {
            let (best, score) = (bestClass[i], Double(bestScore[i]))
            guard score >= thresholds.lowest, thresholds.admits(best, score) else { continue }
            // Value k of box i.
            func at(_ k: Int) -> Double { Double(channelsFirst ? values[k * n + i] : values[i * v + k]) }
            guard let box = Box(centreX: at(0) * xScale, centreY: at(1) * yScale, width: at(2) * xScale, height: at(3) * yScale) else { continue }
            found.append(Detection(box: box, score: score, label: classes.label(best), labelId: best))
        }
        return found
    }
}
