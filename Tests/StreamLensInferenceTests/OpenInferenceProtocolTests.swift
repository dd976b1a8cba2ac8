import Foundation
@testable import StreamLensInference
import Testing

/// The protocol's binary framing, read back from answers written byte by byte as the
/// specification describes them (the server end-to-end is CLITests/RemoteTests).
@Suite struct OpenInferenceProtocolTests {
    static func answer(_ outputs: [(name: String, shape: [Int], values: [Float])]) -> (Data, String) {
        let header = #"{"model_name":"m","outputs":["# + outputs.map { o in
            #"{"name":"\#(o.name)","datatype":"FP32","shape":[\#(o.shape.map(String.init).joined(separator: ","))],"parameters":{"binary_data_size":\#(o.values.count * 4)}}"#
        }.joined(separator: ",") + "]}"
        var body = Data(header.utf8)
        for o in outputs { o.values.withUnsafeBytes { body.append(contentsOf: $0) } }
        return (body, String(header.utf8.count))
    }

    @Test func binaryOutputsFollowTheHeaderInItsOrder() throws {
        let (body, length) = Self.answer([("scores", [1, 3, 1], [0.5, -1, 2]), ("boxes", [1, 2], [7, 8])])
        let tensors = try OpenInferenceClient.decodeResponse(body, headerLength: length)
        #expect(tensors.map(\.name) == ["scores", "boxes"])
        #expect(tensors[0].shape == [1, 3, 1] && tensors[0].values == [0.5, -1, 2])
        #expect(tensors[1].values == [7, 8])
    }

    @Test func jsonDataIsReadWhenAServerIgnoresTheBinaryRequest() throws {
        let body = Data(#"{"outputs":[{"name":"y","datatype":"FP32","shape":[2],"data":[1.5,2.5]}]}"#.utf8)
        let tensors = try OpenInferenceClient.decodeResponse(body, headerLength: nil)
        #expect(tensors == [TensorData(name: "y", shape: [2], values: [1.5, 2.5])])
    }

    @Test func malformedAnswersAreNamed() throws {
        let (body, length) = Self.answer([("y", [4], [1, 2, 3, 4])])
        #expect(throws: InferenceError.self) { try OpenInferenceClient.decodeResponse(body.prefix(body.count - 4), headerLength: length) }
        #expect(throws: InferenceError.self) { try OpenInferenceClient.decodeResponse(body, headerLength: String(body.count + 1)) }
        let int = Data(#"{"outputs":[{"name":"y","datatype":"INT64","shape":[1],"parameters":{"binary_data_size":8}}]}"#.utf8) + Data(count: 8)
        #expect(performing: { try OpenInferenceClient.decodeResponse(int, headerLength: String(int.count - 8)) },
                throws: { ($0 as? InferenceError)?.message.contains("is INT64; StreamLens decodes FP32") == true })
        #expect(OpenInferenceClient.serverError(Data(#"{"error":"no such model"}"#.utf8)) == "no such model")
    }
}
