import Foundation
import StreamLensCore

/// A model on an inference server: the frame is pre-processed here (by a local backend's
/// compiled steps when one is registered — the very steps a local model compiles in front of
/// itself, so both see the same tensor) and the tensor goes to the server over the Open
/// Inference Protocol.
///
/// Not thread-safe, like `ImageModel`: one worker sends; the answers come back on the session's
/// threads into `PendingInference`s.
public final class RemoteImageModel: ImageInference {
    public let address: RemoteModelAddress
    public let metadata: RemoteModelMetadata
    public let outputs: [(name: String, shape: [Int])]
    public let otherInputs: [(name: String, shape: [Int])]
    private let image: (name: String, shape: [Int])
    private let preprocessing: any Preprocessor
    private let client: OpenInferenceClient
    private var otherValues: [String: Data] = [:]

    init(address: RemoteModelAddress, metadata: RemoteModelMetadata, image: (name: String, shape: [Int]),
         otherInputs: [(name: String, shape: [Int])], outputs: [(name: String, shape: [Int])],
         preprocessing: any Preprocessor, client: OpenInferenceClient) {
        self.address = address; self.metadata = metadata; self.image = image; self.otherInputs = otherInputs
        self.outputs = outputs; self.preprocessing = preprocessing; self.client = client
    }

    public func setInput(name: String, values: [Float]) throws {
        _ = try otherInput(named: name, count: values.count)
        otherValues[name] = values.withUnsafeBytes { Data($0) }
    }

    public var remoteAddress: RemoteModelAddress? { address }
    public var settings: String { "" }
    public var precision: String? { nil }
    public var requestCount: Int { max(1, address.inFlight) }

    /// Pre-processes the frame (here, now) and sends it; the answer comes later.
    public func submit(_ pixels: UnsafeRawBufferPointer) throws -> PendingInference { try send(pixels) }

    /// Pre-processes the frame (here, now) and sends it; the answer comes later.
    public func send(_ pixels: UnsafeRawBufferPointer) throws -> PendingInference {
        let tensor = try preprocessing.tensor(pixels)
        var inputs = [OpenInferenceClient.Input(name: image.name, shape: image.shape, data: tensor)]
        for port in otherInputs {
            guard let data = otherValues[port.name] else { throw InferenceError("input \(port.name) was never set") }
            inputs.append(.init(name: port.name, shape: port.shape, data: data))
        }
        return client.infer(inputs, outputs: outputs.map(\.name))
    }

    /// The answer's tensors in `outputs`' order, each checked against the shape expected.
    public func outputs(of answer: [TensorData]) throws -> [TensorData] {
        try outputs.map { port in
            guard let tensor = answer.first(where: { $0.name == port.name }) else {
                throw InferenceError("\(address.description) sent no output \(port.name)")
            }
            guard tensor.shape == port.shape else {
                throw InferenceError("\(address.description) sent output \(port.name) as \(tensor.shape), expected \(port.shape)")
            }
            return tensor
        }
    }

    public func infer<R>(_ pixels: UnsafeRawBufferPointer, _ body: ([UnsafeBufferPointer<Float>]) throws -> R) throws -> R {
        try outputs(of: send(pixels).wait().get()).withBuffers(body)
    }
}

/// `device=remote`: models on an Open Inference Protocol server (Triton, OpenVINO Model Server,
/// KServe).
public final class RemoteBackend: InferenceBackend {
    public static let device = "remote"
    public let name = "remote"
    public init() {}

    public func checkDevice(_ device: String) throws {}

    public func load(_ request: ModelRequest, loader: ModelLoader) throws -> any ImageInference {
        guard case .server(let address) = request.source else { throw InferenceError("device=remote needs a server's model, not a file") }
        let p = request.preprocessing
        return try load(address: address, input: p.input, frame: p.frame, region: p.region, backends: loader.backends)
    }

    /// A model on an Open Inference Protocol server, checked against what the manifest says:
    /// the server must answer, have the model ready, and its metadata must show an FP32 image
    /// input of 3 channels in `input.layout` at `input`'s size (or a free size), plus any other
    /// inputs with fixed shapes. A free batch becomes 1; in an image-to-image model a free
    /// output height/width is the input's (checked on every answer).
    func load(address: RemoteModelAddress, input: ImageInput, frame: FrameLayout, region: FrameRegion,
              backends: InferenceBackends) throws -> RemoteImageModel {
        let client = OpenInferenceClient(address: address)
        let metadata = try client.metadata()
        let server = address.description
        let imageIndex = try input.imageInputIndex(among: metadata.inputs.map(\.name), of: server)
        for port in metadata.inputs where port.datatype != "FP32" {
            throw InferenceError("\(server) takes input \(port.name) as \(port.datatype); StreamLens sends FP32 (serve the model with FP32 inputs)")
        }
        let declared = metadata.inputs[imageIndex]
        let nchw = input.layout == "NCHW"
        guard declared.shape.count == 4 else {
            throw InferenceError("\(server): input \(declared.name) has shape \(declared.shape), not an image (expected 4 dimensions, \(input.layout))")
        }
        let wanted = nchw ? [1, 3, input.height, input.width] : [1, input.height, input.width, 3]
        let shape = zip(declared.shape, wanted).map { $0 == -1 ? $1 : $0 }
        guard shape == wanted else {
            throw InferenceError("\(server) takes input \(declared.name) as \(declared.shape), but the manifest says \(input.width)x\(input.height) \(input.layout) \(wanted): wrong model, or the manifest does not describe it")
        }
        let others = try metadata.inputs.enumerated().filter { $0.offset != imageIndex }.map { _, port -> (name: String, shape: [Int]) in
            let shape = port.shape.enumerated().map { $0.offset == 0 && $0.element == -1 ? 1 : $0.element }
            guard shape.allSatisfy({ $0 > 0 }) else { throw InferenceError("\(server): input \(port.name) has a free size \(port.shape)") }
            return (port.name, shape)
        }
        let outputs = metadata.outputs.map { port -> (name: String, shape: [Int]) in
            var shape = port.shape
            if shape.first == -1 { shape[0] = 1 }
            if shape.count == 4 {
                // Image-to-image: a free height/width follows the input's.
                let (h, w) = nchw ? (2, 3) : (1, 2)
                if shape[h] == -1 { shape[h] = input.height }
                if shape[w] == -1 { shape[w] = input.width }
            }
            return (port.name, shape)
        }
        // Shapes are numbers from outside: each must count to what an answer can hold, before a
        // decoder multiplies them.
        let most = HTTPResponseReader.Limits().bodyBytes / 4
        for port in others + outputs where TensorShape.elementCount(port.shape, atMost: most) == nil {
            throw InferenceError("\(server): \(port.name) has shape \(port.shape): a negative dimension or more values than any answer StreamLens takes (\(most))")
        }
        var single = input
        single.name = nil // the pre-processing network has one input of its own
        let preprocessing = try backends.preprocessor(Preprocessing(input: single, frame: frame, region: region), shape: shape)
        return RemoteImageModel(address: address, metadata: metadata, image: (declared.name, shape), otherInputs: others,
                                outputs: outputs, preprocessing: preprocessing, client: client)
    }
}
