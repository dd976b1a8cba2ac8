import Foundation

/// How to read a semantic-segmentation model (a map over the model input, one value per pixel
/// per class), as the `decoder.parameters` of a model manifest. Every class present becomes one
/// region: its box encloses the class's pixels, its mask (`ObjectMask`) is the map's part inside
/// that box. So a person-segmentation model's person is a region like a detector's, and every
/// stage that takes regions (lensblur, lensstylize, lensmetadata, lenszone…) takes it.
///
/// The map's forms (`values`):
/// - `probability` (one channel: [1, H, W, 1], [1, 1, H, W] or [1, H, W]): the first label's
///   probability, 0…1 (MediaPipe's selfie segmentation); `logits`: the same before a sigmoid;
/// - `class_scores` ([1, H, W, C] or [1, C, H, W] by `layout`): one score a class, the pixel's
///   class the highest (DeepLab); the mask is binary.
/// - `class_ids` ([1, H, W] or with a channel of 1): the class's index per pixel.
/// Default: `probability` for one channel, `class_scores` for more.
public struct SegmentationDecoderOptions: DetectionDecoderParameters {
    public static let decoderName = "segmentation"

    public enum Values: String, Sendable, Codable, CaseIterable {
        case probability, logits
        case classScores = "class_scores"
        case classIds = "class_ids"
    }

    /// The map's output: a tensor name or a decimal index; nil: the first output of rank 3 or 4.
    public var output: String?
    public var values: Values?
    /// Where the classes are in a 4-D map of several: "NHWC" (last) or "NCHW" (second); nil:
    /// the model input's layout.
    public var layout: String?
    /// A pixel is the class's when its probability reaches this (`probability`, `logits`);
    /// lensdetect's `threshold` sets it. 0.5: MediaPipe's own threshold.
    public var minScore: Double = 0.5
    /// A class covering less than this fraction of the map is no region (specks).
    public var minArea: Double = 0.001
    /// Class ids that are no object (DeepLab's 0, "background"): never a region.
    public var backgroundClasses: [Int] = []
    /// Unused (one region a class; nothing overlaps), here because every family has one.
    public var suppression = SuppressionOptions(method: .none)

    enum CodingKeys: String, CodingKey {
        case output, values, layout
        case minScore = "min_score"
        case minArea = "min_area"
        case backgroundClasses = "background_classes"
        case suppression
    }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        output = try c.decodeIfPresent(String.self, forKey: .output)
        values = try c.decodeIfPresent(Values.self, forKey: .values)
        layout = try c.decodeIfPresent(String.self, forKey: .layout)
        minScore = try c.decodeIfPresent(Double.self, forKey: .minScore) ?? 0.5
        minArea = try c.decodeIfPresent(Double.self, forKey: .minArea) ?? 0.001
        backgroundClasses = try c.decodeIfPresent([Int].self, forKey: .backgroundClasses) ?? []
        suppression = try c.decodeSuppression(forKey: .suppression, defaults: SuppressionOptions(method: .none))
    }

    public func validate(input: ModelManifest.Input) throws {
        try validateScoring()
        guard minArea >= 0, minArea <= 1 else { throw StageError("decoder.parameters.min_area \(minArea) is outside 0…1") }
        if let layout, layout != "NHWC", layout != "NCHW" { throw StageError("decoder.parameters.layout '\(layout)' is neither NHWC nor NCHW") }
    }

    public func makeDecoder(input: ModelManifest.Input, classes: DetectionClasses) throws -> any DetectionDecoder {
        try validate(input: input)
        return SegmentationDecoder(options: self, channelsLast: (layout ?? input.layout.rawValue) != "NCHW", classes: classes)
    }
}

/// Turns a segmentation map into one region a class present, each with its mask.
public struct SegmentationDecoder: DetectionDecoder {
    public let options: SegmentationDecoderOptions
    public let classes: DetectionClasses
    let channelsLast: Bool
    let thresholds: ScoreThresholds
    /// The bound map: height, width, classes, and where the classes are.
    private(set) var map: (height: Int, width: Int, channels: Int, channelsLast: Bool) = (0, 0, 0, true)
    private(set) var values: SegmentationDecoderOptions.Values = .probability

    init(options: SegmentationDecoderOptions, channelsLast: Bool, classes: DetectionClasses) {
        self.options = options
        self.classes = classes
        self.channelsLast = channelsLast
        thresholds = classes.scoreThresholds(minScore: options.minScore)
    }

