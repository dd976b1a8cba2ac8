import Foundation

/// Everything StreamLens needs to know about one model file, as versioned JSON beside it
/// (Models/*.json): input size and pre-processing, how to crop frames, how to decode the
/// outputs, labels and licence. A new model of a known family is a new manifest, not new code.
///
/// ```json
/// { "schema_version": 1, "name": "face-short-range", "model": "face_detection_short_range.tflite",
///   "input": { "width": 128, "height": 128, "color_order": "RGB", "value_range": [-1, 1], "layout": "NHWC" },
///   "crop": "letterbox",
///   "decoder": { "name": "blazeface", "parameters": { … BlazeFaceDecoderOptions … } },
///   "labels": ["face"], "licence": "Apache-2.0 …" }
/// ```
///
/// A multi-class detector may name its labels in a file beside it and give some classes their
/// own threshold: `"labels_file": "coco.txt", "class_thresholds": {"person": 0.4}`.
public struct ModelManifest: Sendable, Codable, Equatable {
    /// The only `schema_version` this code reads.
    public static let schemaVersion = 1

    public var schemaVersion: Int
    public var name: String
    /// The model file: `catalogue:NAME/FILE` (installed by `streamlens models fetch NAME`), or a
    /// path relative to the manifest's folder (or absolute). See `resolve`.
    public var model: String
    public var input: Input
    /// How frames are fitted to the input (default letterbox).
    public var crop: CropMode
    public var decoder: DecoderSpec
    /// Arbitrary-style models only: the network that turns a style image into the vector the
    /// main model takes as its second input.
    public var style: StyleSpec?
    /// Second models only (decoders classifier, landmarks, ctc): how a region becomes the input.
    public var objectCrop: ObjectCrop?
    /// Detection labels, index = label id (absent for image-to-image models). With
    /// `labels_file`, read from that file by `load`.
    public var labels: [String]
    /// A file of labels, one a line (Models/labels/coco.txt), relative to the manifest's
    /// folder (or absolute): for long lists, instead of `labels`.
    public var labelsFile: String?
    /// Minimum scores by label, replacing the decoder's `min_score` for those classes.
    public var classThresholds: [String: Double]
    public var licence: String
    /// Where the model came from: the command that trained or converted it, with its seed.
    public var provenance: String?

    /// The model's input tensor and the pixel values it expects.
    public struct Input: Sendable, Codable, Equatable {
        /// GRAY: one channel, 0.299 R + 0.587 G + 0.114 B (OpenCV's weights; second models only).
        public enum ColorOrder: String, Sendable, Codable, CaseIterable { case rgb = "RGB", bgr = "BGR", gray = "GRAY" }
        public enum Layout: String, Sendable, Codable, CaseIterable { case nhwc = "NHWC", nchw = "NCHW" }

        public var width: Int
        public var height: Int
        public var colorOrder: ColorOrder
        /// What 0 and 255 of an 8-bit channel become: [-1, 1], [0, 1], [0, 255], …
        public var valueRange: [Double]
        public var layout: Layout
        /// The image input's name when the model has several inputs (arbitrary-style transfer
        /// networks take the frame and a style vector).
        public var name: String? = nil
        /// Whether the model file's own fixed input shape may be replaced by [1, 3, height, width]
        /// (default false). Fully convolutional detectors (CenterFace: [10,3,32,32] in the file)
        /// run at whatever size the manifest chooses; without it a fixed shape that differs from
        /// the manifest is refused, since most detectors' decoders are made for one size.
        public var resizable: Bool = false
        /// Per channel (in `color_order`), after `value_range`: (v - mean) / std (ImageNet's
        /// [0.485, 0.456, 0.406] and [0.229, 0.224, 0.225] over [0, 1]). Default none.
        public var channelMean: [Double]? = nil
        public var channelStd: [Double]? = nil
        /// A resizable detector's size chosen for each stream from its frames (PaddleOCR's
        /// `DetResizeForTest`): `width` and `height` are then only what validation and tools
        /// see. Nil: always `width` × `height`.
        public var sizeFromFrame: SizeFromFrame? = nil

        enum CodingKeys: String, CodingKey {
            case width, height, layout, name, resizable
            case sizeFromFrame = "size_from_frame"
            case colorOrder = "color_order"
            case valueRange = "value_range"
            case channelMean = "mean", channelStd = "std"
        }
    }

    /// Which decoder turns the outputs into results, and its parameters: a detector family
    /// from `DecoderRegistry` (which reads its own `parameters`), or "image" (an image-to-image
    /// model: the output is a picture).
    public struct DecoderSpec: Sendable, Codable, Equatable {
        public enum Parameters: Sendable, Equatable {
            case detector(any DetectionDecoderParameters)
            case image(ImageOutput)
            /// A second model's, run on regions (lensclassify): a classifier, landmarks.
            case region(any RegionDecoderParameters)

