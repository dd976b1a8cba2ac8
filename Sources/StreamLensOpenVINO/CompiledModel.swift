import COpenVINO
import Foundation
import StreamLensCore
import StreamLensInference
import Synchronization

/// A model compiled with its pre-processing (or its input sampled in Swift) for one frame layout: what the engine caches and
/// ImageModels share (each with its own infer requests).
///
/// @unchecked Sendable: immutable after init; OpenVINO's compiled model is thread-safe
/// (requests are created from it on any thread).
final class CompiledModel: @unchecked Sendable {
    /// The core that compiled this model: held so it is freed after the model (a compiled model
    /// freed after its core crashed in ov::Any's destructor under ThreadSanitizer).
    let engine: InferenceEngine
    let pointer: OpaquePointer
    let frame: FrameLayout
    let padding: (top: Int, left: Int, bottom: Int, right: Int)
    /// Set when the image input is sampled out of the frame in Swift (`InferenceEngine.samplesInput`):
    /// requests then take its f32 tensor instead of the frame.
    let sampler: SwiftPreprocessor?
    let imageInput: Int
    let otherInputs: [(name: String, shape: [Int])]
    let outputs: [(name: String, shape: [Int])]
    /// "precision auto → f32 (…), 1 thread (its share of the cores, not pinned)".
    let settings: String
    /// ImageModels made from this compiled model: alive now, and the most at once.
    private let users = Mutex<(now: Int, peak: Int)>((0, 0))
    func join() { users.withLock { $0.now += 1; $0.peak = max($0.peak, $0.now) } }
    func leave() { users.withLock { $0.now -= 1 } }
    var peakUsers: Int { users.withLock { $0.peak } }

    init(engine: InferenceEngine, pointer: OpaquePointer, frame: FrameLayout, padding: (top: Int, left: Int, bottom: Int, right: Int),
         sampler: SwiftPreprocessor?, imageInput: Int, otherInputs: [(name: String, shape: [Int])], outputs: [(name: String, shape: [Int])],
         settings: String) {
        self.engine = engine; self.pointer = pointer; self.frame = frame; self.padding = padding; self.sampler = sampler; self.imageInput = imageInput
        self.otherInputs = otherInputs; self.outputs = outputs; self.settings = settings
    }

    deinit { ov_compiled_model_free(pointer) }
}

final class WeakCompiledModel: @unchecked Sendable {
    weak var model: CompiledModel?
    init(_ model: CompiledModel) { self.model = model }
}
