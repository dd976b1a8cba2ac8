import Foundation

/// `ctc`: a text recognizer's output read by greedy CTC (connectionist temporal
/// classification; PaddleOCR's `CTCLabelDecode`): [1, T, C] scores, one row per step along the
/// line; each step's best class is taken, repeats of a class on consecutive steps merged, the
/// blank class dropped, and the rest become characters. Classes: the blank (`blank`, 0), then
/// the manifest's labels (its character list, one a line), then, with `space`, a space. The
/// reading's score is the mean of its characters' scores (0 with none).
///
/// The reading goes on the region as attributes: `attribute` ("text") and its score as
/// `attribute`_score; lensclassify votes over a tracked object's readings (see `TextVotes`).
public struct TextRecognitionDecoderOptions: RegionDecoderParameters {
    public static let decoderName = "ctc"
    public enum Activation: String, Sendable, Codable { case softmax, none }
    /// The attribute's name ("text"); its score is this + "_score".
    public var attribute: String = "text"
    public var output: String?
    /// The blank class's index: 0 (PaddleOCR's) or -1 (the last, as some exports put it).
    public var blank: Int = 0
    /// Whether a space follows the labels as a class (PaddleOCR's `use_space_char`, true).
    public var space: Bool = true
    /// none: the model's own probabilities (PP-OCR ends in a softmax); softmax: logits.
    public var activation: Activation = .none
    /// Readings scoring under this are no reading (PaddleOCR's `drop_score`, 0.5).
    public var minScore: Double = 0.5

    enum CodingKeys: String, CodingKey {
        case attribute, output, blank, space, activation
        case minScore = "min_score"
    }

    public init() {}

    public init(from decoder: any Swift.Decoder) throws {
        self.init()
        let c = try decoder.container(keyedBy: CodingKeys.self)
        output = try c.decodeIfPresent(String.self, forKey: .output)
        try c.update(&attribute, .attribute)
        try c.update(&blank, .blank)
        try c.update(&space, .space)
        try c.update(&activation, .activation)
        try c.update(&minScore, .minScore)
    }

    public func validate(labels: [String]) throws {
        guard !labels.isEmpty else { throw StageError("a ctc decoder needs the recognizer's characters as its labels (labels or labels_file)") }
        guard !attribute.isEmpty else { throw StageError("decoder.parameters.attribute is empty") }
        guard blank == 0 || blank == -1 else { throw StageError("decoder.parameters.blank is \(blank); it must be 0 (the first class) or -1 (the last)") }
        guard minScore.isFinite, minScore >= 0, minScore <= 1 else { throw StageError("decoder.parameters.min_score \(minScore) is outside 0…1") }
    }

    public func makeDecoder(input: ModelManifest.Input, labels: [String]) -> any RegionDecoder {
        var characters = labels
        if space { characters.append(" ") }
        return Reader(options: self, characters: characters)
    }

    /// The greedy CTC reader over `characters` (the classes but the blank, in order).
    public struct Reader: RegionDecoder {
        public var options: TextRecognitionDecoderOptions
        public var characters: [String]
        var classes: Int { characters.count + 1 }
        var blankIndex: Int { options.blank == 0 ? 0 : characters.count }

        public func bind(_ outputs: [ModelOutput]) throws -> [Int] {
            let c = classes
            return [try bindOutput(outputs, reference: options.output, family: "ctc",
                                   wanted: "[1, steps, \(c)] (the blank, \(characters.count) characters)") { shape in
                guard shape.count >= 2, shape.last == c, let n = TensorShape.elementCount(shape) else { return false }
                return n >= c && shape.dropLast().dropLast().allSatisfy { $0 == 1 }
            }]
        }

        public func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> RegionResult {
            let (text, score) = read(outputs.first ?? UnsafeBufferPointer(start: nil, count: 0))
            return .text(name: options.attribute, reading: score >= options.minScore ? text : "", score: score)
        }

        /// The reading and its score, before `min_score`. Scores that are NaN never win a step.
        public func read(_ scores: UnsafeBufferPointer<Float>) -> (String, Double) {
            let c = classes
            guard c > 1, scores.count >= c, scores.count % c == 0 else { return ("", 0) }
            var text = "", total = 0.0, count = 0, previous = -1
            for step in 0..<(scores.count / c) {
                let row = UnsafeBufferPointer(rebasing: scores[(step * c)..<((step + 1) * c)])
                var best = -1, top = -Float.infinity
                for k in 0..<c where row[k] > top { best = k; top = row[k] } // NaN > top is false
                defer { previous = best }
                guard best >= 0, best != blankIndex, best != previous else { continue }
                var p = Double(top)
                if options.activation == .softmax {
                    let sum = row.reduce(0.0) { $1.isFinite ? $0 + exp(Double($1 - top)) : $0 }
                    p = sum > 0 ? 1 / sum : 0
                }
                text += characters[options.blank == 0 ? best - 1 : best]
                total += min(max(p, 0), 1)
                count += 1
            }
            return (text, count > 0 ? total / Double(count) : 0)
        }

        public func decode(_ scores: [Float]) -> RegionResult { scores.withUnsafeBufferPointer { decode([$0]) } }
    }
}