            public static func == (a: Parameters, b: Parameters) -> Bool {
                switch (a, b) {
                case let (.detector(x), .detector(y)): return x.isEqual(to: y)
                case let (.image(x), .image(y)): return x == y
                case let (.region(x), .region(y)): return x.isEqual(to: y)
                default: return false
                }
            }
        }
        public var parameters: Parameters
        public var name: String {
            switch parameters {
            case .detector(let p): return type(of: p).decoderName
            case .image: return DecoderRegistry.imageDecoderName
            case .region(let p): return type(of: p).decoderName
            }
        }
        /// A second model's decoder parameters, when this is one.
        public var region: (any RegionDecoderParameters)? {
            if case .region(let p) = parameters { return p }
            return nil
        }
        /// The detector family's parameters, when this is a detector.
        public var detector: (any DetectionDecoderParameters)? {
            if case .detector(let p) = parameters { return p }
            return nil
        }
        /// The BlazeFace options, when this is a BlazeFace decoder.
        public var blazeFace: BlazeFaceDecoderOptions? { detector as? BlazeFaceDecoderOptions }
        /// The output image's description, when this is an image-to-image model.
        public var image: ImageOutput? {
            if case .image(let output) = parameters { return output }
            return nil
        }

        public init(_ parameters: Parameters) { self.parameters = parameters }
        public init(parameters: any DetectionDecoderParameters) { self.parameters = .detector(parameters) }

        enum CodingKeys: String, CodingKey { case name, parameters }

        /// Reads `parameters` only for a known name, with that family's own reader, so an
        /// unknown decoder is reported as such rather than as a missing key of another
        /// decoder's parameters (and a bad key keeps its path: decoder.parameters.…).
        public init(from decoder: any Swift.Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            let name = try c.decode(String.self, forKey: .name)
            if name == DecoderRegistry.imageDecoderName {
                parameters = .image(try c.decodeIfPresent(ImageOutput.self, forKey: .parameters) ?? ImageOutput())
            } else if let family = DecoderRegistry.detector(named: name) {
                parameters = .detector(try family.init(from: try c.superDecoder(forKey: .parameters)))
            } else if let family = DecoderRegistry.regionDecoder(named: name) {
                parameters = .region(try family.init(from: try c.superDecoder(forKey: .parameters)))
            } else {
                throw UnknownDecoder(name: name)
            }
        }

        public func encode(to encoder: any Swift.Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(name, forKey: .name)
            switch parameters {
            case .detector(let p): try p.encode(to: c.superEncoder(forKey: .parameters))
            case .image(let output): try c.encode(output, forKey: .parameters)
            case .region(let p): try p.encode(to: c.superEncoder(forKey: .parameters))
            }
        }
    }

    /// An image-to-image model's output picture: layout, channel order and the values that
    /// mean 0 and 255 (Create ML's ends in ×255, Magenta's in a sigmoid, 0…1).
    public struct ImageOutput: Sendable, Codable, Equatable {
        public var layout: Input.Layout = .nhwc
        public var colorOrder: Input.ColorOrder = .rgb
        public var valueRange: [Double] = [0, 1]
        /// The output's name when the model has several (default: the first).
        public var output: String? = nil

        enum CodingKeys: String, CodingKey {
            case layout, output
            case colorOrder = "color_order"
            case valueRange = "value_range"
        }

    }


