import Foundation

/// One output tensor of an Open Inference Protocol answer.
public struct WireTensor: Sendable, Equatable {
    public var name: String
    public var shape: [Int]
    public var values: [Float]
    public init(name: String, shape: [Int], values: [Float]) {
        self.name = name; self.shape = shape; self.values = values
    }
}

/// The body of an answer to POST …/infer (KServe v2 with the binary tensor extension): a JSON
/// header listing the outputs, then each output's raw little-endian FP32 bytes in that order;
/// the `Inference-Header-Content-Length` header says where the JSON ends (absent: all of it is
/// JSON, the values as "data" arrays).
///
/// Nothing the server says is used before it is checked: the header length against the body,
/// every dimension (not negative), element counts and byte sizes (no overflow, within the body),
/// each block against its shape. A malformed answer is a `WireError`, never a trap (Fuzz/, target
/// `inference-response`).
public enum InferenceResponseDecoder {
    private struct Response: Decodable {
        struct Output: Decodable {
            struct Parameters: Decodable { var binary_data_size: Int? }
            var name: String
            var datatype: String
            var shape: [Int]
            var parameters: Parameters?
            var data: [Float]?
        }
        var outputs: [Output]
    }

    /// `headerLength`: the Inference-Header-Content-Length header's text, if any.
    public static func decode(_ body: Data, headerLength: String?) throws -> [WireTensor] {
        let jsonEnd = try headerLength.map { try HTTPResponseReader.length($0, what: "Inference-Header-Content-Length") } ?? body.count
        guard jsonEnd <= body.count else {
            throw WireError("the answer (\(body.count) bytes) is shorter than its Inference-Header-Content-Length (\(jsonEnd))")
        }
        let response: Response
        do {
            response = try JSONDecoder().decode(Response.self, from: body.prefix(jsonEnd))
        } catch {
            throw WireError("the answer is not an inference response (\(HTTPResponseReader.printable(String(decoding: body.prefix(min(jsonEnd, 200)), as: UTF8.self))))")
        }
        var offset = body.startIndex + jsonEnd
        return try response.outputs.map { output in
            guard output.datatype == "FP32" else { throw WireError("output \(output.name) is \(output.datatype); StreamLens decodes FP32") }
            let count = try elementCount(output.shape, name: output.name)
            if let size = output.parameters?.binary_data_size {
                // count * 4 cannot overflow: elementCount keeps count within the body's size.
                guard size >= 0, size == count * 4, size <= body.endIndex - offset else {
                    throw WireError("output \(output.name): \(size) bytes for shape \(output.shape), \(body.endIndex - offset) bytes left in the answer")
                }
                var values = [Float](repeating: 0, count: count)
                values.withUnsafeMutableBytes { _ = body.copyBytes(to: $0, from: offset..<(offset + size)) }
                offset += size
                return WireTensor(name: output.name, shape: output.shape, values: values)
            }
            guard let data = output.data, data.count == count else { throw WireError("output \(output.name) has no data") }
            return WireTensor(name: output.name, shape: output.shape, values: data)
        }
    }

    /// The product of `shape`, refused when a dimension is negative or the product could not
    /// fit in any answer StreamLens takes.
    static func elementCount(_ shape: [Int], name: String) throws -> Int {
        guard !shape.contains(where: { $0 < 0 }) else { throw WireError("output \(name) has shape \(shape): a negative dimension") }
        guard let count = TensorShape.elementCount(shape, atMost: HTTPResponseReader.Limits().bodyBytes / 4) else {
            throw WireError("output \(name) has shape \(shape): more elements than any answer StreamLens takes")
        }
        return count
    }

    /// The protocol's error body: {"error": "..."}.
    public static func serverError(_ body: Data) -> String? {
        struct Failure: Decodable { var error: String }
        return (try? JSONDecoder().decode(Failure.self, from: body)).map { HTTPResponseReader.printable($0.error, limit: 500) }
    }
}
