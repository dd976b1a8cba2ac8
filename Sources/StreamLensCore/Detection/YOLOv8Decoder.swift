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
    /// Set by `bind`: whether the output is [1, 4+nc, N] (values of one kind together:
    /// Ultralytics' layout) rather than [1, N, 4+nc], and N.
    private(set) var channelsFirst = true
    private(set) var boxCount = 0

    public init(options: YOLOv8DecoderOptions, input: ModelManifest.Input, classes: DetectionClasses) throws {
        self.options = options
        boxes = try YOLOBoxes(options, input: input, classes: classes, leadingValues: 4)
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
        let wanted = "[1, \(valuesPerBox), N] or [1, N, \(valuesPerBox)] (4 box values and \(valuesPerBox - 4) class scores per box)"
        let i = try bindOutput(outputs, reference: options.output, family: Self.decoderName, wanted: wanted) { layout($0) != nil }
        if let (first, n) = layout(outputs[i].shape) { (channelsFirst, boxCount) = (first, n) }
        return [i]
    }

    /// Every box whose best class reaches its threshold, before suppression (in box order).
    /// The layout is the one `bind` saw (channels first, N from the buffer, before a bind).
    public func candidates(_ values: UnsafeBufferPointer<Float>) -> [Detection] {
        let v = valuesPerBox, nc = valuesPerBox - 4, thresholds = boxes.thresholds
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
            guard let detection = boxes.detection(cx: at(0), cy: at(1), width: at(2), height: at(3), best: best, score: score) else { continue }
            found.append(detection)
        }
        return found
    }
}
