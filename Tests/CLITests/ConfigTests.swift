import Foundation
import StreamLensTesting
import Testing

/// `serve --config FILE`: the cameras the file names, what the API changes kept beside it across
/// a restart, a bad file refused with its line, and a state that cannot be written said once.
@Suite(.serialized) struct ConfigTests {
    /// A file clip of 60 s played at its own rate (sync=true), so a source stays playing.
    static func clip(in dir: URL) throws -> String {
        let path = dir.appendingPathComponent("clip.mp4").path
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"), ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10", "-t", "60",
                                                                         "-c:v", "libx264", "-preset", "ultrafast", "-g", "10", path], timeout: 120)
        try #require(r.status == 0, "ffmpeg: \(r.stderr)")
        return path
    }

    static func config(port: Int, dir: URL, clip: String, extra: String = "") -> String {
        """
        # cameras of the test site
        http:
          listen: 127.0.0.1:\(port)
        pipeline: >-
          uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=BGRx
          ! lensoverlay name=overlay ! lensmetadata location=\(dir.path)/${NAME}.jsonl ! fakesink sync=true
        \(extra)sources:
          - name: door
            uri: file://\(clip)
            stages:
              overlay: {thickness: 2}
          - name: hall
            uri: file://\(clip)
        """
    }

    static func names(_ u: String) throws -> [String] {
        let list = try HTTPAPITests.curl("\(u)/api/sources").json as? [[String: Any]] ?? []
        return list.compactMap { $0["name"] as? String }.sorted()
    }

    static func playing(_ u: String, _ count: Int, _ process: Background) -> Bool {
        let deadline = Date().addingTimeInterval(60 * CLI.slowdown)
        while Date() < deadline, process.isRunning {
            let list = (try? HTTPAPITests.curl("\(u)/api/sources", timeout: 5))?.json as? [[String: Any]] ?? []
            if list.filter({ $0["state"] as? String == "playing" }).count == count { return true }
            usleep(200_000)
        }
        return false
    }

    /// A scratch folder with a clip and a config naming door and hall (`extra`: more keys).
    struct Site {
        let dir: URL
        let clip: String
        let file: String
        let text: String
        let u: String
        func remove() { try? FileManager.default.removeItem(at: dir) }
    }

    static func site(extra: (URL) -> String = { _ in "" }) throws -> Site {
        let dir = try scratchDirectory()
        let clip = try Self.clip(in: dir)
        let port = freeLoopbackPort()
        let file = dir.appendingPathComponent("site.yaml").path
        let text = Self.config(port: port, dir: dir, clip: clip, extra: extra(dir))
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return Site(dir: dir, clip: clip, file: file, text: text, u: "http://127.0.0.1:\(port)")
    }

    static func thickness(_ u: String, _ source: String) throws -> Int? {
        HTTPAPITests.properties(try HTTPAPITests.curl("\(u)/api/sources/\(source)/stages/overlay"))["thickness"]?["value"] as? Int
    }

    /// Added, removed and PATCHed over the API, then SIGTERM and a restart: the same cameras and
    /// value; the config itself (read-only) untouched, its comment too, and `config check`
    /// takes both.
    @Test func whatTheAPIChangesIsThereAfterARestart() throws {
        let site = try Self.site()
        defer { site.remove() }
        let (clip, file, text, u) = (site.clip, site.file, site.text, site.u)
        // Read-only, as a Kubernetes ConfigMap is: the changes go to the state beside it.
        try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: file)
        let first = try Background.streamlens(["serve", "--config", file])
        try #require(Self.playing(u, 2, first), "door and hall not playing: \(first.stderr)")
        #expect(try Self.thickness(u, "door") == 2, "the file's stage value")
        #expect(try Self.thickness(u, "hall") == 3, "the stage's default")
        let added = try HTTPAPITests.request("POST", "\(u)/api/sources", json: #"{"name":"yard","uri":"file://\#(clip)"}"#)
        #expect(added.status == 201 && added.headers["warning"] == nil, "\(added.status) \(added.body)")
        #expect(try HTTPAPITests.request("PATCH", "\(u)/api/sources/door/stages/overlay", json: #"{"thickness":7}"#).status == 200)
        #expect(try HTTPAPITests.request("DELETE", "\(u)/api/sources/hall").status == 200)
        let ended = first.stop(signal: SIGTERM, timeout: 30)
        #expect(ended.status == 0 && !ended.timedOut, "\(ended.stderr)")

        #expect(try String(contentsOfFile: file, encoding: .utf8) == text, "the config is never rewritten")
        let second = try Background.streamlens(["serve", "--config", file])
        defer { _ = second.stop(signal: SIGTERM, timeout: 30) }
        try #require(Self.playing(u, 2, second), "after the restart: \(second.stderr)")
        #expect(try Self.names(u) == ["door", "yard"])
        #expect(try Self.thickness(u, "door") == 7)
        let check = try CLI.run(["config", "check", file], timeout: 60)
        #expect(check.status == 0 && check.stdout.contains("valid: 2 source(s): door, yard"), "\(check.stdout) \(check.stderr)")
    }

    /// A key that is not in the schema and a YAML syntax error: exit 2 before anything starts,
    /// the message naming the file, the line and the key.
    @Test func aBadFileIsRefusedWithItsLine() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("bad.yaml").path
        try "pipeline: uridecodebin uri=${URI} ! fakesink\nhttp:\n  listen: 127.0.0.1:\(freeLoopbackPort())\nsources:\n  - name: door\n    uri: file:///x.mp4\n    colour: red\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let r = try CLI.run(["serve", "--config", file], timeout: 30)
        #expect(r.status == 2 && r.stderr.contains("\(file):7: sources[0]: unknown key colour"), "\(r.stderr)")
        try "pipeline: x ! y uri=${URI}\nsources: [\n  - name: door\n".write(toFile: file, atomically: true, encoding: .utf8)
        let syntax = try CLI.run(["config", "check", file], timeout: 30)
        #expect(syntax.status == 2 && syntax.stderr.contains("\(file):") && syntax.stderr.contains("not valid YAML"), "\(syntax.stderr)")
        let missing = try CLI.run(["serve", "--config", dir.appendingPathComponent("none.yaml").path], timeout: 30)
        #expect(missing.status == 2 && missing.stderr.contains("none.yaml:1: the config no such file"), "\(missing.stderr)")
        let both = try CLI.run(["serve", "--config", file, "door=file:///x.mp4"], timeout: 30)
        #expect(both.status == 2 && both.stderr.contains("come from the file"), "\(both.stderr)")
    }

    /// A state file that cannot be written (here: in a folder that is not there): the change is
    /// made, the answer carries a Warning that it is not kept, the log says so once.
    @Test func aStateThatCannotBeWrittenIsSaidAndTheAnswerSaysSo() throws {
        let site = try Self.site(extra: { "state: \($0.path)/gone/state.json\n" })
        defer { site.remove() }
        let (file, u) = (site.file, site.u)
        let serve = try Background.streamlens(["serve", "--config", file])
        try #require(Self.playing(u, 2, serve), "\(serve.stderr)")
        let patch = try HTTPAPITests.request("PATCH", "\(u)/api/sources/door/stages/overlay", json: #"{"thickness":9}"#)
        #expect(patch.status == 200 && patch.headers["warning"]?.hasPrefix("199 streamlens \"not kept across a restart: cannot write") == true, "\(patch.headers)")
        #expect(try Self.thickness(u, "door") == 9, "the change is made regardless")
        #expect(try HTTPAPITests.request("DELETE", "\(u)/api/sources/hall").headers["warning"] != nil)
        let ended = serve.stop(signal: SIGTERM, timeout: 30)
        #expect(ended.stderr.components(separatedBy: "is not kept across a restart").count == 2, "said once: \(ended.stderr)")
    }

    /// PATCHes of a source racing its removal, many times: every answer is 200, 404 or 422, the
    /// server goes on, and the state never keeps a value for a source that is gone.
    @Test func patchesRacingRemovalsKeepNothingForAGoneSource() throws {
        let site = try Self.site()
        defer { site.remove() }
        let (dir, clip, file, u) = (site.dir, site.clip, site.file, site.u)
        let serve = try Background.streamlens(["serve", "--config", file])
        defer { _ = serve.stop(signal: SIGTERM, timeout: 30) }
        try #require(Self.playing(u, 2, serve), "\(serve.stderr)")
        for round in 0..<4 {
            let name = "cam\(round)"
            let added = try HTTPAPITests.request("POST", "\(u)/api/sources", json: #"{"name":"\#(name)","uri":"file://\#(clip)"}"#)
            try #require(added.status == 201, "\(added.body)")
            let statuses = Statuses()
            DispatchQueue.concurrentPerform(iterations: 6) { i in
                let r = i == 3 ? try? HTTPAPITests.request("DELETE", "\(u)/api/sources/\(name)")
                               : try? HTTPAPITests.request("PATCH", "\(u)/api/sources/\(name)/stages/overlay", json: #"{"thickness":\#(4 + i)}"#)
                statuses.add(r?.status ?? 0)
            }
            #expect(Set(statuses.all).isSubset(of: [200, 404, 422]), "round \(round): \(statuses.all)")
        }
        let state = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("site.state.json"))) as? [String: Any]
        let stages = state?["stages"] as? [String: Any] ?? [:]
        #expect(stages.keys.allSatisfy { !$0.hasPrefix("cam") }, "\(String(describing: state))")
        #expect((state?["added"] as? [Any])?.isEmpty == true, "\(String(describing: state))")
        #expect(try HTTPAPITests.curl("\(u)/healthz").status == 200)
    }
}

final class Statuses: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [Int] = []
    func add(_ s: Int) { lock.lock(); list.append(s); lock.unlock() }
    var all: [Int] { lock.lock(); defer { lock.unlock() }; return list }
}
