import Foundation
import StreamLensCore
import Synchronization

// A client of the Open Inference Protocol (KServe v2), HTTP/REST with the binary tensor data
// extension — what NVIDIA Triton, OpenVINO Model Server, KServe and Seldon MLServer speak:
//
//   GET  /v2/models/NAME[/versions/V]         model metadata: inputs, outputs (name, datatype, shape)
//   GET  /v2/models/NAME[/versions/V]/ready   200 when the model can take requests
//   POST /v2/models/NAME[/versions/V]/infer   body: JSON header, then the raw input tensors;
//        Inference-Header-Content-Length says where the JSON ends (request and response)
//
// Tensors travel as raw little-endian FP32, never as JSON number arrays.

/// Where a model is served and how hard to try.
public struct RemoteModelAddress: Sendable, Equatable {
    /// http://host:port (a path prefix is kept: http://gateway/triton).
    public var server: URL
    public var model: String
    /// "" lets the server pick.
    public var version: String
    /// Seconds a request may take before it counts as failed.
    public var timeout: Double
    /// Retries of a request that failed on the way (connection refused or lost, a timeout, 502,
    /// 503, 504), with back-off 50 ms, 100 ms, 200 ms… Errors the server means (400, 404, 500)
    /// are not retried.
    public var retries: Int
    /// Requests on their way at once (frames wait in order for theirs).
    public var inFlight: Int

    public init(server: URL, model: String, version: String = "", timeout: Double = 2, retries: Int = 2, inFlight: Int = 4) {
        self.server = server; self.model = model; self.version = version; self.timeout = timeout; self.retries = retries
        self.inFlight = inFlight
    }

    /// "model NAME (version V) on http://…"
    public var description: String {
        "model \(model)\(version.isEmpty ? "" : " (version \(version))") on \(server.absoluteString)"
    }

    var modelPath: String { "v2/models/\(model)" + (version.isEmpty ? "" : "/versions/\(version)") }
    func url(_ suffix: String = "") -> URL {
        var base = server.absoluteString
        if !base.hasSuffix("/") { base += "/" }
        return URL(string: base + modelPath + suffix)!
    }
}

/// One tensor as the server's model metadata lists it.
public struct RemoteTensorMetadata: Decodable, Sendable, Equatable {
    public var name: String
    public var datatype: String
    /// -1 for a dimension the model leaves free (the batch, a style model's height and width).
    public var shape: [Int]
}

/// GET /v2/models/NAME.
public struct RemoteModelMetadata: Decodable, Sendable, Equatable {
    public var name: String
    public var versions: [String]?
    public var platform: String?
    public var inputs: [RemoteTensorMetadata]
    public var outputs: [RemoteTensorMetadata]
}

