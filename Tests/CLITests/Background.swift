import Foundation

/// A process left running while the test talks to it (an RTSP server, a player), its output in
/// files. Killed when the test forgets it.
final class Background {
    let process = Process()
    let directory: URL
    private let out: FileHandle, err: FileHandle

    static func streamlens(_ args: [String], environment: [String: String]? = nil, standardInput: Pipe? = nil) throws -> Background {
        try Background(CLI.binary, args, environment: environment, standardInput: standardInput)
    }

    /// `standardInput`: a pipe the test writes to (fdsrc), else /dev/null.
    init(_ executable: URL, _ args: [String], environment: [String: String]? = nil, standardInput: Pipe? = nil) throws {
        directory = try scratchDirectory()
        let o = directory.appendingPathComponent("stdout"), e = directory.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: o.path, contents: nil)
        _ = FileManager.default.createFile(atPath: e.path, contents: nil)
        out = try FileHandle(forWritingTo: o)
        err = try FileHandle(forWritingTo: e)
        process.executableURL = executable
        process.arguments = args
        if let environment { process.environment = environment }
        process.currentDirectoryURL = CLI.packageRoot
        process.standardOutput = out
        process.standardError = err
        process.standardInput = standardInput ?? FileHandle.nullDevice
        try process.run()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        // Always, even for a process already seen gone: swift-corelibs-foundation's Process and
        // the run-loop source made by run() hold each other until waitUntilExit() lets go of the
        // source, so a Process never waited on is a cycle LeakSanitizer reports (CI's ASan pass:
        // ffmpeg in RTSPTests, which had exited on its own and was only polled).
        process.waitUntilExit()
        try? out.close(); try? err.close()
        try? FileManager.default.removeItem(at: directory)
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }
    var stdout: String { read("stdout") }
    var stderr: String { read("stderr") }
    private func read(_ name: String) -> String {
        String(decoding: (try? Data(contentsOf: directory.appendingPathComponent(name))) ?? Data(), as: UTF8.self)
    }

    /// Waits until the output holds `text` `count` times (false on timeout or exit): tests wait
    /// for what the process says it did, never for a fixed time. The bound grows with
    /// CLI.slowdown (a sanitizer build).
    func waitFor(_ text: String, count: Int = 1, in stream: KeyPath<Background, String> = \.stderr, timeout: Double = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout * CLI.slowdown)
        while Date() < deadline {
            if occurrences(of: text, in: stream) >= count { return true }
            if !process.isRunning { return occurrences(of: text, in: stream) >= count }
            usleep(50_000)
        }
        return false
    }

    /// How many times `text` appears in the output so far.
    func occurrences(of text: String, in stream: KeyPath<Background, String> = \.stderr) -> Int {
        self[keyPath: stream].components(separatedBy: text).count - 1
    }

    func waitForExit(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(50_000) }
        return !process.isRunning
    }

    /// Sends `signal`, waits for the exit (SIGKILL after `timeout`).
    func stop(signal: Int32 = SIGINT, timeout: Double = 15) -> (status: Int32, stderr: String, timedOut: Bool) {
        if process.isRunning { kill(pid, signal) }
        let timedOut = !waitForExit(timeout: timeout)
        if timedOut { kill(pid, SIGKILL) }
        process.waitUntilExit()
        return (process.terminationStatus, stderr, timedOut)
    }
}
