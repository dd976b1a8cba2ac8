/// One output of a loaded model, as a decoder binds it: its name and its shape.
public struct ModelOutput: Sendable, Equatable {
    public var name: String
    public var shape: [Int]
    public init(name: String, shape: [Int]) {
        self.name = name
        self.shape = shape
    }
}

/// What a detector family's outputs mean: which outputs it reads, and how their numbers become
/// detections. Pure arithmetic on float32 tensors; the runtime that produced them (OpenVINO
/// here, an inference server) is not its concern.
public protocol DetectionDecoder: Sendable {
    /// The model's outputs this decoder reads, as indices into `outputs`, in the order `decode`
    /// takes them: by the names the manifest gives, else by shape. A StageError names what
    /// does not fit (a model and a manifest that do not belong together). Mutating: a family
    /// whose layout only the shapes tell (YOLOv8's [1, 4+nc, N] or [1, N, 4+nc]) keeps it.
    mutating func bind(_ outputs: [ModelOutput]) throws -> [Int]

    /// The bound outputs (in `bind`'s order) as detections in normalised model-input
    /// coordinates (0…1 of the input; an object at the edge may stick out a little), each with
    /// its label id and label, after the family's suppression.
    func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection]
}

/// A detector family's `decoder.parameters` in a model manifest, read by the family itself
/// (snake_case keys). Its name is the manifest's `decoder.name`; `DecoderRegistry` finds it.
public protocol DetectionDecoderParameters: Codable, Sendable, Equatable {
    /// The manifest's `decoder.name` for this family ("blazeface").
    static var decoderName: String { get }
    /// What JSON types cannot rule out, and whether the parameters fit the model's input (a
    /// StageError naming the key).
    func validate(input: ModelManifest.Input) throws
    /// Detections scoring below this are dropped before suppression (`min_score`; a class may
    /// have its own in the manifest's `class_thresholds`). lensdetect's `threshold` sets it.
    var minScore: Double { get set }
    /// How overlapping detections become one (`suppression`). lensdetect's `suppression` and
    /// `class-agnostic` change it.
    var suppression: SuppressionOptions { get set }
    /// A decoder for a model with this `input`, reporting `classes` (labels, per-class
    /// thresholds, the stage's filter). A StageError names what does not fit (a class count
    /// that disagrees with the labels).
    func makeDecoder(input: ModelManifest.Input, classes: DetectionClasses) throws -> any DetectionDecoder
}

extension DetectionDecoderParameters {
    func isEqual(to other: any DetectionDecoderParameters) -> Bool { (other as? Self) == self }

    /// What every family checks of its scoring: `min_score` in 0…1, the suppression's IoU.
    public func validateScoring() throws {
        guard minScore >= 0, minScore <= 1 else { throw StageError("decoder.parameters.min_score \(minScore) is outside 0…1") }
        try suppression.validate()
    }
}

/// The output named by `reference` (a tensor name, else a decimal index), which must fit; with
/// no reference, the first that fits. A StageError listing the outputs says what `family`
/// wanted otherwise.
func bindOutput(_ outputs: [ModelOutput], reference: String?, family: String, wanted: String, fits: ([Int]) -> Bool) throws -> Int {
    if let reference {
        guard let i = outputs.firstIndex(where: { $0.name == reference }) ?? Int(reference).flatMap({ outputs.indices.contains($0) ? $0 : nil }) else {
            throw StageError("\(family): the model has no output '\(reference)' (its outputs: \(describe(outputs)))")
        }
        guard fits(outputs[i].shape) else {
            throw StageError("\(family): output '\(outputs[i].name)' has shape \(outputs[i].shape), not \(wanted)")
        }
        return i
    }
    guard let i = outputs.firstIndex(where: { fits($0.shape) }) else {
        throw StageError("\(family): no output of the model (\(describe(outputs))) is \(wanted)")
    }
    return i
}

/// "'output0' [1, 84, 8400], …" for messages.
func describe(_ outputs: [ModelOutput]) -> String {
    outputs.map { "'\($0.name)' \($0.shape)" }.joined(separator: ", ")
}

/// The detector families this build knows, by the name a manifest's `decoder.name` gives.
/// A new family is one file (its parameters, conforming to `DetectionDecoderParameters`, and its
/// decoder) plus its line here: Swift has no static initialisers, so this list is where
/// families are named once (and `streamlens` lists them in its error messages).
public enum DecoderRegistry {
    public static let detectors: [any DetectionDecoderParameters.Type] = [
        BlazeFaceDecoderOptions.self,
        CenterFaceDecoderOptions.self,
        YOLOv8DecoderOptions.self,
        YOLOv8SegDecoderOptions.self,
        YOLOv5DecoderOptions.self,
        SSDDecoderOptions.self,
        SegmentationDecoderOptions.self,
        TextDetectionDecoderOptions.self,
    ]

    /// The family named `name`, nil when there is none.
    public static func detector(named name: String) -> (any DetectionDecoderParameters.Type)? {
        detectors.first { $0.decoderName == name }
    }

    /// Every name a manifest may give: the detector families, then `image` (image-to-image
    /// models: the output is a picture, used by lensstylize).
    public static var names: [String] { detectors.map { $0.decoderName } + [imageDecoderName] + regionDecoders.map { $0.decoderName } }

    public static let imageDecoderName = "image"
}