    /// The style-prediction network of an arbitrary-style model (Magenta): it turns a style image
    /// into a vector once, and the main model stylizes every frame with that vector.
    public struct StyleSpec: Sendable, Codable, Equatable {
        /// The prediction model file (a catalogue reference or a path, as `model`).
        public var model: String
        /// Its image input (the style image is resized to it).
        public var input: Input
        /// The style image used when the stage's `style-image` is empty, relative to the
        /// manifest's folder (or absolute); nil means the stage must name one.
        public var image: String?
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion = "schema_version"
        case name, model, input, crop, decoder, style, labels, licence, provenance
        case labelsFile = "labels_file"
        case classThresholds = "class_thresholds"
        case objectCrop = "object_crop"
    }

    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        schemaVersion = try c.decode(Int.self, forKey: .schemaVersion)
        // Stop before reading anything else: another version may lay the rest out differently.
        guard schemaVersion == Self.schemaVersion else { throw WrongSchemaVersion(version: schemaVersion) }
        name = try c.decode(String.self, forKey: .name)
        model = try c.decode(String.self, forKey: .model)
        input = try c.decode(Input.self, forKey: .input)
        crop = try c.decodeIfPresent(CropMode.self, forKey: .crop) ?? .letterbox
        self.decoder = try c.decode(DecoderSpec.self, forKey: .decoder)
        style = try c.decodeIfPresent(StyleSpec.self, forKey: .style)
        objectCrop = try c.decodeIfPresent(ObjectCrop.self, forKey: .objectCrop)
        labels = try c.decodeIfPresent([String].self, forKey: .labels) ?? []
        labelsFile = try c.decodeIfPresent(String.self, forKey: .labelsFile)
        classThresholds = try c.decodeIfPresent([String: Double].self, forKey: .classThresholds) ?? [:]
        licence = try c.decode(String.self, forKey: .licence)
        provenance = try c.decodeIfPresent(String.self, forKey: .provenance)
    }

    /// Reads and checks a manifest file. Every failure is a `StageError` naming the file:
    /// not found, not valid JSON or a missing/mistyped key (with the key's path), a
    /// `schema_version` other than 1, an unknown decoder, inconsistent values, a labels file
    /// that cannot be read, class thresholds for classes the labels do not have.
    public static func load(path: String) throws -> ModelManifest {
        try InputFile.check(path, what: "model manifest")
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StageError("model manifest \(path) not found")
        }
        var manifest = try decode(data, origin: path)
        do {
            if let file = manifest.labelsFile {
                manifest.labels = try readLabels(try manifest.resolve(file, relativeTo: path))
            }
            _ = try manifest.classes()
        } catch let e as StageError {
            throw StageError("model manifest \(path): \(e.message)")
        }
        return manifest
    }

    /// A labels file's names, one a line (surrounding ASCII spaces and tabs and final newlines
    /// ignored; "\r\n" is one Character in Swift, so lines split on any newline Character).
    /// Other spaces are kept: a recognizer's character list may hold one as a character
    /// (PP-OCRv5's first is U+3000, the ideographic space). An empty line inside would shift
    /// every id after it, so it is an error.
    static func readLabels(_ path: String) throws -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StageError("labels_file \(path) cannot be read")
        }
        var lines = String(decoding: data, as: UTF8.self).split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " \t\r\n")) }
        while lines.last == "" { lines.removeLast() }
        if let empty = lines.firstIndex(of: "") { throw StageError("labels_file \(path): line \(empty + 1) is empty") }
        guard !lines.isEmpty else { throw StageError("labels_file \(path) has no labels") }
        return lines
    }

    /// The manifest's classes: its labels and class thresholds, keeping `only` these labels
    /// (nil: all). A StageError names a label that is not one.
    public func classes(keeping only: [String]? = nil) throws -> DetectionClasses {
        try DetectionClasses(labels: labels, classThresholds: classThresholds, keeping: only)
    }

    /// `load` without the file: `origin` names the source in messages.
    public static func decode(_ data: Data, origin: String) throws -> ModelManifest {
        let manifest: ModelManifest
        do {
            manifest = try JSONDecoder().decode(ModelManifest.self, from: data)
        } catch let e as WrongSchemaVersion {
            throw StageError("model manifest \(origin) has schema_version \(e.version); this StreamLens reads schema_version \(schemaVersion)")
        } catch let e as UnknownDecoder {
            throw StageError("model manifest \(origin) names decoder '\(e.name)'; known decoders: \(DecoderRegistry.names.joined(separator: ", "))")
        } catch let e as DecodingError {
            throw StageError("model manifest \(origin) is not valid: \(describe(e, in: data))")
        } catch {
            throw StageError("model manifest \(origin) is not valid: \(error)")
        }
        do {
            try manifest.validate()
        } catch let e as StageError {
            throw StageError("model manifest \(origin): \(e.message)")
        }
        return manifest
    }

    /// Values JSON types cannot rule out: sizes, value ranges, the decoder's options and
    /// whether a detector's anchors were made for this input size.
    public func validate() throws {
        // A catalogue reference must be two plain names (it cannot point outside the store).
        for file in [model, style?.model, style?.image].compactMap({ $0 }) { _ = try ModelStore.Reference(file) }
        try Self.validate(input, what: "input")
        switch decoder.parameters {
        case .detector(let parameters):
            try parameters.validate(input: input)
            guard style == nil else { throw StageError("a style block belongs to image-to-image models, not to decoder '\(decoder.name)'") }
        case .image(let output):
            try Self.validate(range: output.valueRange, what: "decoder.parameters.value_range")
        case .region(let parameters):
            try parameters.validate(labels: labelsFile == nil ? labels : ["(from labels_file)"])
            guard style == nil else { throw StageError("a style block belongs to image-to-image models, not to decoder '\(decoder.name)'") }
        }
        if decoder.region == nil, objectCrop != nil { throw StageError("object_crop belongs to second models (decoders classifier, landmarks, ctc), not to decoder '\(decoder.name)'") }
        try objectCrop?.validate()
        if input.colorOrder == .gray, decoder.region == nil { throw StageError("input color_order GRAY is for second models (decoders classifier, landmarks, ctc)") }
        if let style { try Self.validate(style.input, what: "style.input") }
        if labelsFile != nil, !labels.isEmpty { throw StageError("give labels or labels_file, not both") }
    }

    private static func validate(_ input: Input, what: String) throws {
        guard input.width > 0, input.height > 0 else {
            throw StageError("\(what) size \(input.width)x\(input.height) is not positive")
        }
        try validate(range: input.valueRange, what: "\(what) value_range")
        try input.validateSizeFromFrame(what: what)
        try input.validateChannelNormalization(what: what)
    }

    private static func validate(range: [Double], what: String) throws {
        guard range.count == 2, range.allSatisfy(\.isFinite), range[0] < range[1] else {
            throw StageError("\(what) must be two numbers [lo, hi] with lo < hi, got \(range)")
        }
        // 0…255 is mapped onto it with scale 255 / (hi - lo): a span of 5e-324 made that
        // infinite (and the mean NaN), one of 2e308 overflowed to a scale of 0 (found by fuzzing).
        let scale = 255 / (range[1] - range[0])
        guard scale.isFinite, scale > 0 else {
            throw StageError("\(what) \(range) is too narrow or too wide to map 0…255 onto")
        }
    }

    /// A file named by the manifest (`model`, `style.model`, `style.image`): a catalogue
    /// reference (`catalogue:NAME/FILE`) is the installed file in the model store, or a
    /// StageError naming `streamlens models fetch NAME`; a path is resolved against the
    /// manifest's folder (kept as is when absolute).
    public func resolve(_ file: String, relativeTo manifestPath: String) throws -> String {
        if let reference = try ModelStore.Reference(file) { return try reference.installedPath() }
        if file.hasPrefix("/") { return file }
        return URL(fileURLWithPath: manifestPath).deletingLastPathComponent().appendingPathComponent(file).path
    }

    /// This model's detection decoder (its family's, from `DecoderRegistry`), labelling
    /// detections with the manifest's labels.
    public func makeDecoder() throws -> any DetectionDecoder {
        guard let parameters = decoder.detector else {
            throw StageError("model \(name) is not a detector (its decoder is '\(decoder.name)')")
        }
        return try parameters.makeDecoder(input: input, classes: try classes())
    }

    /// "input.width: expected Int …" style text: the key's path, then what was wrong.
    /// Foundation's own descriptions print the coding keys as Swift values, and on Linux a
    /// syntax error says nothing of where it is, so JSONSerialization is asked for that.
    static func describe(_ error: DecodingError, in data: Data) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "missing key \(path(context.codingPath + [key]))"
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)): expected \(type) (\(context.debugDescription))"
        case .valueNotFound(let type, let context):
            return "\(path(context.codingPath)): expected \(type), found null"
        case .dataCorrupted(let context):
            guard context.codingPath.isEmpty else { return "\(path(context.codingPath)): \(context.debugDescription)" }
            return context.debugDescription + (syntaxErrorLocation(data).map { " (\($0))" } ?? "")
        @unknown default:
            return String(describing: error)
        }
    }

    /// "Invalid value around line 3, column 7" for data that is not JSON, when Foundation says.
    static func syntaxErrorLocation(_ data: Data) -> String? {
        do {
            _ = try JSONSerialization.jsonObject(with: data)
            return nil
        } catch {
            guard var text = (error as NSError).userInfo["NSDebugDescription"] as? String else { return nil }
            // "… around character 16." becomes a line and column (1-based), easier to find.
            if let range = text.range(of: #"character \d+"#, options: .regularExpression),
               let offset = Int(text[range].dropFirst("character ".count)) {
                let before = Array(data.prefix(offset))
                let line = before.filter { $0 == 0x0A }.count + 1
                let column = offset - (before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0) + 1
                text.replaceSubrange(range, with: "line \(line), column \(column)")
            }
            return text.hasSuffix(".") ? String(text.dropLast()) : text
        }
    }
}

/// Thrown while decoding, turned into a `StageError` naming the file by `ModelManifest.decode`.
struct WrongSchemaVersion: Error { var version: Int }
struct UnknownDecoder: Error { var name: String }
