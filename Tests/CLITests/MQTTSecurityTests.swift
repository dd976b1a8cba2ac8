import Foundation
import Testing

/// lensmetadata location=mqtts:// and credentials: a real mosquitto with a TLS listener (a CA
/// and a server certificate made with openssl for the test) or a password file (made with
/// mosquitto_passwd), a real subscriber, the built CLI. In MQTTTests' suite, so serialized with
/// its tests: run beside them, the extra processes made its live broker-restart test drop
/// frames on a loaded two-core machine.
extension MQTTTests {
    static let tools = ConditionTrait.enabled(if: MQTTBroker.toolsAvailable, "needs openssl and mosquitto_passwd: run tools/setup.sh")

    static func summaryLine(_ stderr: String) -> String { summary(of: stderr) ?? "" }

    /// A broker whose only listener speaks TLS, with a certificate for 127.0.0.1 signed by the
    /// test's CA; its subscriber checks the broker against that CA too.
    static func tlsBroker() throws -> (MQTTBroker, MQTTBroker.Certificates) {
        let broker = try MQTTBroker()
        let certificates = try broker.makeCertificates()
        broker.configuration = ["cafile \(certificates.ca)", "certfile \(certificates.certificate)", "keyfile \(certificates.key)"]
        broker.clientArguments = ["--cafile", certificates.ca]
        try broker.start()
        try broker.subscribe()
        return (broker, certificates)
    }

    /// What the subscriber got besides a sentinel published after the run: the sentinel's
    /// arrival shows the subscriber was listening all along, so an empty answer means nothing
    /// reached it.
    static func messagesBeforeSentinel(_ broker: MQTTBroker) throws -> [[String: Any]] {
        try broker.publish("{\"sentinel\":1}")
        try #require(broker.waitForMessages(1, timeout: 10), "the sentinel did not arrive")
        let all = broker.messages()
        #expect(all.last?["sentinel"] as? Int == 1, "\(all)")
        return all.filter { $0["sentinel"] == nil }
    }

