import Foundation
import StreamLensCore
import StreamLensInference
import Synchronization

/// A backend that runs "networks" written in Swift on the tensor the request's pre-processing
/// makes (SwiftPreprocessor): the model stages through StageDriver with no OpenVINO in the
/// process — what the inference seam is for. Each network computes its answer from the pixels,
/// so a stage that fed it the wrong part of the frame, or mapped its answer back wrongly, fails.
public final class MemoryBackend: InferenceBackend {
    public let name = "memory"
    /// What a network computes: the input tensor (f32, in the request's layout) → its outputs.
    public typealias Network = @Sendable (_ tensor: [Float], _ input: ImageInput) -> [TensorData]
    public let network: Network
    /// The outputs' names and shapes for an input (an image-to-image network's follow its size).
    public let outputs: @Sendable (ImageInput) -> [(name: String, shape: [Int])]
    /// Models loaded so far (a stage that reloads for nothing shows here).
    public let loads = Counter()
    public init(outputs: @escaping @Sendable (ImageInput) -> [(name: String, shape: [Int])], network: @escaping Network) {
        self.outputs = outputs; self.network = network
    }

    public func checkDevice(_ device: String) throws {}

    public func load(_ request: ModelRequest, loader: ModelLoader) throws -> any ImageInference {
        loads.add()
        let input = request.preprocessing.input
        return MemoryModel(preprocessor: try SwiftPreprocessor(request.preprocessing, shape: input.tensorShape), input: input,
                           outputs: outputs(input), network: network)
    }

    /// A loader whose every device is this backend (no OpenVINO registered).
    public func loader() -> ModelLoader {
        let backends = InferenceBackends()
        backends.register(self, devices: ["*"])
        return ModelLoader(backends: backends)
    }

    public final class Counter: Sendable {
        private let n = Mutex(0)
        func add() { n.withLock { $0 += 1 } }
        public var count: Int { n.withLock { $0 } }
    }
}

/// A model of `MemoryBackend`: the request's pre-processing (SwiftPreprocessor), then the
/// network's closure.
final class MemoryModel: ImageInference {
    let preprocessor: SwiftPreprocessor
    let input: ImageInput
    let outputs: [(name: String, shape: [Int])]
    let otherInputs: [(name: String, shape: [Int])] = []
    let network: MemoryBackend.Network
    init(preprocessor: SwiftPreprocessor, input: ImageInput, outputs: [(name: String, shape: [Int])], network: @escaping MemoryBackend.Network) {
        self.preprocessor = preprocessor; self.input = input; self.outputs = outputs; self.network = network
    }

    func setInput(name: String, values: [Float]) throws { throw InferenceError("no other inputs") }
    func infer<R>(_ pixels: UnsafeRawBufferPointer, _ body: ([UnsafeBufferPointer<Float>]) throws -> R) throws -> R {
        try run(pixels).withBuffers(body)
    }
    func submit(_ pixels: UnsafeRawBufferPointer) throws -> PendingInference {
        let pending = PendingInference(bytesSent: 0)
        pending.finish(.success(try run(pixels)), bytesReceived: 0)
        return pending
    }
    func outputs(of answer: [TensorData]) throws -> [TensorData] { answer }
    var remoteAddress: RemoteModelAddress? { nil }
    var requestCount: Int { 2 }
    var settings: String { "in memory" }
    var precision: String? { "f32" }

    private func run(_ pixels: UnsafeRawBufferPointer) throws -> [TensorData] {
        let data = try preprocessor.tensor(pixels)
        let tensor = data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        return network(tensor, input)
    }
}

