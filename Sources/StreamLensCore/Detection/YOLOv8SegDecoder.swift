import Foundation

/// Ultralytics' instance-segmentation detectors (YOLOv8-seg, YOLO11-seg) as `yolo export
/// format=onnx` writes them: `output0` is yolov8's table with `num_masks` mask coefficients after
/// each box's class scores ([1, 4+nc+nm, N], or transposed [1, N, 4+nc+nm]), `output1` the mask
/// prototypes [1, nm, mh, mw] over the whole input (160×160 for a 640 input). An object's mask is
/// sigmoid(its coefficients · the prototypes) inside its box.
///
/// The keys yolov8 reads (`output`, `classes`, `coordinates`, `min_score`, `suppression`) mean
/// the same here and have its defaults; yolov8 reads them.
public struct YOLOv8SegDecoderOptions: DetectionDecoderParameters {
    public static let decoderName = "yolov8-seg"
    /// A bound on `num_masks`, far above any model's (Ultralytics': 32), so that sizes stay small.
    public static let maxMasks = 1024

    /// The boxes' output (`output0`): a tensor name or a decimal index; nil: the first shaped for
    /// the class and mask counts.
    public var output: String? = nil
    /// The prototypes' output (`output1`): a name or an index; nil: the first 4-D output.
    public var protosOutput: String? = nil
    /// Mask coefficients per box, and prototypes (Ultralytics: 32).
    public var numMasks = 32
    /// How many classes the model scores; nil: as many as the manifest's labels.
    public var classes: Int? = nil
    public var coordinates: BoxCoordinates = .pixels
    public var minScore = YOLOv8DecoderOptions().minScore
    public var suppression = YOLOv8Decoder.defaultSuppression

    enum CodingKeys: String, CodingKey {
        case output, classes, coordinates, suppression
        case protosOutput = "protos_output"
        case numMasks = "num_masks"
        case minScore = "min_score"
    }

    /// What yolov8 reads of these.
    var boxOptions: YOLOv8DecoderOptions {
        YOLOv8DecoderOptions(output: output, classes: classes, coordinates: coordinates, minScore: minScore, suppression: suppression)
    }

    public func validate(input: ModelManifest.Input) throws {
        try boxOptions.validate(input: input)
        guard numMasks > 0, numMasks <= Self.maxMasks else {
            throw StageError("decoder.parameters.num_masks is \(numMasks); yolov8-seg reads 1…\(Self.maxMasks) mask coefficients a box (Ultralytics' models: 32)")
        }
    }

    public func makeDecoder(input: ModelManifest.Input, classes: DetectionClasses) throws -> any DetectionDecoder {
        try YOLOv8SegDecoder(options: self, input: input, classes: classes)
    }
}

extension YOLOv8SegDecoderOptions {
    /// yolov8's keys as yolov8 reads them, then the masks'.
    public init(from decoder: any Decoder) throws {
        let boxes = try YOLOv8DecoderOptions(from: decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(output: boxes.output, protosOutput: try c.decodeIfPresent(String.self, forKey: .protosOutput),
                  numMasks: try c.decodeIfPresent(Int.self, forKey: .numMasks) ?? 32, classes: boxes.classes,
                  coordinates: boxes.coordinates, minScore: boxes.minScore, suppression: boxes.suppression)
    }
}

/// Decodes a YOLOv8-seg output pair: the boxes as yolov8 decodes them (best class, thresholds,
/// suppression), then for each box kept its mask from the prototypes: Ultralytics too computes
/// masks after suppression, and only inside the box.
public struct YOLOv8SegDecoder: DetectionDecoder {
    public let options: YOLOv8SegDecoderOptions
    /// yolov8's decoder, reading the coefficients after the class scores as no class.
    private(set) var boxDecoder: YOLOv8Decoder
    /// Set by `bind`: the prototypes' height and width.
    private(set) var protos = (height: 0, width: 0)

    public init(options: YOLOv8SegDecoderOptions, input: ModelManifest.Input, classes: DetectionClasses) throws {
        try options.validate(input: input)
        self.options = options
        boxDecoder = try YOLOv8Decoder(options: options.boxOptions, input: input, classes: classes,
                                       maskCoefficients: options.numMasks, family: YOLOv8SegDecoderOptions.decoderName)
    }

    public var classes: DetectionClasses { boxDecoder.classes }

    /// The boxes' output as yolov8 binds it (`output`, else by shape) and the prototypes' (by
    /// `protos_output`, else the first 4-D output), in that order.
    public mutating func bind(_ outputs: [ModelOutput]) throws -> [Int] {
        let family = YOLOv8SegDecoderOptions.decoderName, nm = options.numMasks
        let wanted = "mask prototypes [1, \(nm), H, W]"
        let p = try bindOutput(outputs, reference: options.protosOutput, family: family, wanted: wanted) { $0.count == 4 }
        let (name, s) = (outputs[p].name, outputs[p].shape)
        guard s[0] == 1, s[2] > 0, s[3] > 0 else { throw StageError("\(family): output '\(name)' has shape \(s), not \(wanted)") }
        guard s[1] == nm else {
            throw StageError("\(family): output '\(name)' \(s) holds \(s[1]) mask prototypes but num_masks is \(nm)")
        }
        guard s[2] <= ObjectMask.maxSide, s[3] <= ObjectMask.maxSide else {
            throw StageError("\(family): output '\(name)' \(s) has prototypes larger than \(ObjectMask.maxSide) pixels a side")
        }
        let b = try boxDecoder.bind(outputs)[0]
        protos = (s[2], s[3])
        return [b, p]
    }

