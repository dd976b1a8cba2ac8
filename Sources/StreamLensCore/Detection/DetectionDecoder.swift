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
    /// does not fit (a model and a manifest that do not belong together).
    func bind(_ outputs: [ModelOutput]) throws -> [Int]

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
    /// The stage's `threshold` and `suppression` overrides (nil: the manifest's).
    mutating func override(minScore: Double?, suppression: SuppressionOptions.Method?)
    /// A decoder labelling its classes with `labels` (the manifest's; index = label id).
    func makeDecoder(labels: [String]) throws -> any DetectionDecoder
    /// The same for a model fed `input`: families whose outputs are in input pixels or on a
    /// grid over the input (CenterFace) need its size to normalise. By default `makeDecoder(labels:)`.
    func makeDecoder(labels: [String], input: ModelManifest.Input) throws -> any DetectionDecoder
}

extension DetectionDecoderParameters {
    func isEqual(to other: any DetectionDecoderParameters) -> Bool { (other as? Self) == self }

    public func makeDecoder(labels: [String], input: ModelManifest.Input) throws -> any DetectionDecoder {
        try makeDecoder(labels: labels)
    }
}

/// The detector families this build knows, by the name a manifest's `decoder.name` gives.
/// A new family is one file (its parameters, conforming to `DetectionDecoderParameters`, and its
/// decoder) plus its line here: Swift has no static initialisers, so this list is where
/// families are named once (and `streamlens` lists them in its error messages).
public enum DecoderRegistry {
    public static let detectors: [any DetectionDecoderParameters.Type] = [
        BlazeFaceDecoderOptions.self,
        CenterFaceDecoderOptions.self,
    ]

    /// The family named `name`, nil when there is none.
    public static func detector(named name: String) -> (any DetectionDecoderParameters.Type)? {
        detectors.first { $0.decoderName == name }
    }

    /// Every name a manifest may give: the detector families, then `image` (image-to-image
    /// models: the output is a picture, used by lensstylize).
    public static var names: [String] { detectors.map { $0.decoderName } + [imageDecoderName] }

    public static let imageDecoderName = "image"
}
