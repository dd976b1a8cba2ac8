import Foundation

/// A real server the tests start on loopback (etcd, nats-server): one process at a time, its
/// output in `log` in a folder of its own (removed with it), started, stopped and started again
/// on the same data and port, or killed.
public final class ServerProcess: @unchecked Sendable {
    public let executable: String
    public let directory: URL
    private var process: Process?

    public init(executable: String, name: String) throws {
        self.executable = executable
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts the server with `arguments` and waits (at most `timeout` s) until `port` answers;
    /// false if it does not, or the server exited.
    @discardableResult
    public func start(_ arguments: [String], port: Int, timeout: Double) throws -> Bool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        let log = directory.appendingPathComponent("server.log")
        if !FileManager.default.fileExists(atPath: log.path) { _ = FileManager.default.createFile(atPath: log.path, contents: nil) }
        let handle = try FileHandle(forWritingTo: log)
        handle.seekToEndOfFile()
        p.standardOutput = handle
        p.standardError = handle
        try p.run()
        process = p
        return waitUntilListening(port: port, timeout: timeout) && p.isRunning
    }

    /// What the server printed.
    public var log: String {
        String(decoding: (try? Data(contentsOf: directory.appendingPathComponent("server.log"))) ?? Data(), as: UTF8.self)
    }

    /// Stops the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
    public func stop() {
        guard let p = process else { return }
        if p.isRunning { Glibc.kill(p.processIdentifier, SIGTERM) }
        let deadline = Date().addingTimeInterval(10)
        while p.isRunning, Date() < deadline { usleep(50_000) }
        kill()
    }

    /// Kills the server at once.
    public func kill() {
        guard let p = process else { return }
        if p.isRunning { Glibc.kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        process = nil
    }
}

/// Debian's nats-server with JetStream (`-js`) on 127.0.0.1 on a port of the test's own, its
/// store in a folder of its own: a restart keeps the streams and what they hold.
public final class NATSServer: @unchecked Sendable {
    public static let executable = "/usr/sbin/nats-server"
    public static var available: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    public let port: Int
    public let server: ServerProcess
    /// More of nats-server's options (--tls…, --user, --pass), for the next start.
    public var options: [String] = []

    public init() throws {
        port = freeLoopbackPort()
        server = try ServerProcess(executable: Self.executable, name: "nats")
    }

    @discardableResult
    public func start(timeout: Double = 20) throws -> Bool {
        try server.start(["-js", "-a", "127.0.0.1", "-p", "\(port)", "-sd", server.directory.appendingPathComponent("store").path] + options,
                         port: port, timeout: timeout)
    }

    public func stop() { server.stop() }
    public func kill() { server.kill() }
    public var log: String { server.log }
}
