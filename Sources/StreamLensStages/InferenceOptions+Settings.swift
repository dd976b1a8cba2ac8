import StreamLensCore
import StreamLensInference

extension InferenceOptions {
    /// The model stages' common properties (device, precision, threads, nireq, cache-dir) as
    /// OpenVINO options: one reading for lensdetect, lensstylize and lensclassify.
    init(stage settings: StageSettings) {
        self.init()
        device = settings.string("device")
        if settings.string("precision") != "default" { precision = settings.string("precision") }
        threads = settings.int("threads")
        requests = settings.int("nireq")
        // lensdetect and lensstylize declare them (InferenceOptions.batchProperties).
        if case .int(let size)? = settings["batch-size"] { batchSize = size }
        if case .int(let timeout)? = settings["batch-timeout"] { batchTimeout = Double(timeout) }
        let cache = settings.string("cache-dir")
        cacheDirectory = cache.isEmpty ? DetectStage.defaultCacheDirectory : cache
    }
}

extension InferenceOptions {
    /// The rows every model stage shares (device, precision, threads, nireq, cache-dir),
    /// declared once; `live` names those the stage can change while playing (lensdetect
    /// recompiles for a new device between two frames, lensstylize reloads in the background).
    static func properties(live: Set<String> = []) -> [PropertySpec] {
        [
            PropertySpec("device", .string, default: .string("CPU"), live: live.contains("device"),
                         help: "where the model runs: an OpenVINO device (CPU, GPU, NPU, AUTO…: the iOS app's compute-unit switch) or, where the stage has server=, remote (an inference server)"),
            PropertySpec("precision", .choice(["auto", "default", "f32", "bf16", "f16"]), default: .string("auto"), live: live.contains("precision"),
                         help: "inference precision: auto (the faster the device runs, measured once and remembered in cache-dir), default (the device's own), or a hint"),
            PropertySpec("threads", .int(0...256), default: .int(0), live: live.contains("threads"),
                         help: "inference threads (0: this model's share of the cores, divided among the model stages of the process)"),
            PropertySpec("nireq", .int(1...16), default: .int(2), live: live.contains("nireq"),
                         help: "infer requests in flight (DL Streamer's nireq): with 2, one frame (or crop) is prepared and delivered while the next is inferred"),
            PropertySpec("cache-dir", .string, default: .string(""), live: live.contains("cache-dir"),
                         help: "compiled-model cache folder (empty: ~/.cache/streamlens/openvino)"),
        ]
    }

    /// `batch-size` and `batch-timeout`: DL Streamer's batch-size, across the stages of one
    /// process (the backend batches: OpenVINO's `BatchedModel`).
    static let batchProperties = [
        PropertySpec("batch-size", .int(1...16), default: .int(1),
                     help: "frames run as one inference: stages of this process with the same model, device, precision and frame size (the sources of streamlens serve) fill batches of up to N frames together (1: no batching; a model that cannot take a batch runs unbatched and the summary says why)"),
        PropertySpec("batch-timeout", .int(0...1000), default: .int(10),
                     help: "milliseconds a frame waits for others to fill its batch (batch-size > 1); then the frames there run, each on its own"),
    ]
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
