import Foundation

/// What a second model (run on a region's crop by lensclassify) says, decoded.
public enum RegionResult: Sendable, Equatable {
    case classification(RegionOfInterest.Classification)
    /// Points in 0…1 of the crop (x, y) and z in units of the crop's width; nil when the
    /// model says the object is not there (presence below its threshold).
    case landmarks(name: String, points: [[Double]]?, presence: Double?)
}

/// A region decoder's `decoder.parameters` in a manifest (found by `decoder.name` in
/// `DecoderRegistry.regionDecoders`), like a detector family's.
public protocol RegionDecoderParameters: Codable, Sendable, Equatable {
    static var decoderName: String { get }
    /// A StageError naming the key when something is off (labels: the manifest's).
    func validate(labels: [String]) throws
    /// The decoder for a model of this input (the points' pixel space) and labels.
    func makeDecoder(input: ModelManifest.Input, labels: [String]) -> any RegionDecoder
}

extension RegionDecoderParameters {
    func isEqual(to other: any RegionDecoderParameters) -> Bool { (other as? Self) == self }
}

public protocol RegionDecoder: Sendable {
    /// The outputs read, as indices, in `decode`'s order (a StageError when they do not fit).
    func bind(_ outputs: [ModelOutput]) throws -> [Int]
    func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> RegionResult
}

/// `classifier`: one output of class scores → the best class, its label from the manifest.
/// `activation`: softmax (logits), sigmoid (independent logits) or none (the model's own
/// probabilities).
public struct ClassifierDecoderOptions: RegionDecoderParameters {
    public static let decoderName = "classifier"
    public enum Activation: String, Sendable, Codable { case softmax, sigmoid, none }
    /// The attribute's name ("emotion").
    public var attribute: String
    public var activation: Activation
    public var output: String?
    /// Below it no classification is written.
    public var minConfidence: Double

    enum CodingKeys: String, CodingKey {
        case attribute, activation, output
        case minConfidence = "min_confidence"
    }
    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        attribute = try c.decode(String.self, forKey: .attribute)
        activation = try c.decodeIfPresent(Activation.self, forKey: .activation) ?? .none
        output = try c.decodeIfPresent(String.self, forKey: .output)
        minConfidence = try c.decodeIfPresent(Double.self, forKey: .minConfidence) ?? 0
    }
    public func validate(labels: [String]) throws {
        guard !labels.isEmpty else { throw StageError("a classifier needs its labels (labels or labels_file)") }
        guard !attribute.isEmpty else { throw StageError("decoder.parameters.attribute is empty") }
        guard minConfidence >= 0, minConfidence <= 1 else { throw StageError("decoder.parameters.min_confidence \(minConfidence) is outside 0…1") }
    }
    public func makeDecoder(input: ModelManifest.Input, labels: [String]) -> any RegionDecoder { Reader(options: self, labels: labels) }

    struct Reader: RegionDecoder {
        var options: ClassifierDecoderOptions
        var labels: [String]
        func bind(_ outputs: [ModelOutput]) throws -> [Int] {
            let n = labels.count
            return [try bindOutput(outputs, reference: options.output, family: "classifier", wanted: "\(n) scores (one per label)") {
                TensorShape.elementCount($0) == n
            }]
        }
        func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> RegionResult {
            var scores = outputs[0].map { Double($0).isFinite ? Double($0) : -Double.infinity }
            switch options.activation {
            case .softmax:
                let top = scores.max() ?? 0
                let e = scores.map { exp($0 - top) }
                let sum = e.reduce(0, +)
                scores = e.map { sum > 0 ? $0 / sum : 0 }
            case .sigmoid: scores = scores.map { 1 / (1 + exp(-$0)) }
            case .none: break
            }
            let best = scores.indices.max { scores[$0] < scores[$1] } ?? 0
            let confidence = min(1, max(0, scores.isEmpty ? 0 : scores[best]))
            return .classification(.init(name: options.attribute, label: best < labels.count ? labels[best] : "class \(best)", labelId: best,
                                         confidence: confidence))
        }
    }
}

/// `landmarks`: one output of `count` points of `values_per_point` numbers (x, y[, z]) in the
/// model input's pixels, and optionally a presence output (`presence`: logit or probability)
/// below `min_presence` of which the points are not written.
public struct LandmarksDecoderOptions: RegionDecoderParameters {
    public static let decoderName = "landmarks"
    public enum Presence: String, Sendable, Codable { case logit, probability }
    public var attribute: String
    public var count: Int
    public var valuesPerPoint: Int
    public var output: String?
    public var presenceOutput: String?
    public var presence: Presence
    public var minPresence: Double
    /// The input's size the points are given in (the manifest's input).
    public var inputWidth: Double = 1, inputHeight: Double = 1

