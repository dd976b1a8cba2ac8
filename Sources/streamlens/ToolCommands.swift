import Foundation
import StreamLensCore

/// `streamlens import MODEL.mlmodel [-o OUT.onnx] [--name NAME]`: a Core ML NeuralNetwork
/// image-to-image model (Create ML's style transfer) to ONNX plus a model manifest.
///
/// The conversion is Python, `tools/coreml_import.py`, on coremltools' spec classes and onnx
/// from `.deps/python` (installed by tools/setup.sh): this finds the project, runs the script
/// with that PYTHONPATH and the interpreter set-up used (`$PYTHON`, else python3), lets its
/// output through and returns its exit code (0 written, 1 not convertible, 2 bad arguments).
func importCommand(_ args: [String]) -> Int32 {
    if args.isEmpty {
        writeStandardError("streamlens: import needs a model: streamlens import MODEL.mlmodel [-o OUT.onnx] [--name NAME]\n")
        return 2
    }
    guard let root = checkoutRoot(holding: "tools/coreml_import.py") else {
        writeStandardError("""
            streamlens: import: cannot find tools/coreml_import.py above the streamlens executable or in \
            the current directory; run it from the StreamLens checkout\n
            """)
        return 1
    }
    let packages = root.appendingPathComponent(".deps/python")
    guard FileManager.default.fileExists(atPath: packages.appendingPathComponent("coremltools").path) else {
        writeStandardError("""
            streamlens: import needs coremltools and onnx in \(packages.path): run tools/setup.sh (make setup) first\n
            """)
        return 1
    }
    var environment = ProcessInfo.processInfo.environment
    environment["PYTHONPATH"] = [packages.path, environment["PYTHONPATH"]].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ":")
    return runTool("import", URL(fileURLWithPath: "/usr/bin/env"),
                   [environment["PYTHON"] ?? "python3", root.appendingPathComponent("tools/coreml_import.py").path] + args,
                   environment: environment)
}

/// Runs one of the checkout's tools with its standard input, output and error inherited (the
/// tool talks to the user directly) and returns its exit code (128 + N for a signal).
func runTool(_ command: String, _ executable: URL, _ args: [String], environment: [String: String]? = nil) -> Int32 {
    let process = Process()
    process.executableURL = executable
    process.arguments = args
    if let environment { process.environment = environment }
    do {
        try process.run()
    } catch {
        writeStandardError("streamlens: \(command): cannot start \(executable.path): \(error)\n")
        return 1
    }
    process.waitUntilExit()
    if process.terminationReason == .uncaughtSignal { return 128 + process.terminationStatus }
    return process.terminationStatus
}

/// `streamlens train-style STYLE_IMAGE --out PATH …`: trains a feed-forward style network
/// (tools/train-style, Python in its own environment, made on first use). Arguments, output and
/// exit code pass through.
func trainStyleCommand(_ args: [String]) -> Int32 {
    guard let root = checkoutRoot(holding: "tools/train-style") else {
        writeStandardError("""
            streamlens: train-style: cannot find tools/train-style above the streamlens executable or in the \
            current directory; run it from the StreamLens checkout\n
            """)
        return 1
    }
    return runTool("train-style", root.appendingPathComponent("tools/train-style"), args)
}

/// `streamlens models list | fetch NAME…|all [--from DIR|URL] | verify [NAME…] | path [NAME]`:
/// third-party model files from the catalogue (Models/model-catalogue.json), downloaded, checked
/// against their sha256 and installed into the model store (`ModelStore`). The work is
/// tools/models.py (Python's standard library only, so set-up can run it before anything is
/// built); arguments, output and exit code pass through.
func modelsCommand(_ args: [String]) -> Int32 {
    guard let root = checkoutRoot(holding: "tools/models.py") else {
        writeStandardError("""
            streamlens: models: cannot find tools/models.py above the streamlens executable or in the \
            current directory; run it from the StreamLens checkout\n
            """)
        return 1
    }
    let python = ProcessInfo.processInfo.environment["PYTHON"] ?? "python3"
    return runTool("models", URL(fileURLWithPath: "/usr/bin/env"), [python, root.appendingPathComponent("tools/models.py").path] + args)
}

/// The StreamLens checkout holding `script`: the nearest directory above the running executable
/// that has it (`.build/debug/streamlens` lives inside the checkout), else the current directory
/// if it has it. The executable's own checkout comes first: a script of that name in whatever
/// folder the user happens to be in must not run in its place.
func checkoutRoot(holding script: String) -> URL? {
    let fm = FileManager.default
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    var dir = executable.deletingLastPathComponent()
    while dir.path != "/" && !dir.path.isEmpty {
        if fm.fileExists(atPath: dir.appendingPathComponent(script).path) { return dir }
        dir = dir.deletingLastPathComponent()
    }
    let cwd = URL(fileURLWithPath: fm.currentDirectoryPath)
    if fm.fileExists(atPath: cwd.appendingPathComponent(script).path) { return cwd }
    return nil
}
