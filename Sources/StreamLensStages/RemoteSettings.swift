import Foundation
import StreamLensCore
import StreamLensInference

/// `device=remote`: the model runs on an Open Inference Protocol server (Triton, OpenVINO Model
/// Server, KServe…). The properties every model stage shares for it, held as `remote`, and the
/// address they make.
public struct RemoteSettings: StageSettings {
    static let device = "remote"

    public var server = ""
    public var remoteModel = ""
    public var remoteVersion = ""
    public var inFlight = 4
    public var timeoutMs = 2000
    public var retries = 2
    public init() {}

    public static let properties: [Property<RemoteSettings>] = [
        .string("server", \.server,
                help: "with device=remote: the Open Inference Protocol (KServe v2) server, http://HOST:PORT (Triton, OpenVINO Model Server, KServe)"),
        .string("remote-model", \.remoteModel, help: "with device=remote: the model's name on the server (empty: the manifest's file name without .json)"),
        .string("remote-version", \.remoteVersion, help: "with device=remote: the model version (empty: the server's choice)"),
        .int("in-flight", \.inFlight, 1...32,
             help: "with device=remote: requests on their way at once; frames wait in order for theirs (live sources still drop stale frames)"),
        .int("timeout-ms", \.timeoutMs, 10...600_000, help: "with device=remote: time a request may take"),
        .int("retries", \.retries, 0...10,
             help: "with device=remote: retries of a request lost on the way (back-off 50 ms, doubling); then the frame goes on without inference"),
    ]

    /// nil unless `device` is remote. A missing or malformed server is a setup error.
    func address(device: String, manifestPath: String) throws -> RemoteModelAddress? {
        guard device == Self.device else { return nil }
        guard !server.isEmpty else {
            throw StageError("device=remote needs server=http://HOST:PORT (an Open Inference Protocol server: Triton, OpenVINO Model Server, KServe)")
        }
        guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw StageError("server=\(server) is not an http://HOST:PORT address")
        }
        guard url.scheme == "http" else {
            throw StageError("server=\(server): StreamLens speaks plain HTTP to inference servers; terminate TLS in a sidecar or the load balancer and give its http:// address")
        }
        let model = remoteModel.isEmpty ? URL(fileURLWithPath: manifestPath).deletingPathExtension().lastPathComponent : remoteModel
        return RemoteModelAddress(server: url, model: model, version: remoteVersion, timeout: Double(timeoutMs) / 1000, retries: retries,
                                  inFlight: inFlight)
    }
}