/// One request on its way, to a server or to OpenVINO's own threads: finished there, waited for
/// by the stage's worker. A remote answer arrives whole (`finish`); a local request only says it
/// is done (`markDone`) and its outputs are read by `collect` on the thread that waits.
public final class PendingInference: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<[TensorData], InferenceError>?
    private var done = false
    private var collect: (() -> Result<[TensorData], InferenceError>)?
    private let signal = DispatchSemaphore(value: 0)
    /// When it was sent (DispatchTime nanoseconds) and the bytes of its body both ways (0 for
    /// a local request).
    public let sent = DispatchTime.now().uptimeNanoseconds
    public let bytesSent: Int
    private var _bytesReceived = 0
    private var _finishedAt: UInt64 = 0

    /// `collect`: for a local request, turns the finished request into its result.
    package init(bytesSent: Int, collect: (() -> Result<[TensorData], InferenceError>)? = nil) {
        self.bytesSent = bytesSent
        self.collect = collect
    }

    package func finish(_ result: Result<[TensorData], InferenceError>, bytesReceived: Int) {
        lock.withLock {
            self.result = result
            done = true
            _bytesReceived = bytesReceived
            _finishedAt = DispatchTime.now().uptimeNanoseconds
        }
        signal.signal()
    }

    /// A local request is done: its result is read when someone waits.
    package func markDone() {
        lock.withLock {
            done = true
            _finishedAt = DispatchTime.now().uptimeNanoseconds
        }
        signal.signal()
    }

    /// The model goes away before anyone collected the result: `error` is the result.
    package func abandon(_ error: InferenceError) {
        lock.withLock {
            collect = nil
            if result == nil { result = .failure(error) }
        }
    }

    public var isFinished: Bool { lock.withLock { done || result != nil } }
    /// The result has been read (a local request's infer request is free again).
    package var isCollected: Bool { lock.withLock { result != nil } }
    public var bytesReceived: Int { lock.withLock { _bytesReceived } }
    /// Milliseconds from sending to the answer (retries included).
    public var roundTripMilliseconds: Double { lock.withLock { Double(_finishedAt &- sent) / 1e6 } }

    /// Blocks until the answer (or the failure) is there.
    public func wait() -> Result<[TensorData], InferenceError> {
        if let result = lock.withLock({ result }) { return result }
        if !lock.withLock({ done }) {
            signal.wait()
            signal.signal() // a second wait returns at once
        }
        return lock.withLock {
            if result == nil, let collect {
                result = collect()
                self.collect = nil
            }
            return result ?? .failure(InferenceError("the request ended without a result"))
        }
    }
}

/// An Open Inference Protocol client for one model: metadata, readiness, inference. Requests
/// run concurrently, each on a kept-alive connection of its own (see HTTPConnection.swift).
public final class OpenInferenceClient: Sendable {
    public let address: RemoteModelAddress
    private let http: HTTPClient
    private let basePath: String
    private let queue = DispatchQueue(label: "streamlens remote inference", attributes: .concurrent)

    public init(address: RemoteModelAddress) {
        self.address = address
        let port = address.server.port ?? (address.server.scheme == "https" ? 443 : 80)
        http = HTTPClient(host: address.server.host ?? "127.0.0.1", port: port, timeout: address.timeout)
        var path = address.server.path
        if !path.hasSuffix("/") { path += "/" }
        basePath = path + address.modelPath
    }

    /// The model's metadata, after checking the server answers and the model is ready. Each
    /// failure gets its own message: server down, no such model, model not ready, not the
    /// protocol at all.
    public func metadata() throws -> RemoteModelMetadata {
        let (status, body) = try get(basePath)
        guard status == 200 else {
            let reason = Self.serverError(body).map { ": \($0)" } ?? ""
            if status == 404 || status == 400 {
                throw InferenceError("\(address.server.absoluteString) does not serve model \(address.model)\(address.version.isEmpty ? "" : " version \(address.version)") (HTTP \(status)\(reason)); set remote-model= to a model the server has")
            }
            throw InferenceError("\(address.description) answered HTTP \(status) to its metadata request\(reason)")
        }
        let metadata: RemoteModelMetadata
        do {
            metadata = try JSONDecoder().decode(RemoteModelMetadata.self, from: body)
        } catch {
            throw InferenceError("\(address.server.absoluteString) is not an Open Inference Protocol (KServe v2) server: GET \(basePath) did not return model metadata")
        }
        let (readyStatus, readyBody) = try get(basePath + "/ready")
        guard readyStatus == 200 else {
            throw InferenceError("\(address.description) is not ready (HTTP \(readyStatus)\(Self.serverError(readyBody).map { ": \($0)" } ?? ""))")
        }
        return metadata
    }

    private func get(_ path: String) throws -> (Int, Data) {
        do {
            let response = try http.exchange(method: "GET", path: path)
            return (response.status, response.body)
        } catch let failure as WireError where failure.transient {
            throw InferenceError("\(address.server.absoluteString) cannot be reached: \(failure.message); is the inference server running? (server=)")
        } catch let failure as WireError {
            throw InferenceError("\(address.server.absoluteString) answered \(path) with a malformed answer: \(failure.message)")
        }
    }

