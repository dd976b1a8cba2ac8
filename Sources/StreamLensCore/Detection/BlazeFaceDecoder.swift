import Foundation

/// How to turn a BlazeFace-family model's two raw outputs into detections: MediaPipe's
/// `TensorsToDetectionsCalculatorOptions` plus the anchors and the suppression, as the
/// `decoder.parameters` of a model manifest (snake_case keys). Keys with a default below may
/// be left out.
public struct BlazeFaceDecoderOptions: DetectionDecoderParameters {
    public static let decoderName = "blazeface"
    /// Order of the four box values of each anchor (MediaPipe's `box_format`).
    public enum BoxOrder: String, Sendable, Codable, CaseIterable {
        /// Centre x, centre y, width, height (MediaPipe `XYWH`, i.e. `reverse_output_order: true`;
        /// BlazeFace). Keypoints are x, y.
        case xywh
        /// Centre y, centre x, height, width (MediaPipe's default `YXHW`). Keypoints are y, x.
        case yxhw
        /// No width or height: distances from the anchor centre to the left, top, right and
        /// bottom edges, each positive outwards (MediaPipe `XYXY`). Keypoints are x, y.
        case xyxy
        /// The same distances as top, left, bottom, right. Keypoints are y, x.
        case yxyx

        /// Whether y comes before x (in the box values and in each keypoint).
        var yFirst: Bool { self == .yxhw || self == .yxyx }
    }

    /// What the scores output holds.
    public enum ScoreKind: String, Sendable, Codable, CaseIterable {
        /// Raw logits: clipped to ±`score_clipping_thresh`, then a sigmoid.
        case logits
        /// Already 0…1.
        case probabilities
    }

    public var anchors: SSDAnchorOptions
    /// The boxes output (shape [1, N, num_coords]): a tensor name, or its index as a decimal
    /// string ("0"). Runtimes and converters rename tensors, so `resolveOutputs` also tells
    /// the two outputs apart by shape when the reference does not fit.
    public var boxesOutput: String = "0"
    /// The scores output (shape [1, N, 1]): a tensor name or a decimal index ("1").
    public var scoresOutput: String = "1"
    /// Values per anchor in the boxes output (BlazeFace: 4 box + 6 keypoints x 2 = 16).
    public var numCoords: Int = 16
    /// Where the four box values start within an anchor's values (default 0).
    public var boxCoordOffset: Int = 0
    /// Default xywh.
    public var boxOrder: BoxOrder = .xywh
    /// Where the keypoints start within an anchor's values (default 4).
    public var keypointCoordOffset: Int = 4
    /// Default 6.
    public var numKeypoints: Int = 6
    /// Values per keypoint; the first two are the coordinates (default 2).
    public var valuesPerKeypoint: Int = 2
    /// Regressor units per anchor size: the model's input size for BlazeFace (128 or 192).
    public var xScale: Double
    public var yScale: Double
    public var wScale: Double
    public var hScale: Double
    /// Default logits.
    public var scores: ScoreKind = .logits
    /// Default 100.
    public var scoreClippingThresh: Double = 100
    /// Detections scoring below this are dropped before suppression (default 0.75; MediaPipe
    /// uses 0.5 for short range).
    public var minScore: Double = 0.75
    /// Default weighted, IoU 0.3.
    public var suppression: SuppressionOptions = SuppressionOptions()

    enum CodingKeys: String, CodingKey {
        case anchors
        case boxesOutput = "boxes_output"
        case scoresOutput = "scores_output"
        case numCoords = "num_coords"
        case boxCoordOffset = "box_coord_offset"
        case boxOrder = "box_order"
        case keypointCoordOffset = "keypoint_coord_offset"
        case numKeypoints = "num_keypoints"
        case valuesPerKeypoint = "values_per_keypoint"
        case xScale = "x_scale"
        case yScale = "y_scale"
        case wScale = "w_scale"
        case hScale = "h_scale"
        case scores
        case scoreClippingThresh = "score_clipping_thresh"
        case minScore = "min_score"
        case suppression
    }

    /// The anchors must be made for the model's input size, and the options must hold.
    public func validate(input: ModelManifest.Input) throws {
        guard anchors.inputWidth == input.width, anchors.inputHeight == input.height else {
            throw StageError("the decoder's anchors are for \(anchors.inputWidth)x\(anchors.inputHeight) but the input is \(input.width)x\(input.height)")
        }
        try validate()
    }