    /// yolov8's detections, each with its mask (none when the prototypes' buffer is short).
    public func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection] {
        guard let table = outputs.first else { return [] }
        let scored = boxDecoder.scored(table), candidates = scored.map(\.detection)
        var kept = suppress(candidates, options.suppression)
        let (nm, h, w) = (options.numMasks, protos.height, protos.width)
        guard outputs.count > 1, h > 0, outputs[1].count >= nm * h * w else { return kept }
        // Whose coefficients each result takes: nms and none keep candidates as they are;
        // weighted merges each group into one box, the group being the one nms keeps its best of.
        var leaders = kept
        if options.suppression.method == .weighted {
            var nms = options.suppression
            nms.method = .nms
            leaders = suppress(candidates, nms)
        }
        let n = boxDecoder.heldBoxes(in: table), first = 4 + boxDecoder.classCount
        for (r, leader) in zip(kept.indices, leaders) {
            guard let c = candidates.firstIndex(of: leader) else { continue }
            let coefficients = (0..<nm).map { boxDecoder.value(table, first + $0, box: scored[c].box, of: n) }
            kept[r].mask = mask(coefficients, over: kept[r].box, protos: outputs[1])
        }
        return kept
    }

    /// The mask over `box` (0…1 of the input) of `coefficients`: sigmoid(coefficients ·
    /// prototypes), interpolated bilinearly between prototype pixels (before the sigmoid, as
    /// Ultralytics upsamples), at the prototypes' density: at most their size (only a box larger
    /// than the input needs more, and it is garbage or mostly outside), at least 1×1. Outside the
    /// input nothing; a coefficient that is not a number makes no object (coverage 0).
    func mask(_ coefficients: [Float], over box: Box, protos values: UnsafeBufferPointer<Float>) -> ObjectMask? {
        let (ph, pw) = protos
        guard box.width >= 0, box.height >= 0, box.xMin.isFinite, box.yMin.isFinite, ph > 0, pw > 0 else { return nil }
        func side(_ extent: Double, _ size: Int) -> Int {
            let s = (extent * Double(size)).rounded()
            return s.isFinite ? Int(min(Double(size), max(1, s))) : 1
        }
        let w = side(box.width, pw), h = side(box.height, ph)
        // Sample k of `count` along [low, low + extent] in prototype pixels (centres at integers).
        func position(_ k: Int, _ count: Int, _ low: Double, _ extent: Double, _ size: Int) -> Double {
            (low + (Double(k) + 0.5) / Double(count) * extent) * Double(size) - 0.5
        }
        func clamped(_ p: Double, _ size: Int) -> Double { min(max(p, 0), Double(size - 1)) }
        // The prototype pixels the samples read: the logits are computed there only.
        let x0 = Int(clamped(position(0, w, box.xMin, box.width, pw), pw))
        let x1 = min(pw - 1, Int(clamped(position(w - 1, w, box.xMin, box.width, pw), pw)) + 1)
        let y0 = Int(clamped(position(0, h, box.yMin, box.height, ph), ph))
        let y1 = min(ph - 1, Int(clamped(position(h - 1, h, box.yMin, box.height, ph), ph)) + 1)
        let rw = x1 - x0 + 1, rh = y1 - y0 + 1
        var logits = [Float](repeating: 0, count: rw * rh)
        for (k, c) in coefficients.enumerated() {
            let plane = k * ph * pw
            for y in 0..<rh {
                let row = plane + (y0 + y) * pw + x0
                for x in 0..<rw { logits[y * rw + x] += c * values[row + x] }
            }
        }
        // Beyond ±64 the sigmoid is 0 or 1 anyway; clamped, an infinity cannot make its
        // neighbours' interpolation 0 × ∞ (NaN stays NaN: no object).
        for k in logits.indices where !logits[k].isNaN { logits[k] = min(max(logits[k], -64), 64) }
        var out = [UInt8](repeating: 0, count: w * h)
        for j in 0..<h {
            let py = position(j, h, box.yMin, box.height, ph)
            guard py >= -0.5, py <= Double(ph) - 0.5 else { continue }
            let fy = clamped(py, ph), ya = Int(fy), yb = min(ya + 1, y1), ay = Float(fy - Double(ya))
            for i in 0..<w {
                let px = position(i, w, box.xMin, box.width, pw)
                guard px >= -0.5, px <= Double(pw) - 0.5 else { continue }
                let fx = clamped(px, pw), xa = Int(fx), xb = min(xa + 1, x1), ax = Float(fx - Double(xa))
                func at(_ x: Int, _ y: Int) -> Float { logits[(y - y0) * rw + (x - x0)] }
                let top = at(xa, ya) * (1 - ax) + at(xb, ya) * ax, bottom = at(xa, yb) * (1 - ax) + at(xb, yb) * ax
                let coverage = 1 / (1 + exp(-Double(top * (1 - ay) + bottom * ay)))
                if coverage.isFinite { out[j * w + i] = UInt8((min(1, max(0, coverage)) * 255).rounded()) }
            }
        }
        return ObjectMask(width: w, height: h, values: out)
    }
}
