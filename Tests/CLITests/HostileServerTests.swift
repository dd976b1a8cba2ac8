import Foundation
import Testing

/// device=remote against a server that answers inference badly on purpose
/// (Tests/Python/hostile_inference_server.py, on loopback): each malformed, oversized, endless
/// or trickling answer costs that request and nothing else — the stage warns once, naming what
/// was wrong, the frames go on without inference, and the run ends normally with every frame
/// written.
@Suite struct HostileServerTests {
    @Test(arguments: [
        ("neg-length", "Content-Length -1 is not a length"),
        ("neg-chunk", "a malformed chunk size (-1)"),
        ("neg-header", "Inference-Header-Content-Length -1 is not a length"),
        ("neg-binary", "output regressors: -16 bytes for shape [1, 896, 16]"),
        ("huge-shape", "output regressors has shape [4611686018427387904, 4]: more elements than any answer StreamLens takes"),
        ("huge-length", "an answer of 100000000000000 bytes or more, over the 64 MiB StreamLens takes"),
        ("endless-line", "a header line longer than 16384 bytes"),
        ("trickle", "cannot be reached: no answer within 1.5 s"),
        ("garbage", "not an HTTP answer ("),
        ("hang-up", "cannot be reached: the connection was closed before an answer"),
        ("wrong-shape", "sent output regressors as [1, 10, 4], expected [1, 896, 16]"),
    ])
    func aHostileServerCostsARequestNotTheRun(_ mode: String, _ reason: String) throws {
        let server = try Background(URL(fileURLWithPath: "/usr/bin/python3"),
                                    [CLI.packageRoot.appendingPathComponent("Tests/Python/hostile_inference_server.py").path, mode])
        try #require(server.waitFor("port ", in: \.stdout, timeout: 20), "server: \(server.stderr)")
        let port = server.stdout.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let timeout = mode == "trickle" ? 1500 : 500
        let r = try CLI.run(["run", "videotestsrc num-buffers=30 ! video/x-raw,format=RGB,width=320,height=240 ! lensdetect name=d device=remote server=http://127.0.0.1:\(port) timeout-ms=\(timeout) ! videoconvert ! x264enc ! mp4mux ! filesink location=\(out)"],
                            timeout: 120)
        #expect(!r.timedOut, "\(mode): hung: \(r.stderr)")
        #expect(r.status == 0, "\(mode): exit \(r.status): \(r.stderr)")
        #expect(!r.stderr.contains("Fatal error"), "\(mode): \(r.stderr)")
        #expect(r.stderr.contains(reason), "\(mode): expected '\(reason)' in \(r.stderr)")
        #expect(r.stderr.contains("frames go on without inference"), "\(mode): \(r.stderr)")
        #expect(r.stderr.contains("d: 30 frames in, 30 out, 0 dropped"), "\(mode): \(r.stderr)")
        #expect(countFrames(out) == 30, "\(mode): \(countFrames(out).map(String.init) ?? "no playable file")")
    }
}
