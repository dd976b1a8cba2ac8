import Foundation
import StreamLensCore
import Testing

/// HTTPResponseReader and InferenceResponseDecoder on answers written byte by byte: good ones in
/// every framing and split at every size, and the malformed ones a broken or hostile server sends
/// (each a WireError naming it, never a trap). Through a real socket: CLITests/HostileServerTests.
@Suite struct HTTPResponseReaderTests {
    /// `bytes` handed to the reader `step` bytes at a time.
    static func read(_ bytes: String, step: Int = 7, limits: HTTPResponseReader.Limits = .init(), count: Int = 1) throws -> [HTTPResponse] {
        let data = Array(bytes.utf8)
        var offset = 0
        var reader = HTTPResponseReader(limits: limits)
        let source: HTTPResponseReader.Source = {
            guard offset < data.count else { return nil }
            let end = min(data.count, offset + step)
            defer { offset = end }
            return Data(data[offset..<end])
        }
        return try (0..<count).map { _ in try reader.read(from: source) }
    }

    static func refused(_ bytes: String, limits: HTTPResponseReader.Limits = .init()) -> WireError? {
        do { _ = try read(bytes, limits: limits); return nil } catch let e as WireError { return e } catch { return nil }
    }

    @Test(arguments: [1, 3, 64, 100_000])
    func goodAnswersInEveryFraming(_ step: Int) throws {
        let two = try Self.read("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhelloHTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n", step: step, count: 2)
        #expect(two[0] == HTTPResponse(status: 200, headers: ["content-length": "5", "x-a": "1"], body: Data("hello".utf8), keepAlive: true))
        #expect(two[1].status == 404 && two[1].body.isEmpty)
        let chunked = try Self.read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=1\r\nWiki\r\n5\r\npedia\r\n0\r\nT: 1\r\n\r\n", step: step)
        #expect(chunked[0].body == Data("Wikipedia".utf8))
        let toClose = try Self.read("HTTP/1.0 200 OK\r\n\r\nall of it", step: step)
        #expect(toClose[0].body == Data("all of it".utf8) && !toClose[0].keepAlive)
        let interim = try Self.read("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", step: step)
        #expect(interim[0].status == 200 && interim[0].body == Data("ok".utf8) && !interim[0].keepAlive)
    }

    @Test func malformedAnswersAreRefusedWithTheirReason() {
        let cases: [(String, String)] = [
            ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n{}", "Content-Length -1 is not a length"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\n", "Content-Length 12abc is not a length"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", "is not a length"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 100000000000000\r\n\r\n{", "an answer of 100000000000000 bytes or more, over the 64 MiB StreamLens takes"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde", "two different Content-Length headers"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n{}\r\n0\r\n\r\n", "a malformed chunk size (-1)"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n", "a malformed chunk size"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n0\r\n\r\n", "a chunk longer than its size"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "Transfer-Encoding gzip (only chunked is read)"),
            ("HTTP/1.1 2000 OK\r\n\r\n", "not an HTTP answer (HTTP/1.1 2000 OK)"),
            ("SSH-2.0-OpenSSH\r\n", "not an HTTP answer (SSH-2.0-OpenSSH)"),
            ("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "a malformed header line (no colon here)"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "the connection was closed after 5 of 10 body bytes"),
            ("HTTP/1.1 200 OK\r\nContent-Le", "the connection was closed in the middle of a header line"),
        ]
        for (bytes, message) in cases {
            let error = Self.refused(bytes)
            #expect(error?.message.contains(message) == true, "\(bytes.debugDescription): \(error?.message ?? "accepted")")
        }
        // Nothing received at all: the connection was closed before an answer (worth a retry).
        #expect(Self.refused("") == WireError("the connection was closed before an answer", transient: true))
    }

