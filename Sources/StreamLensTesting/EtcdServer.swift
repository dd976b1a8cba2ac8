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
    public let server: ServerProcess
    public var directory: URL { server.directory }

    /// `http://127.0.0.1:PORT`, what `cluster: etcd:` takes.
    public var endpoint: String { "http://127.0.0.1:\(clientPort)" }

    public init() throws {
        clientPort = freeLoopbackPort()
        var peer = freeLoopbackPort()
        while peer == clientPort { peer = freeLoopbackPort() }
        peerPort = peer
        server = try ServerProcess(executable: Self.executable, name: "etcd")
    }

    /// Starts etcd and waits (at most `timeout` s) until its client port answers; false if not.
    @discardableResult
    public func start(timeout: Double = 30) throws -> Bool {
        let client = "http://127.0.0.1:\(clientPort)", peer = "http://127.0.0.1:\(peerPort)"
        return try server.start(["--name", "test", "--data-dir", directory.appendingPathComponent("data").path,
                                 "--listen-client-urls", client, "--advertise-client-urls", client,
                                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "test=\(peer)"],
                                port: clientPort, timeout: timeout)
    }

    /// What etcd printed (its log).
    public var log: String { server.log }

    /// Stops etcd (SIGTERM, then SIGKILL after 10 s) and waits for it.
    public func stop() { server.stop() }

    /// Kills etcd at once.
    public func kill() { server.kill() }
}
