import Foundation
@testable import StreamLensInference
import StreamLensOpenVINO
import Testing

/// The client's side of the framing: the decoded tensors as the stages get them, refusals as
/// InferenceErrors. (The framing itself: StreamLensCoreTests/WireTests; a real server end to end:
/// CLITests/RemoteTests; a hostile one: CLITests/HostileServerTests.)
@Suite struct OpenInferenceProtocolTests {
    @Test func answersBecomeTensorsAndRefusalsInferenceErrors() throws {
        let json = Data(#"{"outputs":[{"name":"y","datatype":"FP32","shape":[2],"data":[1.5,2.5]}]}"#.utf8)
        #expect(try OpenInferenceClient.decodeResponse(json, headerLength: nil) == [TensorData(name: "y", shape: [2], values: [1.5, 2.5])])
        let int = Data(#"{"outputs":[{"name":"y","datatype":"INT64","shape":[1],"parameters":{"binary_data_size":8}}]}"#.utf8) + Data(count: 8)
        #expect(performing: { try OpenInferenceClient.decodeResponse(int, headerLength: String(int.count - 8)) },
                throws: { ($0 as? InferenceError)?.message.contains("is INT64; StreamLens decodes FP32") == true })
        #expect(throws: InferenceError.self) { try OpenInferenceClient.decodeResponse(json, headerLength: "-1") }
        #expect(OpenInferenceClient.serverError(Data(#"{"error":"no such model"}"#.utf8)) == "no such model")
    }
}
