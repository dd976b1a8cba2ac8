import Foundation
import Testing

/// device=remote against a server that answers inference badly on purpose
/// (Tests/Python/hostile_inference_server.py, on loopback): each malformed, oversized, endless
/// or trickling answer costs that request and nothing else — the stage warns once, naming what
/// was wrong, the frames go on without inference, and the run ends normally with every frame
/// written.
@Suite struct HostileServerTests {
    /// Tests/Python/hostile_inference_server.py answering as `mode`, and its port (the server
    /// lives as long as the Background the caller keeps).
    static func server(_ mode: String) throws -> (Background, String) {
        let server = try Background(URL(fileURLWithPath: "/usr/bin/python3"),
                                    [CLI.packageRoot.appendingPathComponent("Tests/Python/hostile_inference_server.py").path, mode])
        try #require(server.waitFor("port ", in: \.stdout, timeout: 20), "server: \(server.stderr)")
        return (server, server.stdout.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "")
    }

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
        let (server, port) = try Self.server(mode)
        defer { withExtendedLifetime(server) {} }
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

    /// Keypoints are numbers from outside too: a server's 1e20 is bounded where it enters
    /// (FrameBounds: the frame grown by its size on every side, here 320x240 → 640,480), drawn
    /// by lensoverlay on RGB frames (it trapped converting to Int before) and written as such.
    @Test func aServersHugeKeypointsAreBoundedAndDrawn() throws {
        let (server, port) = try Self.server("huge-keypoints")
        defer { withExtendedLifetime(server) {} }
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let records = dir.appendingPathComponent("faces.jsonl").path
        let r = try CLI.run(["run", "videotestsrc num-buffers=10 ! video/x-raw,format=RGB,width=320,height=240 ! lensdetect name=d device=remote server=http://127.0.0.1:\(port) draw=false ! lensoverlay ! lensmetadata location=\(records) ! fakesink"],
                            timeout: 120)
        #expect(r.status == 0, "exit \(r.status): \(r.stderr)")
        #expect(r.stderr.contains("d: 10 frames in, 10 out, 0 dropped"), "\(r.stderr)")
        let lines = try String(contentsOfFile: records, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 10)
        for line in lines {
            let record = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let faces = try #require(record["detections"] as? [[String: Any]])
            try #require(faces.count == 1, "\(line)")
            let keypoints = try #require(faces[0]["keypoints"] as? [[Double]])
            #expect(keypoints.count == 6 && keypoints.allSatisfy { $0 == [640, 480] }, "\(keypoints)")
        }
    }

    /// A shape in the server's metadata whose element count overflows is refused at start with
    /// a message naming it (it trapped in the decoder's product before).
    @Test func anOverflowingShapeInTheMetadataIsRefused() throws {
        let (server, port) = try Self.server("metadata-huge-shape")
        defer { withExtendedLifetime(server) {} }
        let r = try CLI.run(["run", "videotestsrc num-buffers=10 ! video/x-raw,format=RGB,width=320,height=240 ! lensdetect device=remote server=http://127.0.0.1:\(port) ! fakesink"],
                            timeout: 120)
        #expect(r.status == 1, "exit \(r.status): \(r.stderr)")
        #expect(r.stderr.contains("regressors has shape [1, 3037000500, 3037000500, 16]: a negative dimension or more values than any answer StreamLens takes"), "\(r.stderr)")
    }
}
