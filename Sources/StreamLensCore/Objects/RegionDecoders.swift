import Foundation

/// What a second model (run on a region's crop by lensclassify) says, decoded.
public enum RegionResult: Sendable, Equatable {
    case classification(RegionOfInterest.Classification)
    /// Points in 0…1 of the crop (x, y) and z in units of the crop's width; nil when the
    /// model says the object is not there (presence below its threshold).
    case landmarks(name: String, points: [[Double]]?, presence: Double?)
    /// A result with the object's mask over the crop (the model's input, so 0…1 of the crop
    /// each way; a coverage as `ObjectMask`'s), which lensclassify maps onto the frame through
    /// the crop's placement (`ObjectCrop.Placement.frameMask`).
    indirect case masked(RegionResult, cropMask: ObjectMask)
    /// Text read off the crop (`ctc`): the attribute's name, the reading ("" when there is
    /// none worth keeping) and its score 0…1.
    case text(name: String, reading: String, score: Double)
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

/// `landmarks`: one output of `count` points of `values_per_point` numbers (x, y[, z], and
/// numbers not written, as BlazePose's visibility and presence) in the model input's pixels (a
/// named `output` may hold more points: the first `count` are taken), and optionally a presence
/// output (`presence`: logit or probability) below `min_presence` of which nothing is written.
/// Optionally a mask output (`mask_output`: one channel over the crop at the input's aspect
/// ratio, any resolution; `mask_values`: probability or logits): the object's mask, which
/// lensclassify puts on the region (BlazePose's person mask).
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
    public var maskOutput: String?
    public var maskValues: MaskValues
    public enum MaskValues: String, Sendable, Codable { case probability, logits }
    /// The input's size the points are given in (the manifest's input).
    public var inputWidth: Double = 1, inputHeight: Double = 1

    enum CodingKeys: String, CodingKey {
        case attribute, count, output, presence
        case valuesPerPoint = "values_per_point"
        case presenceOutput = "presence_output"
        case minPresence = "min_presence"
        case maskOutput = "mask_output"
        case maskValues = "mask_values"
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
        maskOutput = try c.decodeIfPresent(String.self, forKey: .maskOutput)
        maskValues = try c.decodeIfPresent(MaskValues.self, forKey: .maskValues) ?? .probability
    }
    public func encode(to encoder: any Swift.Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(attribute, forKey: .attribute); try c.encode(count, forKey: .count)
        try c.encode(valuesPerPoint, forKey: .valuesPerPoint); try c.encodeIfPresent(output, forKey: .output)
        try c.encodeIfPresent(presenceOutput, forKey: .presenceOutput); try c.encode(presence, forKey: .presence)
        try c.encode(minPresence, forKey: .minPresence)
        try c.encodeIfPresent(maskOutput, forKey: .maskOutput)
        if maskOutput != nil { try c.encode(maskValues, forKey: .maskValues) }
    }
    public func validate(labels: [String]) throws {
        guard count > 0, count <= 100_000 else { throw StageError("decoder.parameters.count \(count) is not in 1…100000") }
        guard (2...16).contains(valuesPerPoint) else { throw StageError("decoder.parameters.values_per_point must be 2…16 (x, y[, z], numbers not written), got \(valuesPerPoint)") }
        guard minPresence >= 0, minPresence <= 1 else { throw StageError("decoder.parameters.min_presence \(minPresence) is outside 0…1") }
        if let maskOutput, maskOutput.isEmpty { throw StageError("decoder.parameters.mask_output is empty") }
    }
    public func makeDecoder(input: ModelManifest.Input, labels: [String]) -> any RegionDecoder {
        var options = self
        (options.inputWidth, options.inputHeight) = (Double(input.width), Double(input.height))
        return Reader(options: options)
    }

    struct Reader: RegionDecoder {
        var options: LandmarksDecoderOptions
        /// The mask's height and width in a shape of one channel: [1, H, W, 1], [1, 1, H, W],
        /// [1, H, W] or [H, W]; nil for another.
        static func maskSize(_ shape: [Int]) -> (height: Int, width: Int)? {
            var dims = shape
            if dims.count == 4, dims[0] == 1 { dims = dims[3] == 1 ? [dims[1], dims[2]] : dims[1] == 1 ? [dims[2], dims[3]] : dims }
            if dims.count == 3, dims[0] == 1 { dims.removeFirst() }
            guard dims.count == 2, dims[0] > 0, dims[1] > 0, dims[0] <= ObjectMask.maxSide, dims[1] <= ObjectMask.maxSide else { return nil }
            return (dims[0], dims[1])
        }

