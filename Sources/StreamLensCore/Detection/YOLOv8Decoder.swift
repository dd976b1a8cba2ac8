/// Ultralytics' anchor-free detectors (YOLOv8, YOLO11) as `yolo export format=onnx` writes
/// them: one output of [1, 4+nc, N] (or transposed, [1, N, 4+nc]), per box its centre x, centre
/// y, width and height in input pixels, then nc class scores (already probabilities: the export
/// ends in a sigmoid).
public typealias YOLOv8DecoderOptions = YOLODecoderOptions<YOLOv8Decoder>

/// Decodes a YOLOv8/YOLO11 output: per box the best class (argmax of the class scores), kept
/// when its score reaches that class's threshold, then suppression (per class by default).
public struct YOLOv8Decoder: YOLOFamily {
    public static let decoderName = "yolov8"
    /// Ultralytics' `iou` (its `conf` is `min_score`'s 0.25).
    public static let defaultSuppression = SuppressionOptions(method: .nms, iouThreshold: 0.7)
    public let options: YOLOv8DecoderOptions
    public let boxes: YOLOBoxes
    /// Values after each box's class scores: yolov8-seg's mask coefficients (none for yolov8).
    let maskCoefficients: Int
    /// The family its messages name: yolov8, or yolov8-seg, which reads its boxes through this.
    let family: String
    /// Set by `bind`: whether the output is [1, 4+nc, N] (values of one kind together:
    /// Ultralytics' layout) rather than [1, N, 4+nc], and N.
    private(set) var channelsFirst = true
    private(set) var boxCount = 0

    public init(options: YOLOv8DecoderOptions, input: ModelManifest.Input, classes: DetectionClasses) throws {
        try self.init(options: options, input: input, classes: classes, maskCoefficients: 0, family: Self.decoderName)
    }

    /// A reader of boxes followed by `maskCoefficients` values each (yolov8-seg's).
    init(options: YOLOv8DecoderOptions, input: ModelManifest.Input, classes: DetectionClasses, maskCoefficients: Int, family: String) throws {
        self.options = options
        self.maskCoefficients = maskCoefficients
        self.family = family
        boxes = try YOLOBoxes(options, input: input, classes: classes, leadingValues: 4, trailingValues: maskCoefficients, family: family)
    }

    /// The layout an output of `shape` has: channels first ([1, 4+nc, N]), boxes first
    /// ([1, N, 4+nc]), or nil when neither fits. A leading 1 may be missing; when both fit
    /// (N = 4+nc) Ultralytics' channels first wins.
    public func layout(_ shape: [Int]) -> (channelsFirst: Bool, boxes: Int)? {
        guard let (a, b) = YOLOBoxes.table(shape) else { return nil }
        if a == valuesPerBox { return (true, b) }
        if b == valuesPerBox { return (false, a) }
        return nil
    }

    /// The output by `output`, else the first shaped for the class count; its layout is kept.
    public mutating func bind(_ outputs: [ModelOutput]) throws -> [Int] {
        let values = maskCoefficients > 0 ? "4 box values, \(classCount) class scores and \(maskCoefficients) mask coefficients"
            : "4 box values and \(classCount) class scores"
        let wanted = "[1, \(valuesPerBox), N] or [1, N, \(valuesPerBox)] (\(values) per box)"
        let i = try bindOutput(outputs, reference: options.output, family: family, wanted: wanted) { layout($0) != nil }
        if let (first, n) = layout(outputs[i].shape) { (channelsFirst, boxCount) = (first, n) }
        return [i]
    }

    /// nc.
    var classCount: Int { valuesPerBox - 4 - maskCoefficients }

    /// How many boxes `values` holds: N as bound, fewer in a shorter buffer (before a bind, all
    /// it holds).
    func heldBoxes(in values: UnsafeBufferPointer<Float>) -> Int {
        boxCount > 0 ? min(boxCount, values.count / valuesPerBox) : values.count / valuesPerBox
    }

    /// Value `k` of box `i` of the `n` in `values`, in the layout `bind` saw.
    @inline(__always) func value(_ values: UnsafeBufferPointer<Float>, _ k: Int, box i: Int, of n: Int) -> Float {
        channelsFirst ? values[k * n + i] : values[i * valuesPerBox + k]
    }

    /// Every box whose best class reaches its threshold, before suppression (in box order).
    /// The layout is the one `bind` saw (channels first, N from the buffer, before a bind).
    public func candidates(_ values: UnsafeBufferPointer<Float>) -> [Detection] {
        scored(values).map(\.detection)
    }

    /// `candidates`, each with its box's index among the n (where yolov8-seg finds its mask
    /// coefficients).
    func scored(_ values: UnsafeBufferPointer<Float>) -> [(box: Int, detection: Detection)] {
        let v = valuesPerBox, nc = classCount, thresholds = boxes.thresholds
        let n = heldBoxes(in: values)
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
        var found: [(box: Int, detection: Detection)] = []
        for i in 0..<n {
            let (best, score) = (bestClass[i], Double(bestScore[i]))
            guard score >= thresholds.lowest, thresholds.admits(best, score) else { continue }
            func at(_ k: Int) -> Double { Double(value(values, k, box: i, of: n)) }
            guard let detection = boxes.detection(cx: at(0), cy: at(1), width: at(2), height: at(3), best: best, score: score) else { continue }
            found.append((i, detection))
        }
        return found
    }
}
