/// A YOLO family's decoder (`YOLOv8Decoder`, `YOLOv5Decoder`): the families read the same
/// `decoder.parameters` (`YOLODecoderOptions`) and differ in their name, their defaults and how
/// their output is laid out.
public protocol YOLOFamily: DetectionDecoder {
    /// The manifest's `decoder.name`.
    static var decoderName: String { get }
    /// The `suppression` a manifest that leaves it out (or leaves some of its keys out) gets.
    static var defaultSuppression: SuppressionOptions { get }
    /// A StageError when the class count is unknown or disagrees with the labels.
    init(options: YOLODecoderOptions<Self>, input: ModelManifest.Input, classes: DetectionClasses) throws
    var options: YOLODecoderOptions<Self> { get }
    /// What the family's options say of its boxes (built by `init` with its leading values).
    var boxes: YOLOBoxes { get }
    /// Every box whose best class reaches its threshold, before suppression (in box order).
    func candidates(_ values: UnsafeBufferPointer<Float>) -> [Detection]
}

extension YOLOFamily {
    public var classes: DetectionClasses { boxes.classes }
    /// Values per box: the leading values (4 box values, YOLOv5's objectness) + the class count.
    public var valuesPerBox: Int { boxes.valuesPerBox }

    /// The candidates of the family's one output, suppressed (per class by default).
    public func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection] {
        guard let output = outputs.first else { return [] }
        return suppress(candidates(output), options.suppression)
    }
}

/// The `decoder.parameters` of a YOLO-family manifest (snake_case keys); every key may be left
/// out. `YOLOv8DecoderOptions` and `YOLOv5DecoderOptions` are this for their family.
public struct YOLODecoderOptions<Family: YOLOFamily>: DetectionDecoderParameters {
    public static var decoderName: String { Family.decoderName }
    public static var defaultSuppression: SuppressionOptions { Family.defaultSuppression }

    /// The output to read: a tensor name or a decimal index; nil: the first output whose shape
    /// fits the class count.
    public var output: String? = nil
    /// How many classes the model scores; nil: as many as the manifest's labels.
    public var classes: Int? = nil
    /// Units of the box values (default pixels of the model input; some TFLite exports give
    /// 0…1 of the input).
    public var coordinates: BoxCoordinates = .pixels
    /// Default 0.25 (Ultralytics' `conf`, YOLOv5's `conf_thres`); YOLOv5 scores a box by
    /// objectness × class.
    public var minScore: Double = 0.25
    /// Default nms per class, at the family's IoU (`defaultSuppression`).
    public var suppression: SuppressionOptions = Family.defaultSuppression

    enum CodingKeys: String, CodingKey {
        case output, classes, coordinates, suppression
        case minScore = "min_score"
    }

    public func validate(input: ModelManifest.Input) throws {
        if let classes, classes <= 0 { throw StageError("decoder.parameters.classes is \(classes); a detector has at least one class") }
        try validateScoring()
    }

    public func makeDecoder(input: ModelManifest.Input, classes: DetectionClasses) throws -> any DetectionDecoder {
        try Family(options: self, input: input, classes: classes)
    }
}

extension YOLODecoderOptions {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(output: try c.decodeIfPresent(String.self, forKey: .output),
                  classes: try c.decodeIfPresent(Int.self, forKey: .classes),
                  coordinates: try c.decodeIfPresent(BoxCoordinates.self, forKey: .coordinates) ?? .pixels,
                  minScore: try c.decodeIfPresent(Double.self, forKey: .minScore) ?? 0.25,
                  suppression: try c.decodeSuppression(forKey: .suppression, defaults: Family.defaultSuppression))
    }
}

/// What a YOLO-family box's four values are measured in (yolov8's and yolov5's `coordinates`).
public enum BoxCoordinates: String, Sendable, Codable, CaseIterable {
    /// Pixels of the model's input (Ultralytics' ONNX and OpenVINO exports).
    case pixels
    /// 0…1 of the input.
    case normalized
}

/// What the YOLO decoders derive from their options and read the same way: the values per box
/// (`leadingValues` before the class scores: the 4 box values, and YOLOv5's objectness;
/// `trailingValues` after them: yolov8-seg's mask coefficients), the classes' thresholds, and
/// the scale from the box's units to normalised input coordinates.
public struct YOLOBoxes: Sendable {
    public let classes: DetectionClasses
    public let valuesPerBox: Int
    public let thresholds: ScoreThresholds
    public let xScale: Double, yScale: Double

    /// A StageError when the class count is unknown or disagrees with the labels; `family`
    /// names the decoder in it (default the options' family).
    public init<Family>(_ options: YOLODecoderOptions<Family>, input: ModelManifest.Input, classes: DetectionClasses, leadingValues: Int,
                        trailingValues: Int = 0, family: String = Family.decoderName) throws {
        try options.validate(input: input)
        self.classes = classes
        valuesPerBox = leadingValues + (try classes.classCount(declared: options.classes, family: family)) + trailingValues
        thresholds = classes.scoreThresholds(minScore: options.minScore)
        (xScale, yScale) = options.coordinates == .pixels ? (1 / Double(input.width), 1 / Double(input.height)) : (1, 1)
    }

    /// An output's two dimensions, [1, a, b] or [a, b], when both are positive.
    public static func table(_ shape: [Int]) -> (Int, Int)? {
        let dims = shape.count == 3 && shape[0] == 1 ? Array(shape.dropFirst()) : shape
        guard dims.count == 2, dims.allSatisfy({ $0 > 0 }) else { return nil }
        return (dims[0], dims[1])
    }

    /// The detection of class `best` scoring `score` whose box has its centre at (cx, cy) and
    /// this size in the model's units; nil for values that make no box.
    @inline(__always) public func detection(cx: Double, cy: Double, width: Double, height: Double, best: Int, score: Double) -> Detection? {
        guard let box = Box(centreX: cx * xScale, centreY: cy * yScale, width: width * xScale, height: height * yScale) else { return nil }
        return Detection(box: box, score: score, label: classes.label(best), labelId: best)
    }
}