    public mutating func bind(_ outputs: [ModelOutput]) throws -> [Int] {
        let i = try bindOutput(outputs, reference: options.output, family: "segmentation", wanted: "a map [1, H, W], [1, H, W, C] or [1, C, H, W]") { s in
            (s.count == 3 || s.count == 4) && s[0] == 1 && s.dropFirst().allSatisfy { $0 > 0 }
        }
        let s = outputs[i].shape
        if s.count == 3 {
            map = (s[1], s[2], 1, true)
        } else if s[3] == 1 || (channelsLast && s[1] != 1) {
            map = (s[1], s[2], s[3], true)
        } else {
            map = (s[2], s[3], s[1], false)
        }
        guard map.height <= ObjectMask.maxSide, map.width <= ObjectMask.maxSide, map.channels <= 4096 else {
            throw StageError("segmentation: output '\(outputs[i].name)' \(s) is too large a map")
        }
        values = options.values ?? (map.channels == 1 ? .probability : .classScores)
        if values == .classScores, map.channels < 2 {
            throw StageError("segmentation: class_scores needs a map of two classes or more; '\(outputs[i].name)' is \(s)")
        }
        if values != .classScores, map.channels != 1 {
            throw StageError("segmentation: \(values.rawValue) needs a map of one channel; '\(outputs[i].name)' is \(s) (values: class_scores?)")
        }
        return [i]
    }

    public func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection] {
        let (h, w, c) = (map.height, map.width, map.channels)
        guard let data = outputs.first, data.count >= h * w * c, h > 0, w > 0 else { return [] }
        // Each pixel's class and its coverage (0…255) of that class.
        var classOf = [Int32](repeating: -1, count: h * w)
        var coverage = [UInt8](repeating: 0, count: h * w)
        switch values {
        case .probability, .logits:
            let threshold = thresholds.admits(0, 1) ? min(1, max(0, options.minScore)) : .infinity
            for p in 0..<(h * w) {
                var v = Double(data[p])
                if values == .logits { v = 1 / (1 + exp(-v)) }
                guard v.isFinite else { continue }
                v = min(1, max(0, v))
                // Scaled so the threshold lands on 128: the mask's own 0.5.
                let scaled = v < threshold ? 0.5 * v / max(threshold, 1e-9) : 0.5 + 0.5 * (v - threshold) / max(1 - threshold, 1e-9)
                coverage[p] = UInt8((min(1, scaled) * 255).rounded())
                if v >= threshold { classOf[p] = 0 }
            }
        case .classScores:
            for p in 0..<(h * w) {
                var best = -Float.infinity, k = -1
                for ch in 0..<c {
                    let v = map.channelsLast ? data[p * c + ch] : data[ch * h * w + p]
                    if v > best { best = v; k = ch }
                }
                if k >= 0, best.isFinite { classOf[p] = Int32(k); coverage[p] = 255 }
            }
        case .classIds:
            for p in 0..<(h * w) {
                let v = data[p]
                if v.isFinite, v >= 0, v < 1e6 { classOf[p] = Int32(v.rounded()); coverage[p] = 255 }
            }
        }
        // The box of each class's pixels, its count and its summed coverage: by index for the
        // map's own classes, in a dictionary only for class ids (any number).
        typealias Extent = (x0: Int, y0: Int, x1: Int, y1: Int, n: Int, sum: Int)
        var byIndex = [Extent?](repeating: nil, count: values == .classIds ? 0 : c)
        var byId: [Int32: Extent] = [:]
        for y in 0..<h {
            for x in 0..<w {
                let k = classOf[y * w + x]
                guard k >= 0 else { continue }
                let v = Int(coverage[y * w + x])
                var f = values == .classIds ? byId[k] : byIndex[Int(k)]
                if f == nil {
                    f = (x, y, x, y, 1, v)
                } else {
                    f!.x0 = min(f!.x0, x); f!.x1 = max(f!.x1, x); f!.y0 = min(f!.y0, y); f!.y1 = max(f!.y1, y)
                    f!.n += 1; f!.sum += v
                }
                if values == .classIds { byId[k] = f } else { byIndex[Int(k)] = f }
            }
        }
        var found = byId
        for (k, f) in byIndex.enumerated() { if let f { found[Int32(k)] = f } }
        var detections: [Detection] = []
        for (k, f) in found.sorted(by: { $0.key < $1.key }) {
            let id = Int(k)
            guard !options.backgroundClasses.contains(id), Double(f.n) >= options.minArea * Double(h * w) else { continue }
            let score = values == .classScores || values == .classIds ? Double(f.n) / Double(h * w) : Double(f.sum) / Double(f.n) / 255
            guard values == .probability || values == .logits || thresholds.admits(id, 1) else { continue }
            // One map pixel more on every side, so the outline's soft edge between a pixel in the
            // class and one outside is inside the box (clamped to the map).
            let x0 = max(0, f.x0 - 1), y0 = max(0, f.y0 - 1), x1 = min(w - 1, f.x1 + 1), y1 = min(h - 1, f.y1 + 1)
            let mw = x1 - x0 + 1, mh = y1 - y0 + 1
            var mask = [UInt8](repeating: 0, count: mw * mh)
            for y in y0...y1 {
                for x in x0...x1 where classOf[y * w + x] == k || values == .probability || values == .logits {
                    mask[(y - y0) * mw + (x - x0)] = coverage[y * w + x]
                }
            }
            let box = Box(xMin: Double(x0) / Double(w), yMin: Double(y0) / Double(h), xMax: Double(x1 + 1) / Double(w), yMax: Double(y1 + 1) / Double(h))
            detections.append(Detection(box: box, score: min(1, score), label: classes.label(id), labelId: id,
                                        mask: ObjectMask(width: mw, height: mh, values: mask)))
        }
        return detections
    }
}
