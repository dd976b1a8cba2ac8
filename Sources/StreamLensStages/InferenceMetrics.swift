import StreamLensCore
import StreamLensInference

/// A model stage's figures for Prometheus: how long its inferences take and what runs where.
/// The stage observes each inference (submit to result, as its summary's median) and lists
/// these in `Stage.metrics`; the host adds the `stage` label.
struct InferenceMetrics {
    private(set) var inference = Histogram()

    mutating func observe(milliseconds: Double) { inference.observe(milliseconds / 1000) }

    /// `streamlens_inference_seconds` and `streamlens_model_info{model, device, precision} 1`
    /// (precision as the compiled model reports it; empty for a server's model).
    func metrics(model: String, device: String, running: (any ImageInference)?) -> [Metric] {
        [
            .histogram("streamlens_inference_seconds", "Time of one inference (a frame; a crop for lensclassify), submitted to result", inference),
            .gauge("streamlens_model_info", "The model a stage runs, on which device and at which precision (the value is 1)",
                   labels: [("model", model), ("device", device), ("precision", running?.precision ?? "")], 1),
        ]
    }
}
