import Foundation
import StreamLensCore

/// What the stages need of a model fed with frames, wherever the network runs: OpenVINO's
/// `ImageModel`, `RemoteImageModel` (an Open Inference Protocol server), a test's in-memory model.
public protocol ImageInference: AnyObject {
    /// Output names and shapes, in the model's order.
    var outputs: [(name: String, shape: [Int])] { get }
    /// Inputs besides the image (a style vector…), set with `setInput`.
    var otherInputs: [(name: String, shape: [Int])] { get }
    func setInput(name: String, values: [Float]) throws
    /// One frame in, the outputs in place (in `outputs`' order) for the duration of `body`.
    func infer<R>(_ pixels: UnsafeRawBufferPointer, _ body: ([UnsafeBufferPointer<Float>]) throws -> R) throws -> R
    /// One frame in, at once; its outputs come with the ticket (the one asynchronous path:
    /// OpenVINO's infer requests here, a request to the server there).
    func submit(_ pixels: UnsafeRawBufferPointer) throws -> PendingInference
    /// A finished ticket's tensors in `outputs`' order, each checked against its shape.
    func outputs(of answer: [TensorData]) throws -> [TensorData]
    /// Where the model runs, when that is a server: its failures are outages (frames go on
    /// without inference, with back-off), not broken frames.
    var remoteAddress: RemoteModelAddress? { get }
    /// Requests that may be in flight at once (OpenVINO infer requests; a server's in-flight).
    var requestCount: Int { get }
    /// How it runs, for stage summaries ("precision auto → f32 (…), 2 threads…"; empty for a
    /// server, whose summary says where it is).
    var settings: String { get }
    /// The precision it computes in, as its backend reports it ("f32", "bf16"; nil: not known
    /// here, as for a server's model).
    var precision: String? { get }
}

extension ImageInference {
    /// One frame in, copies of every output out.
    public func infer(_ pixels: UnsafeRawBufferPointer) throws -> [TensorData] {
        try infer(pixels) { views in zip(outputs, views).map { TensorData(name: $0.name, shape: $0.shape, values: Array($1)) } }
    }

    /// The other input `name`, checked to take `count` values: what `setInput` validates,
    /// wherever the network runs.
    package func otherInput(named name: String, count: Int) throws -> (name: String, shape: [Int]) {
        guard let port = otherInputs.first(where: { $0.name == name }) else {
            throw InferenceError("the model has no other input named \(name) (\(otherInputs.map(\.name).joined(separator: ", ")))")
        }
        guard TensorShape.elementCount(port.shape) == count else {
            throw InferenceError("input \(name) takes \(TensorShape.elementCount(port.shape).map(String.init) ?? "no countable number of") values (shape \(port.shape)), got \(count)")
        }
        return port
    }
}