    /// One class: every detection gets the first label (id 0).
    public func makeDecoder(input: ModelManifest.Input, classes: DetectionClasses) throws -> any DetectionDecoder {
        try BlazeFaceDecoder(options: self, classes: classes)
    }

    /// Everything that would make decoding read past an anchor's values or divide by zero. The
    /// sums and products are checked without computing them: a manifest's integers may be near
    /// Int.max, where `offset + 4` would trap instead of failing the check (found by fuzzing).
    public func validate() throws {
        try anchors.validate()
        guard numCoords > 0, boxCoordOffset >= 0, boxCoordOffset <= numCoords - 4 else {
            throw StageError("decoder: the four box values at box_coord_offset \(boxCoordOffset) do not fit in num_coords \(numCoords)")
        }
        if numKeypoints > 0 {
            guard valuesPerKeypoint >= 2 else {
                throw StageError("decoder: values_per_keypoint is \(valuesPerKeypoint); a keypoint needs at least x and y")
            }
            // offset + count * size <= numCoords, all non-negative, as a division.
            guard keypointCoordOffset >= 0, keypointCoordOffset <= numCoords,
                  numKeypoints <= (numCoords - keypointCoordOffset) / valuesPerKeypoint else {
                throw StageError("decoder: \(numKeypoints) keypoints of \(valuesPerKeypoint) values at keypoint_coord_offset \(keypointCoordOffset) do not fit in num_coords \(numCoords)")
            }
        } else if numKeypoints < 0 {
            throw StageError("decoder: num_keypoints is \(numKeypoints)")
        }
        guard [xScale, yScale, wScale, hScale].allSatisfy({ $0.isFinite && $0 != 0 }) else {
            throw StageError("decoder: x_scale, y_scale, w_scale and h_scale must be non-zero (got \(xScale), \(yScale), \(wScale), \(hScale))")
        }
        try suppression.validate()
    }
}

extension BlazeFaceDecoderOptions {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        anchors = try c.decode(SSDAnchorOptions.self, forKey: .anchors)
        boxesOutput = try c.decode(String.self, forKey: .boxesOutput)
        scoresOutput = try c.decode(String.self, forKey: .scoresOutput)
        numCoords = try c.decode(Int.self, forKey: .numCoords)
        boxCoordOffset = try c.decodeIfPresent(Int.self, forKey: .boxCoordOffset) ?? 0
        boxOrder = try c.decodeIfPresent(BoxOrder.self, forKey: .boxOrder) ?? .xywh
        keypointCoordOffset = try c.decodeIfPresent(Int.self, forKey: .keypointCoordOffset) ?? 4
        numKeypoints = try c.decodeIfPresent(Int.self, forKey: .numKeypoints) ?? 6
        valuesPerKeypoint = try c.decodeIfPresent(Int.self, forKey: .valuesPerKeypoint) ?? 2
        xScale = try c.decode(Double.self, forKey: .xScale)
        yScale = try c.decode(Double.self, forKey: .yScale)
        wScale = try c.decode(Double.self, forKey: .wScale)
        hScale = try c.decode(Double.self, forKey: .hScale)
        scores = try c.decodeIfPresent(ScoreKind.self, forKey: .scores) ?? .logits
        scoreClippingThresh = try c.decodeIfPresent(Double.self, forKey: .scoreClippingThresh) ?? 100
        minScore = try c.decodeIfPresent(Double.self, forKey: .minScore) ?? 0.75
        suppression = try c.decodeIfPresent(SuppressionOptions.self, forKey: .suppression) ?? SuppressionOptions()
    }
}

/// Decodes a BlazeFace-family SSD model (MediaPipe's face detectors and their kin): one box
/// regression and one score per anchor, anchors generated from `SSDAnchorOptions`.
/// Pure arithmetic on the two output tensors; the runtime that produced them is not its concern.
public struct BlazeFaceDecoder: DetectionDecoder {
    public let options: BlazeFaceDecoderOptions
    /// In the model's output order.
    public let anchors: [Anchor]
    /// Given to every detection (the manifest's first label, e.g. "face").
    public let label: String?
    /// The one class's threshold (min_score, or its class threshold; infinite when the stage's
    /// classes filter leaves it out).
    let thresholds: ScoreThresholds

