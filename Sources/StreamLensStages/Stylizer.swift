import Foundation
import StreamLensCore
import StreamLensGst
import StreamLensInference

/// Everything a stylizer is built from; a change to any of it means a (background) reload.
struct StylizerConfiguration: Sendable, Equatable {
    var manifestPath: String
    /// The style image (arbitrary-style models); "" means the manifest's default.
    var styleImage: String
    var inferenceSize: InferenceSize
    var options: InferenceOptions
    /// device=remote: where the image network runs (a style network runs here, once a style).
    var remote: RemoteModelAddress?

    /// Same model and device: only the style vector differs.
    func differsOnlyInStyle(from other: StylizerConfiguration) -> Bool {
        var a = self
        a.styleImage = other.styleImage
        return a == other && styleImage != other.styleImage
    }
}

/// One image-to-image model, ready to run: its manifest, the compiled models for the inference
/// sizes seen so far (a small cache: one compiled model per size, shared by every frame size
/// that maps to it), and for arbitrary-style models the style vector.
///
/// Built on any thread (the stage builds a replacement in the background while frames keep
/// flowing through the current one), then used by one thread only.
final class Stylizer {
    private(set) var configuration: StylizerConfiguration
    let manifest: ModelManifest
    let output: ModelManifest.ImageOutput
    /// The style image the vector came from (arbitrary-style models).
    private(set) var styleImage: String?
    private var styleVector: [Float]?
    private let loader: ModelLoader
    private var models: [(width: Int, height: Int, model: any ImageInference, output: Int)] = []
    static let cachedSizes = 4
    /// Counts this stylizer in the process's thread budget (local models).
    private var modelUse: ModelUse?
    /// One of the models it runs now (for the precision it reports).
    var runningModel: (any ImageInference)? { models.first?.model }
    /// How the newest compiled model runs (precision, threads), for the stage summary.
    var settings: String { models.last?.model.settings ?? "" }

    init(_ configuration: StylizerConfiguration, models loader: ModelLoader) throws {
        self.configuration = configuration
        self.loader = loader
        let checked = try Self.check(configuration)
        manifest = checked.manifest
        output = checked.output
        if let image = checked.styleImage {
            styleVector = try Self.predictStyle(manifest: manifest, manifestPath: configuration.manifestPath, image: image, models: loader,
                                                options: configuration.options)
            styleImage = image
        }
        if let model = checked.model { modelUse = loader.register(model: model) }
    }

    /// What can be known of a configuration without running a network: its manifest loads and
    /// describes an image-to-image model, an arbitrary-style model has a style picture that
    /// decodes, and a local model's file is installed (a catalogue model that is not fails here,
    /// not at the first frame). Used to build a stylizer and to check a live change first.
    static func check(_ configuration: StylizerConfiguration) throws
        -> (manifest: ModelManifest, output: ModelManifest.ImageOutput, styleImage: String?, model: String?) {
        let path = configuration.manifestPath
        guard !path.isEmpty else { throw StageError("no model: set model=PATH to a style model manifest (Models/*.json)") }
        let manifest = try ModelManifest.load(path: path)
        guard let output = manifest.decoder.image else {
            throw StageError("\(path) describes a detector (decoder '\(manifest.decoder.name)'), not an image-to-image model; use it with lensdetect")
        }
        var styleImage: String?
        if let style = manifest.style {
            let image = try configuration.styleImage.isEmpty ? style.image.map { try manifest.resolve($0, relativeTo: path) } : configuration.styleImage
            guard let image else {
                throw StageError("\(path) is an arbitrary-style model: set style-image=PATH to the picture whose style to copy")
            }
            try InputFile.check(image, what: "image")
            _ = try StillImage.loadRGB(path: image, width: 8, height: 8)
            _ = try manifest.resolve(style.model, relativeTo: path) // the style network, installed
            styleImage = image
        } else if !configuration.styleImage.isEmpty {
            throw StageError("style-image is for arbitrary-style models; \(path) has its style built in")
        }
        let model = configuration.remote == nil ? try manifest.resolve(manifest.model, relativeTo: path) : nil
        return (manifest, output, styleImage, model)
    }

