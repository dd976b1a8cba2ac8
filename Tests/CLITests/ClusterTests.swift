import Foundation
import StreamLensTesting
import Testing

/// `serve --config` with `cluster:`: three real instances of the built binary and a real etcd on
/// loopback (data in a temporary folder). Which instance runs a camera is read from the files the
/// pipelines write (each instance its own folder; a file that grew since the last look is a
/// camera running there), as an operator would, not from the API; the API is checked for what it
/// says of the cluster.
@Suite(.serialized, .enabled(if: EtcdServer.available, "etcd-server is not installed (make setup installs it)"))
struct ClusterTests {
    final class Rig {
        let etcd: EtcdServer
        let work: URL
        let clip: String
        var ports: [String: Int] = [:]
        var instances: [String: Background] = [:]
        var sizes: [String: Int] = [:]
        var extra: String
        /// Stages after the one whose file tells where a camera runs.
        let more: String

        init(extra: String = "", more: String = "") throws {
            self.more = more
            etcd = try EtcdServer()
            try #require(try etcd.start(), "etcd did not start: \(etcd.log.suffix(400))")
            work = try scratchDirectory()
            clip = work.appendingPathComponent("clip.mp4").path
            self.extra = extra
            let ffmpeg = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"), ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10",
                                                                                 "-t", "300", "-c:v", "libx264", "-preset", "ultrafast", "-g", "10", clip], timeout: 120)
            try #require(ffmpeg.status == 0, "\(ffmpeg.stderr)")
        }

        deinit { try? FileManager.default.removeItem(at: work) }

        func folder(_ i: String) -> String { work.appendingPathComponent("out-\(i)").path }
        func api(_ i: String) -> String { "http://127.0.0.1:\(ports[i]!)/api" }

        /// Starts instance `i` (its config written at each start) and waits until its API answers.
        /// `control`: a control socket for this instance (serve's `control:`).
        func start(_ i: String, sources: String = "", control: String? = nil) throws {
            try FileManager.default.createDirectory(atPath: folder(i), withIntermediateDirectories: true)
            if ports[i] == nil { ports[i] = freeLoopbackPort() }
            let config = """
                http:
                  listen: 127.0.0.1:\(ports[i]!)
                pipeline: >-
                  uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=BGRx
                  ! lensmetadata location=\(folder(i))/${NAME}.jsonl \(more.replacingOccurrences(of: "FOLDER", with: folder(i))) ! fakesink sync=true
                cluster:
                  etcd: \(etcd.endpoint)
                  instance: \(i)
                \(extra)
                \(control.map { "control: \($0)" } ?? "")
                \(sources)
                """
            let path = work.appendingPathComponent("\(i).yaml").path
            try config.write(toFile: path, atomically: true, encoding: .utf8)
            let b = try Background.streamlens(["serve", "--config", path])
            instances[i] = b
            try #require(HTTPAPITests.waitFor(api(i) + "/sources", timeout: 60, process: b), "instance \(i): \(b.stderr.suffix(600))")
        }

        /// Who runs each camera: the instances whose file for it grew since the last look.
        func sample(_ cameras: [String]) -> [String: String] {
            var who: [String: String] = [:]
            for camera in cameras {
                var runners = ""
                for i in ["a", "b", "c"] {
                    let size = (try? FileManager.default.attributesOfItem(atPath: "\(folder(i))/\(camera).jsonl")[.size] as? Int) ?? 0
                    if size != sizes[i + camera, default: 0] { runners += i }
                    sizes[i + camera] = size
                }
                who[camera] = runners
            }
            return who
        }

        /// Samples once a second until every camera runs on exactly one of `alive` in 3 samples
        /// in a row (that placement), at most `timeout` s; a camera on two instances in two
        /// samples in a row is recorded as an issue (a handover may fall inside one sample).
        func settle(_ cameras: [String], on alive: String, timeout: Double) -> [String: String]? {
            _ = sample(cameras)
            var steady = 0
            var previous: [String: String] = [:]
            let deadline = Date().addingTimeInterval(timeout * CLI.slowdown)
            while Date() < deadline {
                sleep(1)
                let now = sample(cameras)
                for (camera, runners) in now where runners.count > 1 && (previous[camera]?.count ?? 0) > 1 {
                    Issue.record("camera \(camera) ran on \(runners) for two samples in a row")
                }
                previous = now
                let placed = now.values.allSatisfy { $0.count == 1 && alive.contains($0) }
                steady = placed ? steady + 1 : 0
                if steady >= 3 { return now }
            }
            return nil
        }

        func counts(_ placement: [String: String]) -> [String: Int] {
            Dictionary(grouping: placement.values, by: { $0 }).mapValues(\.count)
        }

        func busiest(_ placement: [String: String]) -> String {
            counts(placement).max { ($0.value, $1.key) < ($1.value, $0.key) }!.key
        }
    }

    static let cameras = (1...6).map { "cam\($0)" }

    /// Six cameras added through one instance spread two each and every instance lists all six
    /// with their holder; kill -9 moves the victim's cameras within the lease and a start; a
    /// frozen instance (SIGSTOP) loses its cameras and, woken, has ended them before its first
    /// renewal; SIGTERM ends the leaver cleanly (exit 0) and its cameras move at once.
    @Test func threeInstancesShareSixCamerasThroughAKillAFreezeAndALeave() throws {
        let rig = try Rig()
        for i in ["a", "b", "c"] { try rig.start(i) }
        for camera in Self.cameras {
            let r = try HTTPAPITests.request("POST", rig.api("a") + "/sources", json: #"{"name":"\#(camera)","uri":"file://\#(rig.clip)"}"#)
            #expect(r.status == 201, "POST \(camera): \(r.status) \(r.body)")
        }
        var placement = try #require(rig.settle(Self.cameras, on: "abc", timeout: 60), "not settled: \(rig.sample(Self.cameras))")
        #expect(rig.counts(placement).values.sorted() == [2, 2, 2], "\(placement)")
        // Any instance's API lists every camera with the instance that runs it.
        let listed = try HTTPAPITests.curl(rig.api("b") + "/sources")
        let sources = (listed.json as? [[String: Any]]) ?? []
        #expect(Set(sources.compactMap { $0["name"] as? String }) == Set(Self.cameras))
        for s in sources { #expect(s["instance"] as? String == placement[s["name"] as? String ?? ""], "\(s)") }
        #expect(sources.allSatisfy { $0["state"] as? String == "playing" }, "\(listed.body)")
        #expect(try HTTPAPITests.request("POST", rig.api("c") + "/sources", json: #"{"name":"cam1","uri":"file://\#(rig.clip)"}"#).status == 409)

        // kill -9 of the busiest.
        let victim = rig.busiest(placement)
        kill(rig.instances[victim]!.pid, SIGKILL)
        let t0 = Date()
        let alive = "abc".filter { String($0) != victim }
        placement = try #require(rig.settle(Self.cameras, on: alive, timeout: 30), "after kill -9 of \(victim): \(rig.sample(Self.cameras))")
        let failover = Date().timeIntervalSince(t0) - 3 // less the three steady samples
        #expect(failover < 15, "back in \(failover) s")

        // Back, then one frozen past its lease.
        try rig.start(victim)
        let frozen = String(alive.first!)
        kill(rig.instances[frozen]!.pid, SIGSTOP)
        let rest = "abc".filter { String($0) != frozen }
        let moved = rig.settle(Self.cameras, on: rest, timeout: 30)
        kill(rig.instances[frozen]!.pid, SIGCONT)
        try #require(moved != nil, "with \(frozen) frozen: \(rig.sample(Self.cameras))")
        sleep(1)
        _ = rig.sample(Self.cameras)
        for k in 0..<4 {
            sleep(1)
            let now = rig.sample(Self.cameras)
            #expect(!now.values.contains { $0.contains(frozen) && $0.count > 1 }, "woken \(frozen) still ran a camera another holds after \(k + 2) s: \(now)")
        }
        #expect(rig.instances[frozen]!.stderr.contains("ending"), "\(rig.instances[frozen]!.stderr.suffix(500))")
        placement = try #require(rig.settle(Self.cameras, on: "abc", timeout: 30))

        // SIGTERM: exit 0, cameras elsewhere within the release bound.
        let leaver = rig.busiest(placement)
        let stopped = rig.instances[leaver]!.stop(signal: SIGTERM, timeout: 20)
        #expect(stopped.status == 0 && !stopped.timedOut, "\(stopped.stderr.suffix(500))")
        #expect(stopped.stderr.contains("\(leaver) left"))
        #expect(rig.settle(Self.cameras, on: "abc".filter { String($0) != leaver }, timeout: 10) != nil, "after SIGTERM of \(leaver): \(rig.sample(Self.cameras))")
    }

    /// The config's sources are put in etcd once; a camera added through one instance and removed
    /// through another ends where it ran; with etcd down past the lease every instance ends its
    /// cameras, and when etcd is back they run again, each on one instance; ${INSTANCE} and
    /// ${CLAIM} name a camera's outputs.
    @Test func configSourcesAddAndRemoveAnywhereAndEtcdRestarted() throws {
        let rig = try Rig(more: "! lensmetadata location=FOLDER/${NAME}-${INSTANCE}-${CLAIM}.jsonl")
        let sources = """
            sources:
              - name: door
                uri: file://\(rig.clip)
            """
        let socket = rig.work.appendingPathComponent("a.sock").path
        for i in ["a", "b"] { try rig.start(i, sources: sources, control: i == "a" ? socket : nil) }
        var placement = try #require(rig.settle(["door"], on: "ab", timeout: 60))
        // The control socket acts on the cluster: it lists every camera, and a camera added
        // through it goes to etcd (either instance may run it); one run elsewhere is named with
        // its holder.
        #expect(try ServeTests.ask(socket, "sources").contains("\"instance\""))
        #expect(try ServeTests.ask(socket, "add porch file://\(rig.clip)") == "ok")
        let porch = try #require(rig.settle(["door", "porch"], on: "ab", timeout: 30))["porch"]!
        let listed = try ServeTests.ask(socket, "list porch")
        #expect(porch == "a" ? listed.contains("lensmetadata") : listed.contains("runs on another instance"), "porch on \(porch): \(listed)")
        #expect(try ServeTests.ask(socket, "remove porch") == "ok")
        // A camera written into etcd by someone else, its URI carrying a pipeline of its own: the
        // instance that claims it refuses it as the API would (failed, with the reason), and
        // nothing of it runs.
        let pwned = rig.work.appendingPathComponent("pwned").path
        let key = Data("/streamlens/sources/evil".utf8).base64EncodedString()
        let value = Data(#"{"uri":"file:///x ! filesink location=\#(pwned)"}"#.utf8).base64EncodedString()
        let put = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/curl"), ["-s", "-X", "POST", rig.etcd.endpoint + "/v3/kv/put", "-d", #"{"key":"\#(key)","value":"\#(value)"}"#], timeout: 20)
        #expect(put.status == 0, "\(put.stderr)")
        var evil: [String: Any] = [:]
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let list = (try HTTPAPITests.curl(rig.api("a") + "/sources").json as? [[String: Any]]) ?? []
            evil = list.first { $0["name"] as? String == "evil" } ?? [:]
            if evil["state"] as? String == "failed" { break }
            usleep(200_000)
        }
        #expect(evil["state"] as? String == "failed" && (evil["error"] as? String ?? "").contains("percent-encode"), "\(evil)")
        #expect(!FileManager.default.fileExists(atPath: pwned))
        #expect(try HTTPAPITests.request("DELETE", rig.api("b") + "/sources/evil").status == 200)
        let r = try HTTPAPITests.request("POST", rig.api("b") + "/sources", json: #"{"name":"hall","uri":"file://\#(rig.clip)"}"#)
        #expect(r.status == 201, "\(r.body)")
        #expect(try HTTPAPITests.request("POST", rig.api("a") + "/sources", json: #"{"name":"bad","uri":"not a uri"}"#).status == 422)
        placement = try #require(rig.settle(["door", "hall"], on: "ab", timeout: 30))
        #expect(rig.counts(placement).values.sorted() == [1, 1], "\(placement)")
        let holder = placement["hall"]!
        let other = holder == "a" ? "b" : "a"
        // Asked about hall, the instance that does not run it answers with its holder's figures
        // and stages (the request goes on to the holder).
        let detail = try HTTPAPITests.curl(rig.api(other) + "/sources/hall")
        #expect(detail.status == 200 && detail.object["instance"] as? String == holder, "\(detail.body)")
        #expect((detail.object["frames"] as? Int ?? 0) > 0 && (detail.object["stages"] as? [Any])?.isEmpty == false, "\(detail.body)")
        let stages = try HTTPAPITests.curl(rig.api(other) + "/sources/hall/stages")
        #expect(stages.status == 200 && stages.body.contains("lensmetadata"), "\(stages.body)")
        // Removed through the instance that does not run it: ended where it ran.
        let removed = try HTTPAPITests.request("DELETE", rig.api(other) + "/sources/hall")
        #expect(removed.status == 200, "\(removed.body)")
        #expect(rig.instances[holder]!.waitFor("gave hall up", timeout: 10))
        _ = rig.sample(["hall"])
        sleep(2)
        #expect(rig.sample(["hall"])["hall"] == "", "hall still runs after its removal")
        let list = (try HTTPAPITests.curl(rig.api(holder) + "/sources").json as? [[String: Any]]) ?? []
        #expect(list.compactMap { $0["name"] as? String } == ["door"])

        // etcd down past the lease: the cameras end (nothing may run unsupervised); back: they run.
        let door = placement["door"]!
        rig.etcd.stop()
        #expect(rig.instances[door]!.waitFor("ending 1 camera", timeout: 15), "\(rig.instances[door]!.stderr.suffix(400))")
        // Its outputs finalized (the end of stream flushes them), then nothing more.
        #expect(rig.instances[door]!.waitFor("[door] lensmetadata", count: 2, timeout: 10))
        _ = rig.sample(["door"])
        sleep(2)
        #expect(rig.sample(["door"])["door"] == "", "door still runs with etcd down: \(rig.instances[door]!.stderr.suffix(1500))")
        try #require(try rig.etcd.start(), "etcd did not start again")
        placement = try #require(rig.settle(["door"], on: "ab", timeout: 40), "after etcd came back: \(rig.sample(["door"]))")
        // Each run of door wrote a file named for its instance and claim: one per run, the claims
        // rising over the cluster's life.
        let runs = ["a", "b"].flatMap { i in
            ((try? FileManager.default.contentsOfDirectory(atPath: rig.folder(i))) ?? []).filter { $0.hasPrefix("door-") }.map { (i, $0) }
        }
        #expect(runs.count >= 2, "\(runs)")
        for (i, file) in runs { #expect(file.hasPrefix("door-\(i)-"), "\(file) in \(i)'s folder") }
        let claims = runs.compactMap { Int($0.1.dropFirst("door-a-".count).prefix { $0.isNumber }) }
        #expect(Set(claims).count == runs.count && !claims.contains(0), "\(runs)")
    }
}
