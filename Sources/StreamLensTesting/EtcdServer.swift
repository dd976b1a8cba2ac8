import Foundation

/// Debian's etcd (etcd-server, installed by set-up with no system etcd left running) on
/// 127.0.0.1, on ports of the test's own, its data in a folder of its own: the cluster tests'
/// coordinator. Started, stopped and started again on the same data and ports (a restart keeps
/// the keys and the leases), or killed.
public final class EtcdServer: @unchecked Sendable {
    public static let executable = "/usr/bin/etcd"
    public static var available: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    public let clientPort: Int
    public let peerPort: Int
    public let directory: URL
    private var process: Process?

    /// `http://127.0.0.1:PORT`, what `cluster: etcd:` takes.
    public var endpoint: String { "http://127.0.0.1:\(clientPort)" }

    public init() throws {
        clientPort = freeLoopbackPort()
        var peer = freeLoopbackPort()
        while peer == clientPort { peer = freeLoopbackPort() }
        peerPort = peer
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-etcd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts etcd and waits (at most `timeout` s) until its client port answers; false if not.
    @discardableResult
    public func start(timeout: Double = 30) throws -> Bool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.executable)
        let client = "http://127.0.0.1:\(clientPort)", peer = "http://127.0.0.1:\(peerPort)"
        p.arguments = ["--name", "test", "--data-dir", directory.appendingPathComponent("data").path,
                       "--listen-client-urls", client, "--advertise-client-urls", client,
                       "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "test=\(peer)"]
        let log = directory.appendingPathComponent("etcd.log")
        if !FileManager.default.fileExists(atPath: log.path) { _ = FileManager.default.createFile(atPath: log.path, contents: nil) }
        let handle = try FileHandle(forWritingTo: log)
        handle.seekToEndOfFile()
        p.standardOutput = handle
        p.standardError = handle
        try p.run()
        process = p
        return waitUntilListening(port: clientPort, timeout: timeout) && p.isRunning
    }

    /// What etcd printed (its log).
    public var log: String {
        String(decoding: (try? Data(contentsOf: directory.appendingPathComponent("etcd.log"))) ?? Data(), as: UTF8.self)
    }

    /// Stops etcd (SIGTERM, then SIGKILL after 10 s) and waits for it.
    public func stop() {
        guard let p = process else { return }
        if p.isRunning { Glibc.kill(p.processIdentifier, SIGTERM) }
        let deadline = Date().addingTimeInterval(10)
        while p.isRunning, Date() < deadline { usleep(50_000) }
        kill()
    }

    /// Kills etcd at once.
    public func kill() {
        guard let p = process else { return }
        if p.isRunning { Glibc.kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        process = nil
    }
}