    /// mqtts:// with ca-file= the broker's CA: every frame's message arrives, in order. 30
    /// frames of videotestsrc take a few milliseconds: the run also waits for the TLS handshake
    /// and the broker's CONNACK at the end instead of dropping everything.
    @Test(tools) func tlsEveryFrameArrives() throws {
        let (broker, certificates) = try Self.tlsBroker()
        let r = try CLI.run(["run", "videotestsrc num-buffers=30 ! lensmetadata location=mqtts://127.0.0.1:\(broker.port)/streamlens/test ca-file=\(certificates.ca) ! fakesink"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Self.summaryLine(r.stderr).contains("mqtts://127.0.0.1:\(broker.port)/streamlens/test: 30 sent, 0 dropped, 0 reconnects"), "\(r.stderr)")
        #expect(broker.waitForMessages(30, timeout: 10), "\(broker.messages().count) messages")
        #expect(broker.messages().compactMap { $0["frame"] as? Int } == Array(0..<30))
    }

    /// A CA that did not sign the broker's certificate, or a certificate for another host name:
    /// the run goes to its end (exit 0), the summary names the TLS failure, and nothing reaches
    /// the subscriber.
    @Test(tools, arguments: [("wrong CA", "127.0.0.1", "TLS: certificate verify failed, the broker's certificate checked against ca-file "),
                      ("another host", "localhost", "TLS: host name verification failed, the broker's certificate is not for localhost")])
    func tlsVerificationFails(_ name: String, host: String, why: String) throws {
        let (broker, certificates) = try Self.tlsBroker()
        let ca = name == "wrong CA" ? certificates.otherCA : certificates.ca
        let r = try CLI.run(["run", "videotestsrc num-buffers=30 ! lensmetadata location=mqtts://\(host):\(broker.port)/streamlens/test ca-file=\(ca) ! fakesink"])
        #expect(r.status == 0 && !r.timedOut, "\(r.stderr)")
        let summary = Self.summaryLine(r.stderr)
        #expect(summary.contains(": 0 sent, 30 dropped: never connected to the broker (\(why)"), "\(r.stderr)")
        if name == "wrong CA" { #expect(summary.contains(ca), "\(summary)") }
        #expect(try Self.messagesBeforeSentinel(broker).isEmpty)
    }

    /// A broker that wants a user and password (allow_anonymous false, a mosquitto_passwd file).
    static func passwordBroker(password: String) throws -> MQTTBroker {
        let broker = try MQTTBroker()
        try broker.addUser("camera", password: password)
        try broker.addUser("viewer", password: "viewer-pw")
        broker.configuration = ["allow_anonymous false", "password_file \(broker.path("passwords"))"]
        broker.clientArguments = ["-u", "viewer", "-P", "viewer-pw"]
        try broker.start()
        try broker.subscribe()
        return broker
    }

    static func expectNoPassword(_ password: String, in r: CLI.Result) {
        #expect(!r.stderr.contains(password) && !r.stdout.contains(password), "the password is in the run's output: \(r.stderr)\(r.stdout)")
    }

    /// credentials=FILE, then the same user and password from STREAMLENS_MQTT_USER and
    /// STREAMLENS_MQTT_PASSWORD: each run's 30 messages arrive; the password is in no output
    /// (-v: the pipeline and every stage's caps are printed too).
    @Test(tools) func credentialsFromFileAndEnvironment() throws {
        let password = "pw-\(UUID().uuidString.prefix(8))"
        let broker = try Self.passwordBroker(password: password)
        let file = broker.path("camera.credentials")
        try "camera:\(password)\n".write(toFile: file, atomically: true, encoding: .utf8)
        let url = "mqtt://127.0.0.1:\(broker.port)/streamlens/test"

        let fromFile = try CLI.run(["run", "-v", "videotestsrc num-buffers=30 ! lensmetadata location=\(url) credentials=\(file) ! fakesink"])
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        #expect(Self.summaryLine(fromFile.stderr).contains("\(url): 30 sent, 0 dropped, 0 reconnects"), "\(fromFile.stderr)")
        Self.expectNoPassword(password, in: fromFile)
        #expect(broker.waitForMessages(30, timeout: 10))

        var environment = ProcessInfo.processInfo.environment
        environment["STREAMLENS_MQTT_USER"] = "camera"
        environment["STREAMLENS_MQTT_PASSWORD"] = password
        let fromEnvironment = try CLI.spawn(CLI.binary, ["run", "-v", "videotestsrc num-buffers=30 ! lensmetadata location=\(url) ! fakesink"],
                                            environment: environment)
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.stderr)")
        #expect(Self.summaryLine(fromEnvironment.stderr).contains("\(url): 30 sent, 0 dropped, 0 reconnects"), "\(fromEnvironment.stderr)")
        Self.expectNoPassword(password, in: fromEnvironment)
        #expect(broker.waitForMessages(60, timeout: 10))
        #expect(broker.messages().compactMap { $0["frame"] as? Int } == Array(0..<30) + Array(0..<30))
    }

    /// A wrong password (from a file, then from the environment), or none at all: no crash, the
    /// run goes to its end, the summary says the broker refused (CONNACK "not authorised"),
    /// nothing reaches the subscriber, and the password given is in no output.
    @Test(tools) func refusedCredentials() throws {
        let broker = try Self.passwordBroker(password: "the-right-one")
        let wrong = "wrong-\(UUID().uuidString.prefix(8))"
        let file = broker.path("wrong.credentials")
        try "camera:\(wrong)\n".write(toFile: file, atomically: true, encoding: .utf8)
        let url = "mqtt://127.0.0.1:\(broker.port)/streamlens/test"
        var environment = ProcessInfo.processInfo.environment
        environment["STREAMLENS_MQTT_USER"] = "camera"
        environment["STREAMLENS_MQTT_PASSWORD"] = wrong
        var bare = ProcessInfo.processInfo.environment
        bare["STREAMLENS_MQTT_USER"] = nil
        bare["STREAMLENS_MQTT_PASSWORD"] = nil
        let runs: [(String, [String: String], String)] = [
            ("credentials=\(file)", bare, "the broker refused the credentials of user camera: not authorised)"),
            ("", environment, "the broker refused the credentials of user camera: not authorised)"),
            ("", bare, "the broker refused the connection: not authorised (no credentials given: set credentials= or STREAMLENS_MQTT_USER and STREAMLENS_MQTT_PASSWORD))"),
        ]
        for (property, environment, why) in runs {
            let r = try CLI.spawn(CLI.binary, ["run", "-v", "videotestsrc num-buffers=30 ! lensmetadata location=\(url) \(property) ! fakesink"],
                                  environment: environment)
            #expect(r.status == 0 && !r.timedOut, "\(r.stderr)")
            #expect(Self.summaryLine(r.stderr).contains("\(url): 0 sent, 30 dropped: never connected to the broker (\(why)"), "\(r.stderr)")
            Self.expectNoPassword(wrong, in: r)
        }
        #expect(broker.log.contains("not authorised"), "the broker did not refuse: \(broker.log.suffix(400))")
        #expect(try Self.messagesBeforeSentinel(broker).isEmpty)
    }

    /// A credentials file that is missing, a folder, or not user:password, and half of the
    /// environment's pair: the run stops at start (exit 1) with one message naming the problem,
    /// before any broker is asked.
    @Test(tools) func badCredentialsStopTheStart() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let malformed = dir.appendingPathComponent("malformed").path, empty = dir.appendingPathComponent("empty").path
        try "camera-without-a-colon\n".write(toFile: malformed, atomically: true, encoding: .utf8)
        try "".write(toFile: empty, atomically: true, encoding: .utf8)
        var bare = ProcessInfo.processInfo.environment
        bare["STREAMLENS_MQTT_USER"] = nil
        bare["STREAMLENS_MQTT_PASSWORD"] = nil
        var userOnly = bare, passwordOnly = bare
        userOnly["STREAMLENS_MQTT_USER"] = "camera"
        passwordOnly["STREAMLENS_MQTT_PASSWORD"] = "s3cret-half"
        let cases: [(String, [String: String], String)] = [
            ("credentials=\(dir.path)/missing", bare, "cannot read credentials file \(dir.path)/missing (no such file)"),
            ("credentials=\(dir.path)", bare, "credentials \(dir.path) is a folder, not a file"),
            ("credentials=\(malformed)", bare, "credentials file \(malformed) must hold user:password on its first line"),
            ("credentials=\(empty)", bare, "credentials file \(empty) must hold user:password on its first line"),
            ("", userOnly, "STREAMLENS_MQTT_USER is set but STREAMLENS_MQTT_PASSWORD is not: set both, or neither"),
            ("", passwordOnly, "STREAMLENS_MQTT_PASSWORD is set but STREAMLENS_MQTT_USER is not: set both, or neither"),
        ]
        for (property, environment, message) in cases {
            let r = try CLI.spawn(CLI.binary, ["run", "videotestsrc num-buffers=3 ! lensmetadata location=mqtt://127.0.0.1:1883/streamlens/test \(property) ! fakesink"],
                                  environment: environment)
            #expect(r.status == 1, "\(property): exit \(r.status): \(r.stderr)")
            let lines = r.stderr.split(separator: "\n").map(String.init)
            #expect(lines == ["error: lensmetadata0: \(message)"], "\(property): \(r.stderr)")
            #expect(!r.stderr.contains("s3cret-half"))
        }
    }
}