    @Test func everyPartIsBounded() {
        var limits = HTTPResponseReader.Limits()
        limits.lineBytes = 100
        limits.headers = 3
        limits.bodyBytes = 1000
        #expect(Self.refused("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 200) + "\r\n\r\n", limits: limits)?.message
                == "a header line longer than 100 bytes")
        // A line that never ends is refused once it passes the limit, not when the stream ends.
        #expect(Self.refused("HTTP/1.1 200 OK\r\n" + String(repeating: "b", count: 150), limits: limits)?.message == "a header line longer than 100 bytes")
        #expect(Self.refused("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", limits: limits)?.message == "more than 3 header lines")
        #expect(Self.refused("HTTP/1.1 200 OK\r\nContent-Length: 1001\r\n\r\n", limits: limits)?.message.contains("an answer of 1001 bytes or more") == true)
        #expect(Self.refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" + String(repeating: "x", count: 1000) + "\r\n1\r\nx\r\n0\r\n\r\n",
                             limits: limits)?.message.contains("an answer of 1001 bytes or more") == true)
        #expect(Self.refused("HTTP/1.0 200 OK\r\n\r\n" + String(repeating: "y", count: 1500), limits: limits)?.message.contains("bytes or more") == true)
    }

    /// `statusOnly` (a webhook's answer): a long body, however framed, is cut at 4 KB, the rest
    /// left unread and the connection not kept; the status is the answer's.
    @Test func statusOnlyCutsLongBodiesAndKeepsNoConnection() throws {
        let long = String(repeating: "z", count: 100_000)
        let framings = ["HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + long,
                        "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n" + String(repeating: "400\r\n" + String(repeating: "z", count: 1024) + "\r\n", count: 60),
                        "HTTP/1.0 200 OK\r\n\r\n" + long]
        for (i, text) in framings.enumerated() {
            // The stream never ends: the reader must stop by itself.
            let answer = try #require(try Self.read(text, step: 1000, limits: .statusOnly).first)
            #expect(answer.body.count == 4096 && !answer.keepAlive && (200...201).contains(answer.status), "framing \(i): \(answer.body.count) bytes")
        }
        let short = try Self.read("HTTP/1.1 204 No Content\r\n\r\n", limits: .statusOnly)
        #expect(short[0].status == 204 && short[0].keepAlive)
    }
}

@Suite struct InferenceResponseDecoderTests {
    static func answer(_ outputs: [(name: String, shape: [Int], values: [Float])]) -> (Data, String) {
        let header = #"{"model_name":"m","outputs":["# + outputs.map { o in
            #"{"name":"\#(o.name)","datatype":"FP32","shape":[\#(o.shape.map(String.init).joined(separator: ","))],"parameters":{"binary_data_size":\#(o.values.count * 4)}}"#
        }.joined(separator: ",") + "]}"
        var body = Data(header.utf8)
        for o in outputs { o.values.withUnsafeBytes { body.append(contentsOf: $0) } }
        return (body, String(header.utf8.count))
    }

    static func refused(_ body: Data, _ headerLength: String?) -> String? {
        do { _ = try InferenceResponseDecoder.decode(body, headerLength: headerLength); return nil } catch { return "\(error)" }
    }

    @Test func binaryBlocksFollowTheHeader() throws {
        let (body, length) = Self.answer([("scores", [1, 3, 1], [0.5, -1, 2]), ("boxes", [1, 2], [7, 8])])
        let tensors = try InferenceResponseDecoder.decode(body, headerLength: length)
        #expect(tensors == [WireTensor(name: "scores", shape: [1, 3, 1], values: [0.5, -1, 2]), WireTensor(name: "boxes", shape: [1, 2], values: [7, 8])])
    }

    @Test func liesAboutLengthsAndShapesAreRefused() {
        let (body, length) = Self.answer([("y", [4], [1, 2, 3, 4])])
        let header = Int(length)!
        func with(_ json: String) -> Data { Data(json.utf8) + body.suffix(from: header) }
        let overflow = #"{"outputs":[{"name":"y","datatype":"FP32","shape":[4611686018427387904,4],"parameters":{"binary_data_size":16}}]}"#
        let negativeDimension = #"{"outputs":[{"name":"y","datatype":"FP32","shape":[-4],"parameters":{"binary_data_size":16}}]}"#
        let negativeSize = #"{"outputs":[{"name":"y","datatype":"FP32","shape":[4],"parameters":{"binary_data_size":-16}}]}"#
        let tooMuch = #"{"outputs":[{"name":"y","datatype":"FP32","shape":[8],"parameters":{"binary_data_size":32}}]}"#
        let cases: [(Data, String?, String)] = [
            (body, "-1", "Inference-Header-Content-Length -1 is not a length"),
            (body, String(body.count + 1), "is shorter than its Inference-Header-Content-Length"),
            (body, "9223372036854775807", "is not a length"),
            (with(overflow), String(overflow.utf8.count), "more elements than any answer StreamLens takes"),
            (with(negativeDimension), String(negativeDimension.utf8.count), "a negative dimension"),
            (with(negativeSize), String(negativeSize.utf8.count), "output y: -16 bytes for shape [4]"),
            (with(tooMuch), String(tooMuch.utf8.count), "output y: 32 bytes for shape [8], 16 bytes left in the answer"),
            (body, "3", "the answer is not an inference response"),
        ]
        for (data, length, message) in cases {
            let error = Self.refused(data, length)
            #expect(error?.contains(message) == true, "\(length ?? "nil"): \(error ?? "accepted")")
        }
    }
}
