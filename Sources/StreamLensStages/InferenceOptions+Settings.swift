import StreamLensCore
import StreamLensInference

/// The model stages' common properties (device, precision, threads, nireq, cache-dir), declared
/// once: lensdetect, lensstylize and lensclassify hold one as `inference`.
public struct InferenceSettings: StageSettings {
    public var device = "CPU"
    public var precision = "auto"
    public var threads = 0
    public var nireq = 2
    public var cacheDir = ""
    public init() {}

    public static let properties = rows(live: [])

    /// The rows; `live` names those the stage can change while playing (lensdetect recompiles
    /// for a new device between two frames, lensstylize reloads in the background).
    static func rows(live: Set<String>) -> [Property<InferenceSettings>] {
        [
            .string("device", \.device, live: live.contains("device"),
                    help: "where the model runs: an OpenVINO device (CPU, GPU, NPU, AUTO…: the iOS app's compute-unit switch) or, where the stage has server=, remote (an inference server)"),
            .choice("precision", \.precision, ["auto", "default", "f32", "bf16", "f16"], live: live.contains("precision"),
                    help: "inference precision: auto (the faster the device runs, measured once and remembered in cache-dir), default (the device's own), or a hint"),
            .int("threads", \.threads, 0...256, live: live.contains("threads"),
                 help: "inference threads (0: this model's share of the cores, divided among the model stages of the process)"),
            .int("nireq", \.nireq, 1...16, live: live.contains("nireq"),
                 help: "infer requests in flight (DL Streamer's nireq): with 2, one frame (or crop) is prepared and delivered while the next is inferred"),
            .string("cache-dir", \.cacheDir, live: live.contains("cache-dir"), help: "compiled-model cache folder (empty: ~/.cache/streamlens/openvino)"),
        ]
    }

    /// A stage's rows for the inference settings it holds at `path`.
    static func rows<S: StageSettings>(_ path: WritableKeyPath<S, InferenceSettings> & Sendable, live: Set<String> = []) -> [Property<S>] {
        rows(live: live).map { $0.lifted(path) }
    }
}

/// `batch-size` and `batch-timeout`: DL Streamer's batch-size, across the stages of one process
/// (the backend batches: OpenVINO's `BatchedModel`). lensdetect, lensstylize and lensclassify (whose
/// crops of one frame fill a batch together) hold one.
public struct BatchSettings: StageSettings {
    public var batchSize = 1
    public var batchTimeout = 10
    public init() {}

    public static let properties: [Property<BatchSettings>] = [
        .int("batch-size", \.batchSize, 1...16,
             help: "frames (or lensclassify's crops) run as one inference: stages of this process with the same model, device, precision and frame size (the sources of streamlens serve) fill batches of up to N frames together (1: no batching; a model that cannot take a batch runs unbatched and the summary says why)"),
        .int("batch-timeout", \.batchTimeout, 0...1000,
             help: "milliseconds a frame waits for others to fill its batch (batch-size > 1); then the frames there run, each on its own"),
    ]
}

extension InferenceOptions {
    /// The options a model stage's settings give (`batch`: the stage batches).
    init(_ settings: InferenceSettings, batch: BatchSettings? = nil) {
        self.init()
        device = settings.device
        if settings.precision != "default" { precision = settings.precision }
        threads = settings.threads
        requests = settings.nireq
        if let batch {
            batchSize = batch.batchSize
            batchTimeout = Double(batch.batchTimeout)
        }
        cacheDirectory = settings.cacheDir.isEmpty ? DetectStage.defaultCacheDirectory : settings.cacheDir
    }
}

extension ModelLoader {
    /// The model of the manifest at `manifestPath`, its outputs bound by the stage's decoder
    /// (`bind`: the output indices the decoder reads); any failure, the backend's or the
    /// decoder's, is a StageError naming the manifest.
    func load(_ request: ModelRequest, manifest manifestPath: String,
              bind: ([ModelOutput]) throws -> [Int]) throws -> (model: any ImageInference, outputs: [Int]) {
        do {
            let model = try load(request)
            return (model, try bind(model.outputs.map { ModelOutput(name: $0.name, shape: $0.shape) }))
        } catch let error as InferenceError {
            throw StageError("\(manifestPath): \(error.message)")
        } catch let error as StageError {
            throw StageError("\(manifestPath): \(error.message)")
        }
    }
}
