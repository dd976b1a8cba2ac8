import Foundation
import StreamLensCore
import Synchronization

// The seam between model stages and whatever runs their networks (DL Streamer's abstract
// backend). A stage says what it wants (`ModelRequest`) to the `ModelLoader` it was given; the
// loader finds the backend registered for the request's device. This module has no C: OpenVINO
// is one backend (StreamLensOpenVINO, registered by the programs that link it), an inference
// server another (`RemoteBackend`, here), and a test's in-memory model a third.

/// Where a model's network is: a file a local backend compiles, or a model on a server.
public enum ModelSource: Sendable, Equatable {
    case file(String)
    case server(RemoteModelAddress)
}

/// Everything a stage asks of a backend: the model, how frames become its input, and how it runs.
public struct ModelRequest: Sendable {
    public var source: ModelSource
    public var preprocessing: Preprocessing
    /// The device (the registry's key), precision, threads, requests, batch…
    public var options: InferenceOptions
    /// A model with a fixed input size may be reshaped to the requested one (image-to-image
    /// models run at a chosen size); otherwise a fixed size that differs is an error.
    public var resizable: Bool

    public init(source: ModelSource, input: ImageInput, frame: FrameLayout, region: FrameRegion = .whole, options: InferenceOptions,
                resizable: Bool = false) {
        self.source = source
        preprocessing = Preprocessing(input: input, frame: frame, region: region)
        self.options = options
        self.resizable = resizable
    }
}

/// A way to run models. Each backend is registered for the devices it serves (`InferenceBackends`).
public protocol InferenceBackend: AnyObject, Sendable {
    /// "OpenVINO", "remote": said in messages.
    var name: String { get }
    /// Throws the message a user sees when `device` is not one this backend can use here.
    func checkDevice(_ device: String) throws
    /// The model, ready for frames of `request.preprocessing.frame`; `loader` gives the thread
    /// budget and the other backends (a server's model borrows a local backend's pre-processing).
    func load(_ request: ModelRequest, loader: ModelLoader) throws -> any ImageInference
    /// Pre-processing compiled by this backend (OpenVINO builds it as a graph), for a backend that
    /// has none of its own (a server's model); nil when this backend does not offer it.
    func preprocessor(_ preprocessing: Preprocessing, shape: [Int]) throws -> (any Preprocessor)?
}

extension InferenceBackend {
    public func preprocessor(_ preprocessing: Preprocessing, shape: [Int]) throws -> (any Preprocessor)? { nil }
}

/// Backends by device: the one way a new way of running models joins. A device is looked up by
/// its base name (`GPU.1` → `GPU`, `AUTO:GPU,CPU` → `AUTO`); a backend registered for `*` takes
/// every device no other backend names (OpenVINO's plugins vary by machine, and it says which
/// it has).
public final class InferenceBackends: Sendable {
    /// The process's registry: the CLI and the GStreamer plugin register OpenVINO in it at start.
    public static let process = InferenceBackends()

    private let byDevice = Mutex<[String: any InferenceBackend]>([:])

    /// A registry that knows only the remote backend (device `remote`).
    public init() {
        register(RemoteBackend(), devices: [RemoteBackend.device])
    }

    /// `backend` runs `devices` from now on (replacing whoever did).
    public func register(_ backend: any InferenceBackend, devices: [String]) {
        byDevice.withLock { table in for device in devices { table[device] = backend } }
    }

    /// The backend for `device`, or the message that none runs it.
    public func backend(for device: String) throws -> any InferenceBackend {
        let base = String(device.prefix { $0 != ":" && $0 != "." })
        let (found, known) = byDevice.withLock { table in (table[base] ?? table["*"], table.keys.sorted()) }
        guard let found else {
            throw InferenceError("device \(device): no inference backend runs it here (devices: \(known.joined(separator: ", ")))"
                                 + (known.contains("*") ? "" : "; OpenVINO is registered by the streamlens program and the GStreamer plugin"))
        }
        return found
    }

    /// Pre-processing for a model whose backend has none: a registered backend's compiled
    /// graph when one offers it (a server's model then sees exactly the tensor the local model
    /// would), else `SwiftPreprocessor`.
    public func preprocessor(_ preprocessing: Preprocessing, shape: [Int]) throws -> any Preprocessor {
        let backends = byDevice.withLock { table in table.sorted { $0.key < $1.key }.map(\.value) }
        var seen: [ObjectIdentifier] = []
        for backend in backends where !seen.contains(ObjectIdentifier(backend)) {
            seen.append(ObjectIdentifier(backend))
            if let compiled = try backend.preprocessor(preprocessing, shape: shape) { return compiled }
        }
        return try SwiftPreprocessor(preprocessing, shape: shape)
    }
}

/// What a model stage is given to load its models with: a registry of backends and the thread
/// budget its local models count in (a stage registers in it; a backend plans threads from it). Stages never reach for a backend themselves, so a test
/// hands a stage a loader whose backend is an in-memory model.
public struct ModelLoader: Sendable {
    public let backends: InferenceBackends
    public let budget: ThreadBudget

    public init(backends: InferenceBackends, budget: ThreadBudget = ThreadBudget()) {
        self.backends = backends
        self.budget = budget
    }

    /// The process's backends and thread budget: what stages built by GStreamer use.
    public static var process: ModelLoader { ModelLoader(backends: .process, budget: .process) }

    /// Throws the user's message when no backend runs `device` here.
    public func checkDevice(_ device: String) throws {
        try backends.backend(for: device).checkDevice(device)
    }

    /// Counts a stage that will run the local model at `path` in the thread budget while the
    /// token lives (stages register when built, before loading).
    public func register(model path: String) -> ModelUse { budget.register(path) }

    public func load(_ request: ModelRequest) throws -> any ImageInference {
        try backends.backend(for: request.options.device).load(request, loader: self)
    }
}
