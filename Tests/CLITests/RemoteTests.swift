import Foundation
import StreamLensTesting
import Testing

/// device=remote against a real Open Inference Protocol server: NVIDIA's tritonserver (from the
/// nvidia-pytriton wheel, .deps/triton-venv, made by `make setup`) serving the same model files
/// through OpenVINO's Python API, on loopback, started here (tools/remote/serve.py), each on a
/// port the kernel had free (freeLoopbackPort), never a fixed one.
@Suite(.serialized) struct RemoteTests {
    /// A server for one test (a start costs ~7 s): the full-range detector and the mosaic
    /// style, f32 like the local runs they are compared with.
    static func server() throws -> InferenceServer {
        try InferenceServer(port: freeLoopbackPort(), models: [
            "face-full-range": CLI.installedModel("mediapipe-face-detection", "face_detection_full_range_sparse.tflite"),
            "mosaic": "Models/mosaic.onnx",
        ])
    }

    @Test func remoteDetectionsEqualLocalOnes() throws {
        let server = try Self.server()
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = try DetectTests.movingFaceClip(in: dir) // the face moving right, 60 frames
        func detect(_ device: String) throws -> [(frame: Int, faces: [DetectTests.Face])] {
            let jsonl = dir.appendingPathComponent("\(device).jsonl").path
            let r = try CLI.run(["run", "filesrc location=\(clip) ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! lensdetect name=d model=Models/face-full-range.json precision=f32 device=\(device) server=\(server.url) in-flight=4 metadata=\(jsonl) ! fakesink"])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stderr.contains("d: 60 frames in, 60 out, 0 dropped"), "\(r.stderr)")
            if device == "remote" {
                #expect(r.stderr.contains("remote: 60 requests") && r.stderr.contains(" 0 failed, 0 frames without inference"), "\(r.stderr)")
            }
            return try DetectTests.readMetadata(String(contentsOfFile: jsonl, encoding: .utf8))
        }
        let local = try detect("CPU"), remote = try detect("remote")
        try #require(local.count == 60 && remote.count == 60)
        #expect(remote.map(\.frame) == Array(0..<60)) // in order, every frame its own answer
        for (l, r) in zip(local, remote) {
            guard l.faces.count == 1, r.faces.count == 1 else { Issue.record("frame \(l.frame): \(l.faces.count) local vs \(r.faces.count) remote faces"); continue }
            let a = l.faces[0], b = r.faces[0]
            #expect(max(abs(a.x - b.x), abs(a.y - b.y), abs(a.w - b.w), abs(a.h - b.h)) <= 1, "frame \(l.frame): \(a) vs \(b)")
        }
    }

    @Test func remoteStylizationMatchesLocal() throws {
        let server = try Self.server()
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        func stylize(_ device: String) throws -> [UInt8] {
            let out = dir.appendingPathComponent("\(device).rgb").path
            let r = try CLI.run(["run", "filesrc location=\(DetectTests.astronaut) ! pngdec ! imagefreeze num-buffers=3 ! videoconvert ! video/x-raw,format=RGB ! lensstylize model=Models/mosaic.json precision=f32 device=\(device) server=\(server.url) ! filesink location=\(out)"])
            #expect(r.status == 0, "\(r.stderr)")
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))
        }
        let local = try stylize("CPU"), remote = try stylize("remote")
        try #require(local.count == 512 * 512 * 3 * 3 && remote.count == local.count)
        let differences = zip(local, remote).map { abs(Int($0) - Int($1)) }
        #expect(differences.max()! <= 2, "max difference \(differences.max()!)")
        let input = try CLI.run(["run", "-q", "filesrc location=\(DetectTests.astronaut) ! pngdec ! videoconvert ! video/x-raw,format=RGB ! filesink location=\(dir.path)/in.rgb"])
        #expect(input.status == 0)
        let original = [UInt8](try Data(contentsOf: dir.appendingPathComponent("in.rgb")))
        let change = zip(original, remote.prefix(original.count)).reduce(0.0) { $0 + Double(abs(Int($1.0) - Int($1.1))) } / Double(original.count)
        #expect(change > 20, "the remote output changed the picture by only \(change)/255 on average")
    }

    @Test func badServersAndModelsAreClearErrors() throws {
        let server = try Self.server()
        let source = "videotestsrc num-buffers=5 ! videoconvert ! video/x-raw,format=BGRx"
        // A port the kernel had free, where nothing listens: the connection is refused.
        let refused = freeLoopbackPort()
        let cases: [(String, String)] = [
            ("lensdetect device=remote", "device=remote needs server=http://HOST:PORT"),
            ("lensdetect device=remote server=ftp://x", "server=ftp://x is not an http://HOST:PORT address"),
            ("lensdetect device=remote server=https://x:8000", "StreamLens speaks plain HTTP to inference servers"),
            ("lensdetect device=remote server=http://127.0.0.1:\(refused)", "http://127.0.0.1:\(refused) cannot be reached: connection refused"),
            ("lensdetect device=remote server=\(server.url) remote-model=nope", "\(server.url) does not serve model nope (HTTP 404"),
            // The short-range manifest (128x128) against the full-range model (192x192).
            ("lensdetect device=remote server=\(server.url) remote-model=face-full-range", "takes input input_1 as [-1, 192, 192, 3], but the manifest says 128x128 NHWC"),
            // The waves manifest names its input: the detector has no input of that name.
            ("lensstylize device=remote server=\(server.url) model=Models/waves.json remote-model=face-full-range", "model face-full-range on \(server.url) has no input named input (inputs: input_1)"),
        ]
        for (stage, message) in cases {
            let r = try CLI.run(["run", "\(source) ! \(stage) ! fakesink"], timeout: 30)
            #expect(r.status == 1 && r.stderr.contains(message), "\(stage): \(r.status) \(r.stderr)")
        }
    }

    /// A live stream keeps going while the server is killed (its whole process group, SIGKILL),
    /// frames pass without boxes, and boxes come back when a server returns on the same port.
    @Test func serverKilledMidStreamAndBack() throws {
        let port = freeLoopbackPort() // kept: the server comes back on it
        var server: InferenceServer? = try InferenceServer(port: port, models: ["face-short-range": CLI.installedModel("mediapipe-face-detection", "face_detection_short_range.tflite")])
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let jsonl = dir.appendingPathComponent("faces.jsonl").path
        let run = try Background.streamlens(["run", "filesrc location=\(DetectTests.astronaut) ! pngdec ! imagefreeze is-live=true ! videoconvert ! video/x-raw,format=BGRx,framerate=15/1 ! lensdetect name=d device=remote server=http://127.0.0.1:\(port) timeout-ms=1000 metadata=\(jsonl) ! fakesink"])
        func faceCounts() -> [Int] {
            ((try? String(contentsOfFile: jsonl, encoding: .utf8)) ?? "").split(separator: "\n").map { $0.components(separatedBy: "\"label\"").count - 1 }
        }
        func waitUntil(_ timeout: Double, _ condition: () -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline { if condition() { return true }; usleep(100_000) }
            return condition()
        }
        #expect(waitUntil(20) { faceCounts().filter { $0 == 1 }.count >= 15 }, "not 15 frames with a face in 20 s: faces per frame \(faceCounts().suffix(40)); \(run.stderr)")
        server?.kill()
        server = nil
        let killedAt = faceCounts().count
        #expect(run.waitFor("cannot be reached", timeout: 10), "\(run.stderr)")
        #expect(waitUntil(10) { faceCounts().count > killedAt + 30 }, "frames stopped while the server was away: \(killedAt) at the kill, \(faceCounts().count) 10 s later; \(run.stderr)")
        let during = faceCounts().suffix(20)
        #expect(during.allSatisfy { $0 == 0 }, "boxes while the server was away: \(during)")
        #expect(run.isRunning)
        server = try InferenceServer(port: port, models: ["face-short-range": CLI.installedModel("mediapipe-face-detection", "face_detection_short_range.tflite")])
        #expect(run.waitFor("answers again", timeout: 20), "\(run.stderr)")
        let back = faceCounts().count
        #expect(waitUntil(10) { faceCounts().count > back + 15 }, "frames after the server came back: \(back) then, \(faceCounts().count) 10 s later; \(run.stderr)")
        #expect(faceCounts().suffix(10).allSatisfy { $0 == 1 }, "no boxes after the server came back: \(faceCounts().suffix(10))")
        let end = run.stop(signal: SIGINT)
        #expect(end.status == 0, "\(end.stderr)")
        #expect(end.stderr.contains("frames without inference"), "\(end.stderr)")
    }
}

