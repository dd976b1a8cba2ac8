import COpenVINO
import Foundation
import StreamLensCore
import StreamLensInference

/// OpenVINO as an inference backend: local model files on CPU, GPU, NPU and OpenVINO's virtual
/// devices, through the process's engine (`InferenceEngine.shared()`: compiled models shared,
/// threads planned with the loader's budget).
public final class OpenVINOBackend: InferenceBackend {
    public let name = "OpenVINO"
    private let engine: Result<InferenceEngine, InferenceError>

    init(engine: Result<InferenceEngine, InferenceError>) { self.engine = engine }

    /// Makes OpenVINO the backend of every device no other backend names (`*`) in `backends`:
    /// the line the streamlens program and the GStreamer plugin run at start. Idempotent.
    public static func register(in backends: InferenceBackends = .process) {
        backends.register(OpenVINOBackend(engine: InferenceEngine.process), devices: ["*"])
    }

    public func checkDevice(_ device: String) throws { try engine.get().checkDevice(device) }

    public func load(_ request: ModelRequest, loader: ModelLoader) throws -> any ImageInference {
        guard case .file(let path) = request.source else { throw InferenceError("OpenVINO runs model files; a server's model needs device=remote") }
        let p = request.preprocessing
        return try engine.get().loadImageInference(path: path, input: p.input, frame: p.frame, region: p.region, options: request.options,
                                                   resizable: request.resizable, budget: loader.budget)
    }

    public func preprocessor(_ preprocessing: Preprocessing, shape: [Int]) throws -> (any Preprocessor)? {
        let model = try engine.get().loadPreprocessing(shape: shape, input: preprocessing.input, frame: preprocessing.frame,
                                                       region: preprocessing.region)
        return CompiledPreprocessor(model: model, shape: shape)
    }
}

/// OpenVINO's pre-processing steps compiled in front of an identity network.
final class CompiledPreprocessor: Preprocessor {
    let model: ImageModel
    let shape: [Int]
    init(model: ImageModel, shape: [Int]) { self.model = model; self.shape = shape }
    func tensor(_ pixels: UnsafeRawBufferPointer) throws -> Data { try model.infer(pixels) { views in Data(buffer: views[0]) } }
}

extension ImageModel: ImageInference {
    public func outputs(of answer: [TensorData]) throws -> [TensorData] {
        guard answer.count == outputs.count else {
            throw InferenceError("the model gave \(answer.count) outputs, expected \(outputs.count)")
        }
        return answer
    }
    public var remoteAddress: RemoteModelAddress? { nil }
    public var precision: String? { compiledProperty("INFERENCE_PRECISION_HINT")?.lowercased() }
}
