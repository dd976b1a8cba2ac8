import Foundation
import Testing

/// `streamlens import` (Core ML style model → ONNX + manifest) through the built binary, and the
/// Python tools' own tests (Tests/Python: the importer against a NumPy reference of Core ML's
/// layers, the test-stylizer fixture against OpenVINO). The .mlmodel files are built at test time
/// by Tests/Python/mlmodels.py from random weights.
@Suite(.serialized) struct ImportTests {
    static let root = CLI.packageRoot

    /// Runs a program with the project's Python path (.deps/python, .deps/openvino) from `directory`.
    /// Output goes to files, as in CLI.run.
    static func spawn(_ executable: String, _ args: [String], in directory: URL = root, timeout: Double = 900) throws -> CLI.Result {
        var environment = ProcessInfo.processInfo.environment
        environment["PYTHONPATH"] = ["python", "openvino"].map { root.appendingPathComponent(".deps/\($0)").path }.joined(separator: ":")
        environment["PYTHONDONTWRITEBYTECODE"] = "1"  // no __pycache__ in the work tree
        let path = executable.hasPrefix("/") ? executable : "/usr/bin/env"
        return try CLI.spawn(URL(fileURLWithPath: path), executable.hasPrefix("/") ? args : [executable] + args,
                             environment: environment, in: directory, timeout: timeout)
    }

    /// A JSON array of numbers (integers or not) as doubles.
    static func numbers(_ value: Any?) -> [Double]? {
        (value as? [Any])?.compactMap { ($0 as? NSNumber)?.doubleValue }
    }

    /// style.mlmodel (a Create-ML-video-like network) and unsupported.mlmodel (a softmaxND layer
    /// named "probabilities") in a fresh directory.
    static func makeModels() throws -> URL {
        let dir = try scratchDirectory()
        let r = try spawn("python3", ["Tests/Python/mlmodels.py", dir.path])
        try #require(r.status == 0, "mlmodels.py failed:\n\(r.stdout)\n\(r.stderr)")
        return dir
    }

    @Test func pythonToolTests() throws {
        let r = try Self.spawn("python3", ["-m", "unittest", "discover", "-v", "-s", "Tests/Python"])
        #expect(!r.timedOut, "python3 -m unittest timed out")
        #expect(r.status == 0, "python3 -m unittest failed:\n\(r.stdout)\n\(r.stderr)")
        #expect(r.stderr.contains("OK"), "\(r.stderr)")
    }

    @Test func refusesAnUnsupportedLayer() throws {
        let dir = try Self.makeModels()
        defer { try? FileManager.default.removeItem(at: dir) }
        let model = dir.appendingPathComponent("unsupported.mlmodel").path
        let r = try CLI.run(["import", model])
        #expect(r.status == 1, "exit \(r.status)\n\(r.stdout)\n\(r.stderr)")
        #expect(r.stderr.contains("layer 'probabilities' has type 'softmaxND'"), "\(r.stderr)")
        #expect(!r.stderr.contains("Traceback"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("unsupported.onnx").path))
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("unsupported.json").path))
    }

    @Test func importsAStyleModel() throws {
        let dir = try Self.makeModels()
        defer { try? FileManager.default.removeItem(at: dir) }
        let onnxURL = dir.appendingPathComponent("styles/starry.onnx")
        let r = try CLI.run(["import", dir.appendingPathComponent("style.mlmodel").path, "-o", onnxURL.path, "--name", "starry"])
        try #require(r.status == 0, "exit \(r.status)\n\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("wrote \(onnxURL.path)"), "\(r.stdout)")
        let onnxSize = (try? FileManager.default.attributesOfItem(atPath: onnxURL.path)[.size] as? Int) ?? 0
        #expect(onnxSize > 10_000, "the ONNX file holds the weights (\(onnxSize) bytes)")
        let data = try Data(contentsOf: dir.appendingPathComponent("styles/starry.json"))
        let manifest = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(Set(manifest.keys) == ["schema_version", "name", "model", "input", "crop", "decoder", "labels", "licence", "provenance"])
        #expect(manifest["schema_version"] as? Int == 1)
        #expect(manifest["name"] as? String == "starry")
        #expect(manifest["model"] as? String == "starry.onnx")
        #expect(manifest["crop"] as? String == "stretch")
        #expect((manifest["labels"] as? [Any])?.isEmpty == true)
        #expect(manifest["licence"] as? String == "CC0-1.0 (test model)")
        #expect((manifest["provenance"] as? String)?.hasPrefix("converted by streamlens import from style.mlmodel (sha256 ") == true)
        let input = try #require(manifest["input"] as? [String: Any])
        #expect(input["width"] as? Int == 40)
        #expect(input["height"] as? Int == 32)
        #expect(input["color_order"] as? String == "RGB")
        #expect(Self.numbers(input["value_range"]) == [0, 1])
        #expect(input["layout"] as? String == "NCHW")
        #expect(input["name"] as? String == "image")
        let decoder = try #require(manifest["decoder"] as? [String: Any])
        #expect(decoder["name"] as? String == "image")
        let parameters = try #require(decoder["parameters"] as? [String: Any])
        #expect(parameters["color_order"] as? String == "RGB")
        #expect(Self.numbers(parameters["value_range"]) == [0, 255])
        #expect(parameters["layout"] as? String == "NCHW")
        // The imported model runs in the stage: every frame out, the picture changed.
        let (w, h) = (80, 64)
        let (original, _) = try StylizeTests.frames(StylizeTests.photo(width: w, height: h, count: 1), nil, width: w, height: h)
        let (styled, run) = try StylizeTests.frames(StylizeTests.photo(width: w, height: h, count: 3),
                                                    "lensstylize model=\(dir.appendingPathComponent("styles/starry.json").path)", width: w, height: h)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(styled.count == 3 && original.count == 1)
        if let a = original.first, let b = styled.first { #expect(StylizeTests.meanAbsoluteDifference(a, b) > 10) }
    }

    /// Run from elsewhere, the command finds the checkout above its own executable.
    @Test func findsTheProjectFromAnotherDirectory() throws {
        let dir = try Self.makeModels()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try Self.spawn(CLI.binary.path, ["import", "style.mlmodel"], in: dir)
        #expect(r.status == 0, "exit \(r.status)\n\(r.stdout)\n\(r.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("style.onnx").path))
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("style.json").path))
        let usage = try CLI.run(["import"])
        #expect(usage.status == 2)
        #expect(usage.stderr.contains("streamlens import MODEL.mlmodel"), "\(usage.stderr)")
    }
}
