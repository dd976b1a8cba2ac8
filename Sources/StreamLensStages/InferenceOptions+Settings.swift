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
        let cache = settings.string("cache-dir")
        cacheDirectory = cache.isEmpty ? DetectStage.defaultCacheDirectory : cache
    }
}