    /// The style-prediction network run once on `image`: the vector the transfer network takes.
    static func predictStyle(manifest: ModelManifest, manifestPath: String, image: String, models: ModelLoader,
                             options: InferenceOptions) throws -> [Float] {
        guard let style = manifest.style else { throw StageError("\(manifestPath) has no style network") }
        var options = options
        if options.device == RemoteSettings.device { options.device = "CPU" } // the style network runs here, once a style
        options.batchSize = 1 // run once, alone
        let pixels = try StillImage.loadRGB(path: image, width: style.input.width, height: style.input.height)
        let input = ImageInput(style.input)
        let frame = FrameLayout(width: style.input.width, height: style.input.height, pixelFormat: "RGB", stride: style.input.width * 3)
        do {
            let model = try models.load(ModelRequest(source: .file(try manifest.resolve(style.model, relativeTo: manifestPath)), input: input,
                                                     frame: frame, options: options))
            return try pixels.withUnsafeBytes { try model.infer($0) }.first?.values ?? []
        } catch let error as InferenceError {
            throw StageError("\(manifestPath): style network: \(error.message)")
        }
    }

    /// Replaces the style vector (computed in the background from another style image);
    /// `requested` is the `style-image` setting it answers.
    func setStyle(vector: [Float], image: String, requested: String) throws {
        for entry in models { try apply(vector, to: entry.model) }
        styleVector = vector
        styleImage = image
        configuration.styleImage = requested
    }

    private func apply(_ vector: [Float], to model: any ImageInference) throws {
        guard model.otherInputs.count == 1 else {
            throw StageError("\(configuration.manifestPath): an arbitrary-style model takes the image and one style vector; this one has \(model.otherInputs.count + 1) inputs")
        }
        do {
            try model.setInput(name: model.otherInputs[0].name, values: vector)
        } catch let error as InferenceError {
            throw StageError("\(configuration.manifestPath): style vector: \(error.message)")
        }
    }

    /// The compiled model for one inference size (compiled on first use) and the index of its
    /// image output.
    func model(width: Int, height: Int) throws -> (model: any ImageInference, output: Int) {
        if let i = models.firstIndex(where: { $0.width == width && $0.height == height }) {
            let entry = models.remove(at: i)
            models.append(entry)
            return (entry.model, entry.output)
        }
        let path = configuration.manifestPath
        let m = manifest.input
        let input = ImageInput(m, width: width, height: height)
        // The stage hands the model packed pixels already at the inference size and in the
        // model's channel order: the backend's pre-processing only converts them to floats.
        let frame = FrameLayout(width: width, height: height, pixelFormat: m.colorOrder.rawValue, stride: width * 3)
        let source = try configuration.remote.map(ModelSource.server) ?? .file(try manifest.resolve(manifest.model, relativeTo: path))
        let request = ModelRequest(source: source, input: input, frame: frame, options: configuration.options, resizable: true)
        let (model, bound) = try loader.load(request, manifest: path) { outputs in
            guard let name = output.output else { return [0] }
            guard let i = outputs.firstIndex(where: { $0.name == name }) else {
                throw StageError("the model has no output named \(name) (outputs: \(outputs.map(\.name).joined(separator: ", ")))")
            }
            return [i]
        }
        let outputIndex = bound[0]
        let shape = model.outputs[outputIndex].shape
        guard FloatImage.size(ofShape: shape, planar: output.layout == .nchw) != nil else {
            throw StageError("\(path): the model's output \(shape) is not a 3-channel \(output.layout.rawValue) image")
        }
        if manifest.style != nil {
            guard let styleVector else { throw StageError("\(path): no style vector") }
            try apply(styleVector, to: model)
        } else if !model.otherInputs.isEmpty {
            throw StageError("\(path): the model has inputs besides the image (\(model.otherInputs.map(\.name).joined(separator: ", "))) but the manifest has no style network for them")
        }
        models.append((width, height, model, outputIndex))
        if models.count > Self.cachedSizes { models.removeFirst() }
        return (model, outputIndex)
    }
}
