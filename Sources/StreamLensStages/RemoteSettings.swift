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
