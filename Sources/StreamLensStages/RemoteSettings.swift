import Foundation
import StreamLensCore
import StreamLensInference

/// `device=remote`: the model runs on an Open Inference Protocol server (Triton, OpenVINO Model
/// Server, KServe…). The properties every model stage shares for it, and the address they make.
enum RemoteSettings {
    static let device = "remote"

    static let properties: [PropertySpec] = [
        PropertySpec("server", .string, default: .string(""),
                     help: "with device=remote: the Open Inference Protocol (KServe v2) server, http://HOST:PORT (Triton, OpenVINO Model Server, KServe)"),
        PropertySpec("remote-model", .string, default: .string(""),
                     help: "with device=remote: the model's name on the server (empty: the manifest's file name without .json)"),
        PropertySpec("remote-version", .string, default: .string(""), help: "with device=remote: the model version (empty: the server's choice)"),
        PropertySpec("in-flight", .int(1...32), default: .int(4),
                     help: "with device=remote: requests on their way at once; frames wait in order for theirs (live sources still drop stale frames)"),
        PropertySpec("timeout-ms", .int(10...600_000), default: .int(2000), help: "with device=remote: time a request may take"),
        PropertySpec("retries", .int(0...10), default: .int(2),
                     help: "with device=remote: retries of a request lost on the way (back-off 50 ms, doubling); then the frame goes on without inference"),
    ]

    /// nil unless device=remote. A missing or malformed server is a setup error.
    static func address(_ settings: StageSettings, manifestPath: String) throws -> RemoteModelAddress? {
        guard settings.string("device") == device else { return nil }
        let text = settings.string("server")
        guard !text.isEmpty else {
            throw StageError("device=remote needs server=http://HOST:PORT (an Open Inference Protocol server: Triton, OpenVINO Model Server, KServe)")
        }
        guard let url = URL(string: text), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw StageError("server=\(text) is not an http://HOST:PORT address")
        }
        guard url.scheme == "http" else {
            throw StageError("server=\(text): StreamLens speaks plain HTTP to inference servers; terminate TLS in a sidecar or the load balancer and give its http:// address")
        }
        var model = settings.string("remote-model")
        if model.isEmpty { model = URL(fileURLWithPath: manifestPath).deletingPathExtension().lastPathComponent }
        return RemoteModelAddress(server: url, model: model, version: settings.string("remote-version"),
                                  timeout: Double(settings.int("timeout-ms")) / 1000, retries: settings.int("retries"),
                                  inFlight: settings.int("in-flight"))
    }
}

/// A remote model's figures for the end-of-stream summary and the outage notices: requests,
/// round trips, bytes on the wire, frames that went on without inference while the server was
/// away. One per stage, used by its worker thread.
struct RemoteRecord {
    private(set) var roundTrips: [Double] = []
    private(set) var bytesSent = 0, bytesReceived = 0, requests = 0, failures = 0, skipped = 0
    /// While the server is away: when to try again, and how long the next wait is.
    private var retryAt: UInt64 = 0
    private var backoff: UInt64 = 250_000_000
    private(set) var down = false

    /// A new request may go out (not waiting out a back-off after a failure).
    func mayTry(now: UInt64) -> Bool { !down || now >= retryAt }

    mutating func skip() { skipped += 1 }

    /// One finished request; the notice to give, if the server just went away or came back.
    mutating func record(_ request: PendingInference, error: InferenceError?, address: RemoteModelAddress) -> StageNotice? {
        requests += 1
        bytesSent += request.bytesSent
        bytesReceived += request.bytesReceived
        let now = DispatchTime.now().uptimeNanoseconds
        if let error {
            failures += 1
            retryAt = now + backoff
            let wait = backoff
            backoff = min(backoff * 2, 4_000_000_000)
            let first = !down
            down = true
            return first ? StageNotice(.warning, "\(error.message); frames go on without inference, trying again every \(String(format: "%.2g", Double(wait) / 1e9))…4 s") : nil
        }
        roundTrips.append(request.roundTripMilliseconds)
        if roundTrips.count > 4096 { roundTrips.removeFirst(2048) }
        backoff = 250_000_000
        guard down else { return nil }
        down = false
        return StageNotice(.info, "\(address.description) answers again (\(skipped) frames went on without inference so far)")
    }

    var summary: String {
        let sorted = roundTrips.sorted()
        func at(_ q: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))] }
        let perRequest = requests > 0 ? (bytesSent / requests, bytesReceived / requests) : (0, 0)
        return String(format: "remote: %d requests, round trip p50 %.1f ms p95 %.1f ms, %d+%d bytes a request, %d failed, %d frames without inference",
                      requests, at(0.5), at(0.95), perRequest.0, perRequest.1, failures, skipped)
    }
}
