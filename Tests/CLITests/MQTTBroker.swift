import Foundation
import StreamLensTesting

/// Debian's mosquitto broker on 127.0.0.1 on a port of the test's own (set-up installs it and
/// leaves no system broker running), and `mosquitto_sub` capturing what reaches a topic filter.
/// Everything waited for is an event (the port answers, the broker acknowledges the
/// subscription, N messages arrived), each with a bound.
///
/// `configuration` adds lines to the broker's configuration (TLS, a password file, persistence),
/// `clientArguments` to every mosquitto_sub and mosquitto_pub (--cafile, -u/-P); the files they
/// name go in `directory` (`makeCertificates`, `addUser`).
final class MQTTBroker {
    static let executable = "/usr/sbin/mosquitto"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: executable) }
    /// openssl (TLS tests) and mosquitto_passwd (credentials tests).
    static var toolsAvailable: Bool {
        ["/usr/bin/openssl", "/usr/bin/mosquitto_passwd"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    let port: Int
    let directory: URL
    var configuration: [String] = []
    var clientArguments: [String] = []
    private var broker: Process?
    private var subscriber: Process?
    private var logCount = 0

    init(port: Int = freeLoopbackPort()) throws {
        self.port = port
        directory = try scratchDirectory()
    }

    /// The configuration file, written at each start. log_type all: the broker says when a
    /// subscription is acknowledged (SUBACK), which is what a test waits for before it publishes.
    /// `user`: as the test's own user (root drops to user mosquitto by default, which could not
    /// read the test's key, password file or persistence folder).
    private func writeConfiguration() throws {
        let user = getpwuid(geteuid()).map { String(cString: $0.pointee.pw_name) } ?? "mosquitto"
        let lines = ["listener \(port) 127.0.0.1", "log_dest stderr", "log_type all", "user \(user)"]
            + (configuration.contains { $0.hasPrefix("allow_anonymous") } ? [] : ["allow_anonymous true"]) + configuration
        try (lines.joined(separator: "\n") + "\n").write(to: directory.appendingPathComponent("mosquitto.conf"), atomically: true, encoding: .utf8)
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// The test certificates (`TestCertificates`), made in `directory`.
    typealias Certificates = TestCertificates
    func makeCertificates() throws -> Certificates { try TestCertificates(in: directory) }

    /// Adds a user to the password file `passwords` (mosquitto_passwd -b; -c the first time).
    func addUser(_ user: String, password: String) throws {
        let file = path("passwords")
        try tool("/usr/bin/mosquitto_passwd", ["-b"] + (FileManager.default.fileExists(atPath: file) ? [] : ["-c"]) + [file, user, password])
    }

    /// Runs a tool in `directory` to its end (bounded); throws with its output when it fails.
    private func tool(_ path: String, _ args: [String], timeout: Double = 30) throws {
        let p = try spawn(path, args, log: "tool.log")
        let deadline = Date().addingTimeInterval(timeout)
        while p.isRunning, Date() < deadline { usleep(10_000) }
        if p.isRunning { Self.end(p, SIGKILL) }
        guard !p.isRunning, p.terminationStatus == 0 else {
            throw BrokerError("\(path) \(args.joined(separator: " ")) failed: \(read("tool.log"))")
        }
    }

    deinit {
        for p in [subscriber, broker].compactMap({ $0 }) where p.isRunning { Self.end(p, SIGKILL) }
        try? FileManager.default.removeItem(at: directory)
    }

    private func spawn(_ path: String, _ args: [String], log: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        let url = directory.appendingPathComponent(log)
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        let handle = try FileHandle(forWritingTo: url)
        p.standardOutput = handle
        p.standardError = handle
        p.standardInput = FileHandle.nullDevice
        p.currentDirectoryURL = directory
        try p.run()
        try? handle.close()
        return p
    }

    private func read(_ name: String) -> String {
        String(decoding: (try? Data(contentsOf: directory.appendingPathComponent(name))) ?? Data(), as: UTF8.self)
    }

    /// Starts the broker (again, after `kill`) and waits until its port accepts a connection.
    func start(timeout: Double = 10) throws {
        try writeConfiguration()
        logCount += 1
        broker = try spawn(Self.executable, ["-c", directory.appendingPathComponent("mosquitto.conf").path], log: "broker\(logCount).log")
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if Self.answers(port) { return }
            if broker?.isRunning == false { break }
            usleep(20_000)
        }
        throw BrokerError("mosquitto did not answer on 127.0.0.1:\(port): \(read("broker\(logCount).log"))")
    }

    /// SIGKILL: the broker vanishes without a word, as a crashed or unplugged one does.
    func kill() {
        guard let broker, broker.isRunning else { return }
        Self.end(broker, SIGKILL)
    }

    /// Sends `signal` and waits (bounded) until the process is gone. Polls `isRunning`:
    /// Process.waitUntilExit right after a kill hung here (in sigsuspend) on Linux.
    private static func end(_ p: Process, _ signal: Int32) {
        Glibc.kill(p.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(10)
        while p.isRunning, Date() < deadline { usleep(20_000) }
        if p.isRunning { Glibc.kill(p.processIdentifier, SIGKILL) }
        // Gone: returns at once, and lets go of the run-loop source that holds the Process (see
        // Background's deinit).
        else { p.waitUntilExit() }
    }

    /// `mosquitto_sub -t filter -v` into a fresh file (messages are "topic payload" lines);
    /// returns when the broker has acknowledged the subscription. `extra`: more arguments for
    /// this subscriber only (e.g. a persistent session's -i ID -c -q 1).
    func subscribe(_ filter: String = "streamlens/#", extra: [String] = [], timeout: Double = 10) throws {
        if let subscriber, subscriber.isRunning { Self.end(subscriber, SIGKILL) }
        let before = read("broker\(logCount).log").components(separatedBy: "Sending SUBACK").count
        subscriber = try spawn("/usr/bin/mosquitto_sub", ["-h", "127.0.0.1", "-p", String(port), "-t", filter, "-v"] + clientArguments + extra,
                               log: "messages\(logCount).txt")
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if read("broker\(logCount).log").components(separatedBy: "Sending SUBACK").count > before { return }
            usleep(20_000)
        }
        throw BrokerError("mosquitto_sub's subscription was not acknowledged: \(read("broker\(logCount).log").suffix(400))")
    }

    /// Publishes one message with mosquitto_pub (to its end, bounded): a sentinel that shows the
    /// subscriber is there, so that "nothing else arrived" means something.
    func publish(_ payload: String, topic: String = "streamlens/test") throws {
        try tool("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", String(port), "-t", topic, "-m", payload] + clientArguments)
    }

    /// The broker's log since its last start.
    var log: String { read("broker\(logCount).log") }

    /// Stops the subscriber (its file stays). SIGKILL: mosquitto_sub whose broker is gone sat
    /// through SIGTERM here.
    func unsubscribe() {
        guard let subscriber, subscriber.isRunning else { return }
        Self.end(subscriber, SIGKILL)
    }

    /// The JSON payloads the current subscriber received on `topic`, in arrival order.
    func messages(topic: String = "streamlens/test") -> [[String: Any]] {
        read("messages\(logCount).txt").split(separator: "\n").compactMap { line in
            guard line.hasPrefix(topic + " ") else { return nil }
            let json = line.dropFirst(topic.count + 1)
            return (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any]
        }
    }

    /// Waits until the current subscriber has `count` messages (false after `timeout`).
    func waitForMessages(_ count: Int, timeout: Double = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if messages().count >= count { return true }
            usleep(50_000)
        }
        return messages().count >= count
    }

    static func answers(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

struct BrokerError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