    /// One input tensor: FP32 values, little-endian, in `shape`.
    public struct Input {
        public var name: String
        public var shape: [Int]
        public var data: Data
        public init(name: String, shape: [Int], data: Data) { self.name = name; self.shape = shape; self.data = data }
    }

    /// Sends one inference request; the answer arrives on another thread. `outputs`: the names
    /// to ask for, each returned as binary data.
    public func infer(_ inputs: [Input], outputs: [String]) -> PendingInference {
        var header = #"{"inputs":["#
        header += inputs.map { input in
            #"{"name":"\#(input.name)","shape":[\#(input.shape.map(String.init).joined(separator: ","))],"datatype":"FP32","parameters":{"binary_data_size":\#(input.data.count)}}"#
        }.joined(separator: ",")
        header += #"],"outputs":["#
        header += outputs.map { #"{"name":"\#($0)","parameters":{"binary_data":true}}"# }.joined(separator: ",")
        header += "]}"
        let json = Data(header.utf8)
        var joined = Data(capacity: json.count + inputs.reduce(0) { $0 + $1.data.count })
        joined.append(json)
        for input in inputs { joined.append(input.data) }
        let body = joined
        let headers = [("Content-Type", "application/octet-stream"), ("Inference-Header-Content-Length", String(json.count))]
        let pending = PendingInference(bytesSent: body.count)
        let path = basePath + "/infer"
        queue.async { [self] in
            // One loop for both kinds of transient failure: lost on the way, or 502/503/504.
            var attempt = 0
            var outcome: Result<HTTPResponse, WireError>
            while true {
                do {
                    outcome = .success(try http.exchange(method: "POST", path: path, headers: headers, body: body))
                } catch {
                    outcome = .failure((error as? WireError) ?? WireError("\(error)"))
                }
                let transient: Bool
                switch outcome {
                case .success(let response): transient = [502, 503, 504].contains(response.status)
                case .failure(let failure): transient = failure.transient
                }
                guard transient && attempt < address.retries else { break }
                attempt += 1
                usleep(useconds_t(50_000 << (attempt - 1)))
            }
            switch outcome {
            case .failure(let failure) where failure.transient:
                pending.finish(.failure(InferenceError("\(address.server.absoluteString) cannot be reached: \(failure.message)\(attempt > 0 ? " (\(attempt + 1) tries)" : "")")),
                               bytesReceived: 0)
            case .failure(let failure):
                pending.finish(.failure(InferenceError("\(address.description) sent a malformed answer: \(failure.message)")), bytesReceived: 0)
            case .success(let response) where response.status != 200:
                pending.finish(.failure(InferenceError("\(address.description) answered HTTP \(response.status)\(Self.serverError(response.body).map { ": \($0)" } ?? "")")),
                               bytesReceived: response.body.count)
            case .success(let response):
                let headerLength = response.headers["inference-header-content-length"]
                pending.finish(Result { try Self.decodeResponse(response.body, headerLength: headerLength) }.mapError {
                    ($0 as? InferenceError).map { InferenceError("\(address.description): \($0.message)") } ?? InferenceError("\($0)")
                }, bytesReceived: response.body.count)
            }
        }
        return pending
    }

    /// The answer's tensors (InferenceResponseDecoder, in StreamLensCore, checks every length
    /// and shape the server gives); `headerLength`: its Inference-Header-Content-Length.
    static func decodeResponse(_ body: Data, headerLength: String?) throws -> [TensorData] {
        do {
            return try InferenceResponseDecoder.decode(body, headerLength: headerLength).map {
                TensorData(name: $0.name, shape: $0.shape, values: $0.values)
            }
        } catch let error as WireError {
            throw InferenceError(error.message)
        }
    }

    /// The protocol's error body: {"error": "..."}.
    static func serverError(_ body: Data) -> String? { InferenceResponseDecoder.serverError(body) }
}
