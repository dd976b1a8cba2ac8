import StreamLensInference
import StreamLensOpenVINO

/// The inference backends this build links, each one line: what the streamlens program, the
/// GStreamer plugin and the examples register at start. (`remote` is in every registry.)
public enum StandardBackends {
    public static func register(in backends: InferenceBackends = .process) {
        OpenVINOBackend.register(in: backends) // every local device: CPU, GPU, NPU, AUTO…
    }
}
