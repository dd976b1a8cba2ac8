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
    /// `batch-size` and `batch-timeout`: DL Streamer's batch-size, across the stages of one
    /// process (`InferenceEngine.loadImageInference`).
    static let batchProperties = [
        PropertySpec("batch-size", .int(1...16), default: .int(1),
                     help: "frames run as one inference: stages of this process with the same model, device, precision and frame size (the sources of streamlens serve) fill batches of up to N frames together (1: no batching; a model that cannot take a batch runs unbatched and the summary says why)"),
        PropertySpec("batch-timeout", .int(0...1000), default: .int(10),
                     help: "milliseconds a frame waits for others to fill its batch (batch-size > 1); then the frames there run, each on its own"),
    ]
}