    /// Checks the options (a `StageError` names the offending key) and generates the anchors.
    public init(options: BlazeFaceDecoderOptions, classes: DetectionClasses) throws {
        try options.validate()
        self.options = options
        self.anchors = generateAnchors(options.anchors)
        self.label = classes.label(0)
        self.thresholds = classes.scoreThresholds(minScore: options.minScore)
    }

    /// A decoder labelling every detection `label` (nil: unlabelled, id -1).
    public init(options: BlazeFaceDecoderOptions, label: String? = nil) throws {
        try self.init(options: options, classes: try DetectionClasses(labels: label.map { [$0] } ?? []))
    }

    /// Throws unless the output shapes hold exactly one box (`num_coords` values) and one score
    /// per anchor. Call it once the model is loaded: a model/manifest mismatch then stops the
    /// stage with a message instead of producing garbage.
    public func validate(boxesShape: [Int], scoresShape: [Int]) throws {
        let n = anchors.count
        guard let boxValues = TensorShape.elementCount(boxesShape) else {
            throw StageError("the boxes output has shape \(boxesShape): a negative dimension or more values than memory holds")
        }
        if boxesShape.last != options.numCoords {
            throw StageError("the boxes output has shape \(boxesShape) but the manifest's num_coords is \(options.numCoords)")
        }
        if boxValues != n * options.numCoords {
            throw StageError("the boxes output has shape \(boxesShape), \(boxValues / max(1, options.numCoords)) boxes, but the manifest's anchors number \(n)")
        }
        guard let scoreValues = TensorShape.elementCount(scoresShape) else {
            throw StageError("the scores output has shape \(scoresShape): a negative dimension or more values than memory holds")
        }
        if scoreValues != n {
            throw StageError("the scores output has shape \(scoresShape), \(scoreValues) scores, but the manifest's anchors number \(n)")
        }
    }

    /// Which of the model's outputs are the boxes and the scores, by the manifest's references
    /// (a tensor name first, else a decimal index) and, when those are missing or do not fit,
    /// by shape: the boxes output is the one with `num_coords` values per anchor, the scores
    /// output the one with one value per anchor. The pair found is then `validate`d.
    public func resolveOutputs(names: [String], shapes: [[Int]]) throws -> (boxes: Int, scores: Int) {
        precondition(names.count == shapes.count, "one name per output shape")
        let n = anchors.count
        func find(_ reference: String) -> Int? {
            if let i = names.firstIndex(of: reference) { return i }
            if let i = Int(reference), shapes.indices.contains(i) { return i }
            return nil
        }
        func looksLikeBoxes(_ i: Int) -> Bool { shapes[i].last == options.numCoords && TensorShape.elementCount(shapes[i]) == n * options.numCoords }
        func looksLikeScores(_ i: Int) -> Bool { TensorShape.elementCount(shapes[i]) == n }

        var boxes = find(options.boxesOutput)
        var scores = find(options.scoresOutput)
        let fits = boxes.map(looksLikeBoxes) == true && scores.map(looksLikeScores) == true && boxes != scores
        if !fits, let b = shapes.indices.first(where: looksLikeBoxes),
           let s = shapes.indices.first(where: { $0 != b && looksLikeScores($0) }) {
            boxes = b
            scores = s
        }
        guard let boxes, let scores else {
            let listed = zip(names, shapes).map { "\($0) \($1)" }.joined(separator: ", ")
            throw StageError("the model's outputs (\(listed)) include neither boxes_output '\(options.boxesOutput)' and scores_output '\(options.scoresOutput)' nor outputs shaped like \(n) anchors")
        }
        try validate(boxesShape: shapes[boxes], scoresShape: shapes[scores])
        return (boxes, scores)
    }

    /// DetectionDecoder: the boxes and the scores outputs, by `resolveOutputs`.
    public func bind(_ outputs: [ModelOutput]) throws -> [Int] {
        let (boxes, scores) = try resolveOutputs(names: outputs.map(\.name), shapes: outputs.map(\.shape))
        return [boxes, scores]
    }

