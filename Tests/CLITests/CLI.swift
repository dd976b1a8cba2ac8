import Foundation
import StreamLensCore

/// Spawns the built `streamlens` binary (the one `swift test` built beside this test bundle,
/// or $STREAMLENS_BIN) and collects what it printed and how it exited.
struct CLI {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        var timedOut: Bool
    }

    /// How many times slower than usual the build under test runs: 1, or what tools/sanitize.sh
    /// sets for sanitizer builds (model loads take seconds there). Tests whose stream must
    /// outlast something that takes real time (a background model load) scale by it.
    static let slowdown: Double = ProcessInfo.processInfo.environment["STREAMLENS_TEST_SLOWDOWN"].flatMap(Double.init) ?? 1

    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// A file of a catalogue model (Models/model-catalogue.json) where `streamlens models fetch`
    /// installs it: the model store of this environment (ModelStore), as the spawned CLI sees it.
    static func installedModel(_ model: String, _ file: String) -> String {
        URL(fileURLWithPath: ModelStore.directory()).appendingPathComponent(model).appendingPathComponent(file).path
    }

    static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["STREAMLENS_BIN"] { return URL(fileURLWithPath: path) }
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // Swift Testing on Linux runs the .xctest file itself; XCTest may run from inside a bundle.
        if dir.pathExtension == "xctest" { dir = dir.deletingLastPathComponent() }
        return dir.appendingPathComponent("streamlens")
    }

    /// Runs `streamlens args…` from the package root. `signals` are sent at the given seconds
    /// after start (SIGINT tests). The process is killed after `timeout` seconds, times `slowdown`
    /// (a sanitizer build: the ASan pass of make test killed a 1024x512 detection at 60 s in CI).
    /// `input` lines are written to its standard input at the given seconds after start (the
    /// control channel's `--control -`); without them stdin is /dev/null.
    /// With `inputClock`, the input lines' times count from when stderr first shows that text
    /// (e.g. a stage's caps line with -v: frames are flowing), not from the start: a slow start
    /// (a loaded machine, a sanitizer build) then does not move a command past the stream's end.
    static func run(_ args: [String], timeout: Double = 60, signals: [(after: Double, signal: Int32)] = [],
                    input: [(after: Double, line: String)] = [], inputClock: String? = nil, executable: String = "streamlens") throws -> Result {
        try spawn(binary.deletingLastPathComponent().appendingPathComponent(executable), args, timeout: timeout, signals: signals,
                  input: input, inputClock: inputClock)
    }

    /// Runs any program (`run` for ours) and collects what it printed and how it exited.
    static func spawn(_ executable: URL, _ args: [String], environment: [String: String]? = nil, in directory: URL = packageRoot,
                      timeout: Double = 60, signals: [(after: Double, signal: Int32)] = [],
                      input: [(after: Double, line: String)] = [], inputClock: String? = nil) throws -> Result {
        // Output goes to files, not pipes: a pipe's reader waits for every process that inherited
        // its write end (other tests' children too), a file does not.
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let outURL = dir.appendingPathComponent("stdout"), errURL = dir.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let out = try FileHandle(forWritingTo: outURL), err = try FileHandle(forWritingTo: errURL)
        defer { try? out.close(); try? err.close() }
        let process = Process()
        process.executableURL = executable
        process.arguments = args
        if let environment { process.environment = environment }
        process.currentDirectoryURL = directory
        process.standardOutput = out
        process.standardError = err
        let stdin = input.isEmpty ? nil : Pipe()
        process.standardInput = stdin ?? FileHandle.nullDevice
        try process.run()
        let start = Date()
        var pending = signals
        var lines = input
        var timedOut = false
        var inputStart: Date? = inputClock == nil ? start : nil
        while process.isRunning {
            let t = Date().timeIntervalSince(start)
            if inputStart == nil, let inputClock, let text = try? String(contentsOf: errURL, encoding: .utf8), text.contains(inputClock) {
                inputStart = Date()
            }
            if let inputStart, let next = lines.first, Date().timeIntervalSince(inputStart) >= next.after {
                stdin?.fileHandleForWriting.write(Data((next.line + "\n").utf8))
                lines.removeFirst()
            }
            if let next = pending.first, t >= next.after {
                kill(process.processIdentifier, next.signal)
                pending.removeFirst()
            }
            if t > timeout * slowdown {
                timedOut = true
                kill(process.processIdentifier, SIGKILL)
                break
            }
            usleep(20_000)
        }
        process.waitUntilExit()
        try? stdin?.fileHandleForWriting.close()
        let stdout = String(decoding: (try? Data(contentsOf: outURL)) ?? Data(), as: UTF8.self)
        let stderr = String(decoding: (try? Data(contentsOf: errURL)) ?? Data(), as: UTF8.self)
        return Result(status: process.terminationStatus, stdout: stdout, stderr: stderr, timedOut: timedOut)
    }
}
/// Frames in the first video stream of a media file, counted by decoding it (ffprobe).
func countFrames(_ path: String) -> Int? {
    ffprobe(["-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
        .flatMap { Int($0.output.trimmingCharacters(in: .whitespacesAndNewlines)) }
}

/// Codec, frame rate and duration of each stream (ffprobe).
func probeStreams(_ path: String) -> [(codec: String, rate: String, duration: Double)] {
    guard let text = ffprobe(["-show_entries", "stream=codec_name,r_frame_rate,duration", "-of", "csv=p=0", path])?.output else { return [] }
    return text.split(separator: "\n").compactMap { line in
        let f = line.split(separator: ",").map(String.init)
        guard f.count == 3, let d = Double(f[2]) else { return nil }
        return (f[0], f[1], d)
    }
}

/// `ffprobe -v error ARGUMENTS…`: its exit status and standard output (nil: it could not run).
func ffprobe(_ arguments: [String]) -> (status: Int32, output: String)? {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/ffprobe")
    p.arguments = ["-v", "error"] + arguments
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    guard (try? p.run()) != nil else { return nil }
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

func scratchDirectory() throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-cli-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

/// Numbers from a stage summary line such as
/// "pass: 20 frames in, 20 out, 40 dropped, frame age p50 1.0 ms p95 2.0 ms max 3 ms (live)".
struct StageSummary {
    var framesIn = 0, framesOut = 0, dropped = 0
    var p95Milliseconds: Double?
    var maxMilliseconds: Double?
    var mode = ""

    init?(line: String) {
        let words = line.replacingOccurrences(of: ",", with: "").split(separator: " ").map(String.init)
        func number(before word: String, after anchor: String? = nil) -> Double? {
            var start = 0
            if let anchor, let a = words.firstIndex(of: anchor) { start = a }
            guard let i = words[start...].firstIndex(of: word), i > 0 else { return nil }
            return Double(words[i - 1])
        }
        func number(after word: String) -> Double? {
            guard let i = words.firstIndex(of: word), i + 1 < words.count else { return nil }
            return Double(words[i + 1])
        }
        guard let fin = number(before: "frames"), let fout = number(before: "out"), let d = number(before: "dropped") else { return nil }
        framesIn = Int(fin); framesOut = Int(fout); dropped = Int(d)
        p95Milliseconds = number(after: "p95")
        maxMilliseconds = number(after: "max")
        mode = words.last?.trimmingCharacters(in: CharacterSet(charactersIn: "()")) ?? ""
    }
}