        func bind(_ outputs: [ModelOutput]) throws -> [Int] {
            let n = options.count * options.valuesPerPoint, named = options.output != nil
            let points = try bindOutput(outputs, reference: options.output, family: "landmarks", wanted: "\(n) values (\(options.count) points of \(options.valuesPerPoint))") {
                guard let e = TensorShape.elementCount($0) else { return false }
                return e == n || (named && e > n && e % options.valuesPerPoint == 0)
            }
            var bound = [points]
            if let name = options.presenceOutput {
                bound.append(try bindOutput(outputs, reference: name, family: "landmarks", wanted: "one value (presence)") { TensorShape.elementCount($0) == 1 })
            }
            if let name = options.maskOutput {
                // Over the crop, so at the input's aspect ratio: `decode` finds its width from
                // its size alone.
                let (w, h) = (Int(options.inputWidth), Int(options.inputHeight))
                bound.append(try bindOutput(outputs, reference: name, family: "landmarks",
                                            wanted: "one channel at the input's aspect ratio (\(w)x\(h), or a multiple of \(w / greatestCommonDivisor(w, h))x\(h / greatestCommonDivisor(w, h)))") {
                    guard let (mh, mw) = Self.maskSize($0) else { return false }
                    return mw * h == mh * w
                })
            }
            return bound
        }

        func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> RegionResult {
            var presence: Double?
            if options.presenceOutput != nil, outputs.count > 1, let v = outputs[1].first {
                presence = options.presence == .logit ? 1 / (1 + exp(-Double(v))) : Double(v)
                if !(presence ?? 0).isFinite { presence = 0 }
            }
            // MediaPipe's pose graph gates the mask by the same presence as the points.
            if let presence, presence < options.minPresence { return .landmarks(name: options.attribute, points: nil, presence: presence) }
            let v = options.valuesPerPoint, data = outputs[0]
            var points: [[Double]] = []
            points.reserveCapacity(options.count)
            for i in 0..<options.count {
                let x = Double(data[i * v]) / options.inputWidth, y = Double(data[i * v + 1]) / options.inputHeight
                guard x.isFinite, y.isFinite else { return .landmarks(name: options.attribute, points: nil, presence: presence) }
                points.append(v >= 3 ? [x, y, Double(data[i * v + 2]) / options.inputWidth] : [x, y])
            }
            let result = RegionResult.landmarks(name: options.attribute, points: points, presence: presence)
            guard options.maskOutput != nil, let mask = cropMask(outputs[outputs.count - 1]) else { return result }
            return .masked(result, cropMask: mask)
        }

        /// The mask output as coverage over the crop; its width from its size and the input's
        /// aspect ratio (`bind` checked they agree).
        func cropMask(_ data: UnsafeBufferPointer<Float>) -> ObjectMask? {
            let w = Int((Double(data.count) * options.inputWidth / options.inputHeight).squareRoot().rounded())
            guard w > 0, data.count % w == 0 else { return nil }
            let logits = options.maskValues == .logits
            let values = data.map { raw -> UInt8 in
                let value = Double(raw)
                let p = logits ? 1 / (1 + exp(-value)) : value
                return p.isFinite ? UInt8((min(max(p, 0), 1) * 255).rounded()) : 0
            }
            return ObjectMask(width: w, height: data.count / w, values: values)
        }
    }
}

private func greatestCommonDivisor(_ a: Int, _ b: Int) -> Int { b == 0 ? max(a, 1) : greatestCommonDivisor(b, a % b) }

extension DecoderRegistry {
    /// Decoders of second models (lensclassify), by `decoder.name`.
    public static let regionDecoders: [any RegionDecoderParameters.Type] = [
        ClassifierDecoderOptions.self,
        LandmarksDecoderOptions.self,
        TextRecognitionDecoderOptions.self,
    ]
    public static func regionDecoder(named name: String) -> (any RegionDecoderParameters.Type)? {
        regionDecoders.first { $0.decoderName == name }
    }
}