/// tools/remote/serve.py, which makes itself a process group so that a kill of the group takes
/// tritonserver and its Python helpers with it.
final class InferenceServer: @unchecked Sendable {
    let background: Background
    let url: String
    let home: URL

    init(port: Int, models: [String: String]) throws {
        let python = CLI.packageRoot.appendingPathComponent(".deps/triton-venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw InferenceServerError(message: "\(python) is missing: run make setup (tools/remote/setup-remote.sh)")
        }
        // A short folder: PyTriton's Unix sockets live under it (107 bytes at most).
        home = URL(fileURLWithPath: "/tmp/streamlens-triton-\(port)")
        var args = [python, "tools/remote/serve.py", "--port", String(port), "--home", home.path]
        for (name, path) in models.sorted(by: { $0.key < $1.key }) { args += ["--model", "\(name)=\(path)"] }
        background = try Background(URL(fileURLWithPath: python), Array(args.dropFirst()))
        url = "http://127.0.0.1:\(port)"
        for name in models.keys {
            guard background.waitFor("serving \(name) ", in: \.stdout, timeout: 120) else {
                let log = background.stderr.split(separator: "\n").suffix(15).joined(separator: "\n")
                kill()
                throw InferenceServerError(message: "the inference server did not start: \(log)")
            }
        }
    }

    /// SIGKILL to the whole group: a crashed server, not a clean stop.
    func kill() {
        if background.isRunning { Glibc.kill(-background.pid, SIGKILL) }
        _ = background.waitForExit(timeout: 10)
        // tritonserver may outlive the Python parent by a moment; its port must be free again.
        Glibc.kill(-background.pid, SIGKILL)
        usleep(300_000)
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: home)
    }
}

struct InferenceServerError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
