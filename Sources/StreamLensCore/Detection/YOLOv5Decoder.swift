/// Ultralytics YOLOv5 as its `export.py --include onnx` writes it (YOLOv7's export has the same
/// layout): one output of [1, N, 5+nc], per box its centre x, centre y, width and height in
/// input pixels, its objectness, then nc class probabilities; a box's score for a class is
/// objectness × that class's probability.
public typealias YOLOv5DecoderOptions = YOLODecoderOptions<YOLOv5Decoder>

/// Decodes a YOLOv5 output: per box the best class by objectness × class probability, kept when
/// that score reaches the class's threshold, then suppression (per class by default).
public struct YOLOv5Decoder: YOLOFamily {
    public static let decoderName = "yolov5"
    /// YOLOv5's `iou_thres` (its `conf_thres` is `min_score`'s 0.25).
    public static let defaultSuppression = SuppressionOptions(method: .nms, iouThreshold: 0.45)
    public let options: YOLOv5DecoderOptions
    public let boxes: YOLOBoxes

    public init(options: YOLOv5DecoderOptions, input: ModelManifest.Input, classes: DetectionClasses) throws {
        self.options = options
        boxes = try YOLOBoxes(options, input: input, classes: classes, leadingValues: 5)
    }

    /// [1, N, 5+nc] (or [N, 5+nc]).
    func fits(_ shape: [Int]) -> Bool { YOLOBoxes.table(shape)?.1 == valuesPerBox }

    public func bind(_ outputs: [ModelOutput]) throws -> [Int] {
        let wanted = "[1, N, \(valuesPerBox)] (4 box values, objectness and \(valuesPerBox - 5) class scores per box)"
        return [try bindOutput(outputs, reference: options.output, family: Self.decoderName, wanted: wanted, fits: fits)]
    }

    /// Every box whose best class reaches its threshold, before suppression (in box order).
    public func candidates(_ values: UnsafeBufferPointer<Float>) -> [Detection] {
        let v = valuesPerBox, thresholds = boxes.thresholds
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
            guard thresholds.admits(best, score),
                  let detection = boxes.detection(cx: Double(values[base]), cy: Double(values[base + 1]), width: Double(values[base + 2]),
                                                  height: Double(values[base + 3]), best: best, score: score) else { continue }
            found.append(detection)
        }
        return found
    }
}
