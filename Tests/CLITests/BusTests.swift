import Foundation
import StreamLensBuses
import StreamLensTesting
import Testing

private var busClientsAvailable: Bool { FileManager.default.isExecutableFile(atPath: BusTests.python.path) }

/// lensmetadata location=nats:// and kafka://: Debian's nats-server with JetStream, and
/// librdkafka's own mock cluster, on loopback, the built CLI, and what arrived read back with
/// the buses' own Python clients (nats-py, confluent-kafka: Tests/Python/bus_client.py).
/// At least once through an outage: every record arrives, `seq` without a gap.
@Suite(.serialized, .enabled(if: NATSServer.available && busClientsAvailable, "needs nats-server and .deps/bus-venv: run tools/setup.sh"))
struct BusTests {
    static let python = CLI.packageRoot.appendingPathComponent(".deps/bus-venv/bin/python")
    static let script = CLI.packageRoot.appendingPathComponent("Tests/Python/bus_client.py").path

    /// A live test source at 20 fps.
    static func source(_ frames: Int) -> String {
        "videotestsrc is-live=true num-buffers=\(frames) ! video/x-raw,format=BGRx,width=160,height=120,framerate=20/1"
    }

    static func client(_ args: [String], timeout: Double = 60) throws -> [[String: Any]] {
        let r = try CLI.spawn(python, [script] + args, timeout: timeout)
        try #require(r.status == 0, "bus_client.py \(args.joined(separator: " ")): \(r.stderr)")
        return r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    static func summary(_ stderr: String) -> String {
        stderr.split(separator: "\n").last { $0.hasPrefix("lensmetadata0:") && $0.contains(" frames in") }.map(String.init) ?? ""
    }

    /// The records' `seq`, sorted, and how many arrived more than once.
    static func sequence(_ messages: [[String: Any]]) -> (seqs: [Int], repeats: Int) {
        let all = messages.compactMap { ($0["record"] as? [String: Any])?["seq"] as? Int }
        let unique = Array(Set(all)).sorted()
        return (unique, all.count - unique.count)
    }

    /// nats-server stopped once 20 records are acknowledged, in a ten-second run, and started
    /// again a second after /metrics shows it away: the run goes on at 20 fps, ends normally, and
    /// the stream holds all 200 records once, `seq` 1…200, each with its message id, the frames
    /// in order.
    @Test func natsServerStoppedAndStartedAgainMidStream() throws {
        let nats = try NATSServer()
        try #require(try nats.start(), "nats-server did not start: \(nats.log.suffix(400))")
        _ = try Self.client(["nats-stream", "\(nats.port)", "STREAMLENS", "streamlens.>"])
        let spool = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: spool) }
        let metrics = freeLoopbackPort()
        let run = try Background.streamlens(["run", "-v", "--metrics", "127.0.0.1:\(metrics)", "\(Self.source(200)) ! lensmetadata location=nats://127.0.0.1:\(nats.port)/streamlens.cam1 source=cam1 spool=\(spool.path) max-queued=20 ! fakesink sync=true"])
        try #require(run.waitFor("lensmetadata0: video/x-raw", timeout: 30), "\(run.stderr)")
        let connected = "streamlens_nats_connected{stage=\"lensmetadata0\"}", acknowledged = "streamlens_nats_records_acknowledged_total{stage=\"lensmetadata0\"}"
        try #require(MetricsEndpointTests.scrape(metrics, until: { $0[acknowledged] ?? 0 >= 20 }, timeout: 30)?[connected] == 1, "\(run.stderr)")
        nats.stop()
        // The outage as /metrics shows it (promtool reads the page), then the server back.
        let away = try #require(MetricsEndpointTests.scrape(metrics, until: { $0[connected] == 0 }, timeout: 30))
        #expect(away[connected] == 0 && away["streamlens_nats_records_unacknowledged{stage=\"lensmetadata0\"}"] != nil, "\(away.text)")
        #expect(try MetricsEndpointTests.promtoolCheck(away.text).status == 0)
        Thread.sleep(forTimeInterval: 1)
        try #require(try nats.start(), "nats-server did not start again: \(nats.log.suffix(400))")
        #expect(MetricsEndpointTests.scrape(metrics, until: { $0[connected] == 1 }, timeout: 30)?[connected] == 1, "not connected again: \(run.stderr)")
        #expect(run.waitForExit(timeout: 60))
        let (status, stderr, timedOut) = run.stop()
        #expect(status == 0 && !timedOut, "\(stderr)")
        let summary = Self.summary(stderr)
        #expect(summary.hasPrefix("lensmetadata0: 200 frames in, 200 out"), "\(stderr)")
        #expect(summary.contains("200 acknowledged") && summary.contains("reconnect"), "\(summary)")
        let messages = try Self.client(["nats-read", "\(nats.port)", "streamlens.>"])
        let (seqs, _) = Self.sequence(messages)
        #expect(seqs == Array(1...200), "JetStream holds \(seqs.count) distinct records: \(seqs.prefix(5))…\(seqs.suffix(5))")
        let bySeq = Dictionary(messages.compactMap { m -> (Int, [String: Any])? in
            guard let r = m["record"] as? [String: Any], let s = r["seq"] as? Int else { return nil }
            return (s, m)
        }, uniquingKeysWith: { a, _ in a })
        #expect((1...200).allSatisfy { (bySeq[$0]?["record"] as? [String: Any])?["frame"] as? Int == $0 - 1 }, "records out of frame order")
        #expect((bySeq[1]?["record"] as? [String: Any])?["source"] as? String == "cam1")
        #expect((bySeq[7]?["id"] as? String)?.hasPrefix("cam1:") == true && (bySeq[7]?["id"] as? String)?.hasSuffix(":7") == true, "\(bySeq[7] ?? [:])")
    }

    /// No server at all during the first run: its 30 records wait in the spool (the run ends at
    /// once, saying so); the second run, with the server and its stream there, sends them before
    /// its own 20: seq 1…50, none twice in the stream. A third run on the same spool while a run
    /// holds it is refused by name.
    @Test func theSpoolCarriesRecordsAcrossARestart() throws {
        let nats = try NATSServer()
        let spool = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: spool) }
        let sink = "lensmetadata location=nats://127.0.0.1:\(nats.port)/streamlens.cam2 spool=\(spool.path)"
        let first = try CLI.run(["run", "\(Self.source(30)) ! \(sink) ! fakesink sync=true"], timeout: 60)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("30 records not acknowledged at the end, kept in the spool \(spool.path)"), "\(first.stderr)")
        #expect(Self.summary(first.stderr).contains("never connected"), "\(first.stderr)")

        try #require(try nats.start(), "nats-server did not start: \(nats.log.suffix(400))")
        _ = try Self.client(["nats-stream", "\(nats.port)", "CAMS", "streamlens.>"])
        let holder = try Background.streamlens(["run", "-v", "\(Self.source(20)) ! \(sink) ! fakesink sync=true"])
        try #require(holder.waitFor("lensmetadata0: video/x-raw", timeout: 30), "\(holder.stderr)")
        let refused = try CLI.run(["run", "\(Self.source(5)) ! \(sink) ! fakesink"], timeout: 60)
        #expect(refused.status != 0 && refused.stderr.contains("spool \(spool.path) is in use by another run"), "\(refused.stderr)")
        #expect(holder.waitForExit(timeout: 60))
        let (status, stderr, _) = holder.stop()
        #expect(status == 0, "\(stderr)")
        #expect(Self.summary(stderr).contains("50 acknowledged, 30 from the spool of an earlier run"), "\(stderr)")
        let (seqs, repeats) = Self.sequence(try Self.client(["nats-read", "\(nats.port)", "streamlens.>"]))
        #expect(seqs == Array(1...50) && repeats == 0, "\(seqs.count) records, \(repeats) repeats")
    }

    /// A subject no stream captures: said at start, the records wait (spool) and nothing is lost
    /// from the video.
    @Test func aSubjectNoStreamCapturesIsSaid() throws {
        let nats = try NATSServer()
        try #require(try nats.start(), "nats-server did not start: \(nats.log.suffix(400))")
        let r = try CLI.run(["run", "\(Self.source(20)) ! lensmetadata location=nats://127.0.0.1:\(nats.port)/nobody.listens ! fakesink sync=true"], timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("no JetStream stream captures subject nobody.listens"), "\(r.stderr)")
        #expect(Self.summary(r.stderr).hasPrefix("lensmetadata0: 20 frames in, 20 out"), "\(r.stderr)")
    }

    /// nats-server with TLS (a certificate from a CA made for the test) and a user: with
    /// `ca-file` and `credentials` every record is stored; with another CA, or a wrong
    /// password, nothing is, the run still ends normally, and the summary says why it never
    /// connected (the password in no output).
    @Test func natsOverTLSWithAUser() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let certificates = try TestCertificates(in: dir)
        let nats = try NATSServer()
        nats.options = ["--tls", "--tlscert", certificates.certificate, "--tlskey", certificates.key, "--user", "camera", "--pass", "s3cret-pass"]
        try #require(try nats.start(), "nats-server did not start: \(nats.log.suffix(400))")
        let environment = ["BUS_CA": certificates.ca, "BUS_USER": "camera", "BUS_PASSWORD": "s3cret-pass"]
        let made = try CLI.spawn(Self.python, [Self.script, "nats-stream", "\(nats.port)", "SECURE", "secure.>"], environment: environment, timeout: 60)
        try #require(made.status == 0, "\(made.stderr)")
        let good = dir.appendingPathComponent("good"), bad = dir.appendingPathComponent("bad")
        try "camera:s3cret-pass\n".write(to: good, atomically: true, encoding: .utf8)
        try "camera:wrong\n".write(to: bad, atomically: true, encoding: .utf8)
        for (ca, credentials, outcome) in [(certificates.ca, good.path, "20 acknowledged"),
                                           (certificates.otherCA, good.path, "never connected (SSL handshake error: 20:unable to get local issuer certificate"),
                                           (certificates.ca, bad.path, "never connected (Authorization Violation)")] {
            let r = try CLI.run(["run", "\(Self.source(20)) ! lensmetadata location=nats://127.0.0.1:\(nats.port)/secure.cam ca-file=\(ca) credentials=\(credentials) ! fakesink sync=true"], timeout: 60)
            #expect(r.status == 0, "\(r.stderr)")
            let summary = Self.summary(r.stderr)
            #expect(summary.hasPrefix("lensmetadata0: 20 frames in, 20 out"), "\(r.stderr)")
            #expect(summary.contains(outcome), "ca \(ca), \(credentials): \(summary)")
            #expect(!r.stderr.contains("s3cret-pass"), "the password is in the output")
        }
        let read = try CLI.spawn(Self.python, [Self.script, "nats-read", "\(nats.port)", "secure.>"], environment: environment, timeout: 60)
        #expect(read.stdout.split(separator: "\n").count == 20, "\(read.stdout.prefix(300)) \(read.stderr)")
    }

    /// A camera that moves keeps one sequence: two serve instances in a cluster (etcd), the
    /// camera's spool on storage both reach (`spool=SHARED/${NAME}`); its holder killed with -9
    /// mid-stream, the other takes the camera over, and the spool with it: the stream holds
    /// `seq` 1…N with no gap (repeats allowed: what the dead holder sent unacknowledged goes
    /// again), every record the camera's.
    @Test(.enabled(if: EtcdServer.available, "etcd-server is not installed (make setup installs it)"))
    func aCameraThatMovesKeepsOneSequenceThroughASharedSpool() throws {
        let nats = try NATSServer()
        try #require(try nats.start(), "nats-server did not start: \(nats.log.suffix(400))")
        _ = try Self.client(["nats-stream", "\(nats.port)", "CAMS", "cams.>"])
        let shared = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: shared) }
        let rig = try ClusterTests.Rig(more: "! lensmetadata location=nats://127.0.0.1:\(nats.port)/cams.${NAME} source=${NAME} spool=\(shared.path)/${NAME}")
        let sources = """
            sources:
              - name: door
                uri: file://\(rig.clip)
            """
        for i in ["a", "b"] { try rig.start(i, sources: sources) }
        let holder = try #require(rig.settle(["door"], on: "ab", timeout: 60))["door"]!
        kill(rig.instances[holder]!.pid, SIGKILL)
        let other = holder == "a" ? "b" : "a"
        try #require(rig.settle(["door"], on: other, timeout: 30) != nil, "the camera did not move: \(rig.sample(["door"]))")
        let stopped = rig.instances[other]!.stop(signal: SIGTERM, timeout: 20)
        #expect(stopped.status == 0, "\(stopped.stderr.suffix(500))")
        let messages = try Self.client(["nats-read", "\(nats.port)", "cams.>"])
        let (seqs, repeats) = Self.sequence(messages)
        #expect(seqs.count >= 40 && seqs == Array(1...(seqs.last ?? 0)), "\(seqs.count) distinct, from \(seqs.first ?? 0) to \(seqs.last ?? 0), \(repeats) repeats")
        #expect(messages.allSatisfy { ($0["record"] as? [String: Any])?["source"] as? String == "door" })
    }

    /// librdkafka's mock cluster with its one broker taken down for two seconds mid-run: every
    /// frame's record reaches the topic once (confluent-kafka reads them back), keyed by source,
    /// `seq` 1…100 in order on its partition.
    @Test func kafkaBrokerDownAndUpMidStream() throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        cluster.createTopic("streamlens", partitions: 3)
        let run = try Background.streamlens(["run", "-v", "\(Self.source(100)) ! lensmetadata location=kafka://\(cluster.bootstraps)/streamlens source=gate ! fakesink sync=true"])
        try #require(run.waitFor("lensmetadata0: video/x-raw", timeout: 30), "\(run.stderr)")
        Thread.sleep(forTimeInterval: 1.5)
        cluster.broker(1, up: false)
        Thread.sleep(forTimeInterval: 2)
        cluster.broker(1, up: true)
        #expect(run.waitForExit(timeout: 60))
        let (status, stderr, timedOut) = run.stop()
        #expect(status == 0 && !timedOut, "\(stderr)")
        #expect(Self.summary(stderr).contains("100 acknowledged") && Self.summary(stderr).contains("1 reconnect"), "the outage was seen: \(stderr)")
        let messages = try Self.client(["kafka-read", cluster.bootstraps, "streamlens", "100", "30"])
        let (seqs, repeats) = Self.sequence(messages)
        #expect(seqs == Array(1...100) && repeats == 0, "\(seqs.count) records, \(repeats) repeats")
        #expect(Set(messages.compactMap { $0["key"] as? String }) == ["gate"])
        #expect(Set(messages.compactMap { $0["partition"] as? Int }).count == 1, "one source, one partition")
        let order = messages.compactMap { ($0["record"] as? [String: Any])?["seq"] as? Int }
        #expect(order == order.sorted(), "out of order on the partition")
    }

    /// The spool's disk full (a 16 KB tmpfs; root only, as mounting needs it) while no broker
    /// answers: said once, the records wait in memory within max-queued, the run and its 400
    /// frames go on to the end, exit 0.
    @Test(.enabled(if: geteuid() == 0, "mounting a small tmpfs needs root"))
    func aFullSpoolDiskCostsRecordsNotTheRun() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let mounted = try CLI.spawn(URL(fileURLWithPath: "/bin/mount"), ["-t", "tmpfs", "-o", "size=16k", "tmpfs", dir.path], timeout: 20)
        try #require(mounted.status == 0, "mount: \(mounted.stderr)")
        defer { _ = try? CLI.spawn(URL(fileURLWithPath: "/bin/umount"), ["-l", dir.path], timeout: 20) }
        let r = try CLI.run(["run", "videotestsrc num-buffers=400 ! video/x-raw,format=BGRx,width=160,height=120 ! lensmetadata location=nats://127.0.0.1:\(freeLoopbackPort())/x spool=\(dir.path) max-queued=50 ! fakesink"], timeout: 60)
        #expect(r.status == 0 && !r.timedOut, "\(r.stderr)")
        #expect(r.stderr.components(separatedBy: "the spool cannot be written").count == 2, "said once: \(r.stderr)")
        let summary = Self.summary(r.stderr)
        #expect(summary.hasPrefix("lensmetadata0: 400 frames in, 400 out, 0 dropped"), "\(r.stderr)")
        #expect(summary.contains(" dropped (past max-queued"), "\(summary)")
    }

    /// Kafka's options reach librdkafka: every compression is read back by confluent-kafka; TLS
    /// (`ca-file`) and SASL (`credentials`) are spoken to the mock cluster's plain listener, which
    /// cannot answer them, so nothing is delivered and the run says why, ending on time.
    @Test func kafkaCompressionTLSAndSASLReachTheClient() throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let ca = try TestCertificates(in: dir).ca
        let credentials = dir.appendingPathComponent("credentials")
        try "camera:s3cret-pass\n".write(to: credentials, atomically: true, encoding: .utf8)
        for compression in ["none", "gzip", "snappy", "lz4", "zstd"] {
            let r = try CLI.run(["run", "\(Self.source(10)) ! lensmetadata location=kafka://\(cluster.bootstraps)/c-\(compression) compression=\(compression) ! fakesink sync=true"], timeout: 60)
            #expect(r.status == 0 && Self.summary(r.stderr).contains("10 acknowledged"), "\(compression): \(r.stderr)")
            let (seqs, _) = Self.sequence(try Self.client(["kafka-read", cluster.bootstraps, "c-\(compression)", "10", "30"]))
            #expect(seqs == Array(1...10), "\(compression): \(seqs)")
        }
        for (option, why) in [("ca-file=\(ca)", "ssl://"), ("credentials=\(credentials.path)", "SASL Handshake not supported by broker (required by mechanism PLAIN)")] {
            let r = try CLI.run(["run", "\(Self.source(10)) ! lensmetadata location=kafka://\(cluster.bootstraps)/secure \(option) ! fakesink sync=true"], timeout: 60)
            let summary = Self.summary(r.stderr)
            #expect(r.status == 0 && summary.contains("0 acknowledged") && summary.contains("never connected (") && summary.contains(why), "\(option): \(r.stderr)")
            #expect(!r.stderr.contains("s3cret-pass"))
        }
    }

    /// A peer that is not a broker — silent, garbage, resetting every connection — on either
    /// bus: the video runs at its own pace to the end, memory is bounded by max-queued (the
    /// oldest records dropped, counted), and the run ends within seconds, saying what happened.
    @Test(arguments: ["silent", "garbage", "reset"], ["nats", "kafka"])
    func aHostilePeerCostsRecordsNotTheRun(_ mode: String, _ bus: String) throws {
        let peer = try Background(URL(fileURLWithPath: "/usr/bin/python3"),
                                  [CLI.packageRoot.appendingPathComponent("Tests/Python/hostile_broker.py").path, mode])
        try #require(peer.waitFor("port ", in: \.stdout, timeout: 20), "peer: \(peer.stderr)")
        let port = peer.stdout.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let start = Date()
        let r = try CLI.run(["run", "\(Self.source(40)) ! lensmetadata location=\(bus)://127.0.0.1:\(port)/x max-queued=10 ! fakesink sync=true"], timeout: 60)
        let took = Date().timeIntervalSince(start)
        #expect(r.status == 0 && !r.timedOut, "\(mode) \(bus): \(r.stderr)")
        let summary = Self.summary(r.stderr)
        #expect(summary.hasPrefix("lensmetadata0: 40 frames in, 40 out, 0 dropped"), "\(mode) \(bus): \(r.stderr)")
        #expect(summary.contains("30 dropped (past max-queued"), "\(mode) \(bus): \(summary)")
        #expect(summary.contains("never connected"), "\(mode) \(bus): \(summary)")
        #expect(took < 2 + 10 + 10, "\(mode) \(bus): \(took) s")
        withExtendedLifetime(peer) {}
    }
}