    /// DetectionDecoder: `decode(boxes:scores:)` of the two bound outputs.
    public func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection] {
        guard outputs.count == 2 else { return [] }
        return decode(boxes: outputs[0], scores: outputs[1])
    }

    /// Detections in normalised model-input coordinates (0…1; a face at the edge may stick out
    /// a little), suppressed as the options say. Anchors scoring below `min_score`, and any
    /// whose values are NaN or infinite or whose box has a negative size, are skipped. Extra
    /// values are ignored and missing ones decode nothing: `validate` catches both earlier.
    public func decode(boxes: [Float], scores: [Float]) -> [Detection] {
        boxes.withUnsafeBufferPointer { b in scores.withUnsafeBufferPointer { s in decode(boxes: b, scores: s) } }
    }

    /// The same, straight from the runtime's output buffers (no copy).
    public func decode(boxes: UnsafeBufferPointer<Float>, scores: UnsafeBufferPointer<Float>) -> [Detection] {
        suppress(candidates(boxes: boxes, scores: scores), options.suppression)
    }

    /// Every anchor above its threshold (`min_score`), decoded, before suppression (in anchor order).
    public func candidates(boxes: UnsafeBufferPointer<Float>, scores: UnsafeBufferPointer<Float>) -> [Detection] {
        let o = options
        let count = min(anchors.count, scores.count, boxes.count / o.numCoords)
        var found: [Detection] = []
        for i in 0..<count {
            guard let score = score(scores[i]), thresholds.admits(0, score) else { continue }
            let anchor = anchors[i]
            let base = i * o.numCoords + o.boxCoordOffset
            let r = (Double(boxes[base]), Double(boxes[base + 1]), Double(boxes[base + 2]), Double(boxes[base + 3]))

            var xCenter, yCenter, w, h: Double
            switch o.boxOrder {
            case .xywh: (xCenter, yCenter, w, h) = (r.0, r.1, r.2, r.3)
            case .yxhw: (yCenter, xCenter, h, w) = (r.0, r.1, r.2, r.3)
            // Distances to the edges: MediaPipe's arithmetic, kept as it is.
            case .xyxy: (xCenter, yCenter, w, h) = ((r.2 - r.0) / 2, (r.3 - r.1) / 2, r.2 + r.0, r.3 + r.1)
            case .yxyx: (xCenter, yCenter, w, h) = ((r.3 - r.1) / 2, (r.2 - r.0) / 2, r.3 + r.1, r.2 + r.0)
            }
            xCenter = xCenter / o.xScale * anchor.width + anchor.xCenter
            yCenter = yCenter / o.yScale * anchor.height + anchor.yCenter
            w = w / o.wScale * anchor.width
            h = h / o.hScale * anchor.height
            guard xCenter.isFinite, yCenter.isFinite, w.isFinite, h.isFinite, w >= 0, h >= 0 else { continue }

            var keypoints: [Point] = []
            keypoints.reserveCapacity(o.numKeypoints)
            for k in 0..<o.numKeypoints {
                let at = i * o.numCoords + o.keypointCoordOffset + k * o.valuesPerKeypoint
                let (kx, ky) = o.boxOrder.yFirst ? (boxes[at + 1], boxes[at]) : (boxes[at], boxes[at + 1])
                let point = Point(x: Double(kx) / o.xScale * anchor.width + anchor.xCenter,
                                  y: Double(ky) / o.yScale * anchor.height + anchor.yCenter)
                guard point.x.isFinite, point.y.isFinite else { break }
                keypoints.append(point)
            }
            guard keypoints.count == o.numKeypoints else { continue }

            found.append(Detection(box: Box(xMin: xCenter - w / 2, yMin: yCenter - h / 2, xMax: xCenter + w / 2, yMax: yCenter + h / 2),
                                   score: score, keypoints: keypoints, label: label, labelId: label == nil ? -1 : 0))
        }
        return found
    }

    /// The 0…1 score of one raw value, nil for NaN.
    func score(_ raw: Float) -> Double? {
        guard !raw.isNaN else { return nil }
        switch options.scores {
        case .probabilities:
            return Double(raw)
        case .logits:
            let clipped = min(max(Double(raw), -options.scoreClippingThresh), options.scoreClippingThresh)
            return 1 / (1 + exp(-clipped))
        }
    }
}