    enum CodingKeys: String, CodingKey {
        case attribute, count, output, presence
        case valuesPerPoint = "values_per_point"
        case presenceOutput = "presence_output"
        case minPresence = "min_presence"
    }
    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        attribute = try c.decodeIfPresent(String.self, forKey: .attribute) ?? "landmarks"
        count = try c.decode(Int.self, forKey: .count)
        valuesPerPoint = try c.decodeIfPresent(Int.self, forKey: .valuesPerPoint) ?? 2
        output = try c.decodeIfPresent(String.self, forKey: .output)
        presenceOutput = try c.decodeIfPresent(String.self, forKey: .presenceOutput)
        presence = try c.decodeIfPresent(Presence.self, forKey: .presence) ?? .probability
        minPresence = try c.decodeIfPresent(Double.self, forKey: .minPresence) ?? 0.5
    }
    public func encode(to encoder: any Swift.Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(attribute, forKey: .attribute); try c.encode(count, forKey: .count)
        try c.encode(valuesPerPoint, forKey: .valuesPerPoint); try c.encodeIfPresent(output, forKey: .output)
        try c.encodeIfPresent(presenceOutput, forKey: .presenceOutput); try c.encode(presence, forKey: .presence)
        try c.encode(minPresence, forKey: .minPresence)
    }
    public func validate(labels: [String]) throws {
        guard count > 0, count <= 100_000 else { throw StageError("decoder.parameters.count \(count) is not in 1…100000") }
        guard valuesPerPoint == 2 || valuesPerPoint == 3 else { throw StageError("decoder.parameters.values_per_point must be 2 or 3, got \(valuesPerPoint)") }
        guard minPresence >= 0, minPresence <= 1 else { throw StageError("decoder.parameters.min_presence \(minPresence) is outside 0…1") }
    }
    public func makeDecoder(input: ModelManifest.Input, labels: [String]) -> any RegionDecoder {
        var options = self
        (options.inputWidth, options.inputHeight) = (Double(input.width), Double(input.height))
        return Reader(options: options)
    }

    struct Reader: RegionDecoder {
        var options: LandmarksDecoderOptions
        func bind(_ outputs: [ModelOutput]) throws -> [Int] {
            let n = options.count * options.valuesPerPoint
            let points = try bindOutput(outputs, reference: options.output, family: "landmarks", wanted: "\(n) values (\(options.count) points of \(options.valuesPerPoint))") {
                TensorShape.elementCount($0) == n
            }
            guard let name = options.presenceOutput else { return [points] }
            let presence = try bindOutput(outputs, reference: name, family: "landmarks", wanted: "one value (presence)") { TensorShape.elementCount($0) == 1 }
            return [points, presence]
        }
        func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> RegionResult {
            var presence: Double?
            if outputs.count > 1, let v = outputs[1].first {
                presence = options.presence == .logit ? 1 / (1 + exp(-Double(v))) : Double(v)
                if !(presence ?? 0).isFinite { presence = 0 }
            }
            if let presence, presence < options.minPresence { return .landmarks(name: options.attribute, points: nil, presence: presence) }
            let v = options.valuesPerPoint, data = outputs[0]
            var points: [[Double]] = []
            points.reserveCapacity(options.count)
            for i in 0..<options.count {
                let x = Double(data[i * v]) / options.inputWidth, y = Double(data[i * v + 1]) / options.inputHeight
                guard x.isFinite, y.isFinite else { return .landmarks(name: options.attribute, points: nil, presence: presence) }
                points.append(v == 3 ? [x, y, Double(data[i * v + 2]) / options.inputWidth] : [x, y])
            }
            return .landmarks(name: options.attribute, points: points, presence: presence)
        }
    }
}

extension DecoderRegistry {
    /// Decoders of second models (lensclassify), by `decoder.name`.
    public static let regionDecoders: [any RegionDecoderParameters.Type] = [
        ClassifierDecoderOptions.self,
        LandmarksDecoderOptions.self,
    ]
    public static func regionDecoder(named name: String) -> (any RegionDecoderParameters.Type)? {
        regionDecoders.first { $0.decoderName == name }
    }
}
