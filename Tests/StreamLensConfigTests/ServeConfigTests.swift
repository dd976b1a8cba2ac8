import Foundation
import Testing
@testable import StreamLensConfig

/// serve --config's file: what it reads, and each refusal naming the file, the line and the key.
@Suite struct ServeConfigTests {
    static let example = """
        # the issue's example, as written
        http:
          listen: 127.0.0.1:8080
        pipeline: >-
          uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=BGRx
          ! lensdetect name=detect model=Models/face-short-range.json draw=false
          ! lensmetadata location=out/${NAME}.jsonl ! fakesink sync=true
        sources:
          - name: door
            uri: file:///srv/clips/door.mp4
          - name: hall
            uri: rtsp://10.0.0.22/stream
        """

    @Test func theExampleReadsAsWritten() throws {
        let c = try ServeConfig.parse(Self.example, file: "/etc/streamlens/site.yaml")
        #expect(c.http?.listen == Located("127.0.0.1:8080", line: 3))
        #expect(c.pipeline.value == "uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=BGRx ! lensdetect name=detect model=Models/face-short-range.json draw=false ! lensmetadata location=out/${NAME}.jsonl ! fakesink sync=true")
        #expect(c.pipeline.line == 4)
        #expect(c.sources.map(\.name) == ["door", "hall"])
        #expect(c.sources.map(\.uri) == ["file:///srv/clips/door.mp4", "rtsp://10.0.0.22/stream"])
        #expect(c.sources.map(\.line) == [9, 11])
        #expect(c.statePath == "/etc/streamlens/site.state.json")
    }

    @Test func variablesStagesAndStateAreRead() throws {
        let c = try ServeConfig.parse("""
            pipeline: Pipelines/camera-faces.pipeline
            variables: {MODEL: Models/face-full-range.json, PORT: "8554"}
            state: /var/lib/streamlens/state.json
            sources:
              - name: door
                uri: rtsp://door.local/stream
                variables:
                  ZONE: "0.1,0.5,0.9,0.5"
                stages:
                  detect: {interval: 3, threshold: 0.6}
                  blur:
                    method: fill
            """, file: "c.yaml")
        #expect(c.variables == ["MODEL": "Models/face-full-range.json", "PORT": "8554"])
        #expect(c.statePath == "/var/lib/streamlens/state.json")
        #expect(c.http == nil)
        let door = try #require(c.sources.first)
        #expect(door.variables == ["ZONE": "0.1,0.5,0.9,0.5"])
        #expect(door.stages == [.init(element: "detect", property: "interval", value: "3", line: 10),
                                .init(element: "detect", property: "threshold", value: "0.6", line: 10),
                                .init(element: "blur", property: "method", value: "fill", line: 12)])
    }

    /// Every refusal: (file text, the line, words the message must hold).
    static let refusals: [(String, Int, [String])] = [
        ("pipeline: x ! y\nsources:\n  - name: door\n    uri: file:///a.mp4\n    colour: red\n", 5, ["unknown key colour", "name, uri, variables, stages"]),
        ("pipeline: x ! y\nlisten: 8080\n", 2, ["unknown key listen", "http"]),
        ("pipeline: x ! y\nsources: [\n", 3, ["not valid YAML"]),
        ("pipeline: x ! y\nsources:\n  name: door\n", 3, ["sources: is a mapping", "a list"]),
        ("pipeline: x ! y\nsources:\n  - door\n", 3, ["sources[0] is a single value", "mapping"]),
        ("pipeline: x ! y\nsources:\n  - name: door\n", 3, ["source door has no uri"]),
        ("pipeline: x ! y\nsources:\n  - name: [door]\n    uri: file:///a\n", 3, ["name is a list"]),
        ("pipeline: x ! y\nsources:\n  - name: a b\n    uri: file:///a\n", 3, ["letters, digits"]),
        ("pipeline: x ! y\nsources:\n  - name: d\n    uri: file:///a\n  - name: d\n    uri: file:///b\n", 5, ["d is given twice", "line 3"]),
        ("sources: []\n", 1, ["pipeline: is missing"]),
        ("", 1, ["empty"]),
        ("pipeline: x ! y\npipeline: z\n", 2, ["pipeline is given twice"]),
        ("pipeline: x ! y\nhttp:\n  token-file: /t\n", 2, ["http: needs listen"]),
        ("pipeline: x ! y\nhttp: 8080\n", 2, ["http is a single value"]),
        ("pipeline: x ! y\nvariables:\n  uri: x\n", 3, ["uri is not a variable name"]),
        ("pipeline: x ! y\nvariables:\n  URI: x\n", 3, ["URI is each source's own"]),
        ("pipeline: x ! y\nsources:\n  - name: d\n    uri: file:///a\n    stages:\n      detect: 3\n", 6, ["stages: detect is a single value"]),
        ("pipeline: x ! y\n---\npipeline: z\n", 3, ["second document"]),
        ("[1, 2]\n", 1, ["the config is a list"]),
        ("pipeline: x ! y\n? [a, b]\n: c\n", 2, ["keys are single values"]),
        ("pipeline: x ! y\ncluster:\n  instance: a\n", 2, ["cluster: needs etcd"]),
        ("pipeline: x ! y\ncluster:\n  etcd: https://etcd:2379\n", 3, ["https is not supported"]),
        ("pipeline: x ! y\ncluster:\n  etcd: etcd:2379\n", 3, ["not an etcd client URL", "http://HOST:PORT"]),
        ("pipeline: x ! y\ncluster:\n  etcd: http://e:2379\n  lease-ttl: 1\n", 4, ["lease-ttl 1", "2 to 60"]),
        ("pipeline: x ! y\ncluster:\n  etcd: http://e:2379\n  limit: -1\n", 4, ["limit -1"]),
        ("pipeline: x ! y\ncluster:\n  etcd: http://e:2379\n  instance: a b\n", 4, ["instance a b", "letters, digits"]),
        ("pipeline: x ! y\ncluster:\n  etcd: http://e:2379\n  peers: 3\n", 4, ["cluster: unknown key peers"]),
        ("pipeline: x ! y\nvariables:\n  CLAIM: x\n", 3, ["CLAIM is set by serve in a cluster"]),
    ]

    @Test func theClusterSectionIsRead() throws {
        let c = try ServeConfig.parse("""
            pipeline: x ! y
            cluster:
              etcd: [http://etcd-0:2379, http://etcd-1:2379]
              instance: cam-node-1
              lease-ttl: 8
              limit: 12
              prefix: /site-a
              advertise: http://10.0.0.5:8080
            """, file: "c.yaml")
        #expect(c.cluster == .init(etcd: ["http://etcd-0:2379", "http://etcd-1:2379"], instance: "cam-node-1", leaseTTL: 8, limit: 12,
                                   prefix: "/site-a/", advertise: "http://10.0.0.5:8080", line: 2))
        let d = try ServeConfig.parse("pipeline: x ! y\ncluster:\n  etcd: http://a:2379, http://b:2379\n", file: "d.yaml")
        #expect(d.cluster?.etcd == ["http://a:2379", "http://b:2379"])
        #expect(d.cluster?.instance == ProcessInfo.processInfo.hostName)
        #expect(d.cluster?.leaseTTL == 5)
        #expect(d.cluster?.prefix == "/streamlens/")
        #expect(try ServeConfig.parse("pipeline: x ! y\n", file: "e.yaml").cluster == nil)
    }

    @Test(arguments: refusals.indices) func aBadFileIsRefusedWithItsLine(_ i: Int) {
        let (text, line, words) = Self.refusals[i]
        do {
            _ = try ServeConfig.parse(text, file: "site.yaml")
            Issue.record("accepted: \(text.debugDescription)")
        } catch {
            #expect(error.file == "site.yaml")
            #expect(error.line == line, "\(error)")
            for w in words { #expect(error.message.contains(w), "\(error) lacks '\(w)'") }
            #expect(error.description.hasPrefix("site.yaml:\(line): "))
        }
    }

    /// Aliases nested so the document would grow to 10^9 nodes are refused at the budget, at once.
    @Test func aBillionLaughsIsRefused() {
        var text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for i in 1...9 { text += "a\(i): &a\(i) [" + Array(repeating: "*a\(i - 1)", count: 10).joined(separator: ", ") + "]\n" }
        let started = Date()
        #expect(throws: YAMLError.self) { try YAMLDocument.load(text) }
        do { _ = try YAMLDocument.load(text) } catch { #expect(error.message.contains("more than \(YAMLDocument.maxNodes) nodes"), "\(error)") }
        #expect(Date().timeIntervalSince(started) < 10)
    }

    @Test func quotedAndPlainScalarsAreTold() throws {
        let root = try #require(try YAMLDocument.load("a: 8080\nb: \"8080\"\nc: ~\n"))
        guard case .mapping(let pairs) = root.value else { Issue.record("not a mapping"); return }
        #expect(pairs.map(\.value.value) == [.scalar("8080", plain: true), .scalar("8080", plain: false), .scalar("~", plain: true)])
        #expect(pairs.map(\.keyLine) == [1, 2, 3])
    }
}

/// What the API changes, kept beside the config and laid over it at the next start.
@Suite struct ServeStateTests {
    let config = try! ServeConfig.parse("""
        pipeline: x ! y uri=${URI}
        sources:
          - name: door
            uri: file:///door.mp4
            stages: {detect: {interval: 2}}
          - name: hall
            uri: file:///hall.mp4
        """, file: "site.yaml")

    @Test func addRemoveAndSetAreLaidOverTheConfig() {
        var s = ServeState()
        s.sourceAdded(name: "yard", uri: "file:///yard.mp4")
        s.propertiesSet(source: "door", stage: "detect", [("interval", "3")])
        s.sourceRemoved(name: "hall", inConfig: true)
        let sources = s.sources(over: config)
        #expect(sources.map(\.name) == ["door", "yard"])
        #expect(sources[0].stages.map { "\($0.element).\($0.property)=\($0.value)" } == ["detect.interval=2", "detect.interval=3"])
        // A removed config source added again (another URI) comes back with that URI, once.
        s.sourceAdded(name: "hall", uri: "file:///hall2.mp4")
        #expect(s.sources(over: config).map { "\($0.name) \($0.uri)" } == ["door file:///door.mp4", "yard file:///yard.mp4", "hall file:///hall2.mp4"])
        // Removing an added source forgets it and what was set on it.
        s.propertiesSet(source: "yard", stage: "detect", [("interval", "5")])
        s.sourceRemoved(name: "yard", inConfig: false)
        #expect(s.added.map(\.name) == ["hall"])
        #expect(s.stages["yard"] == nil)
    }

    @Test func theStateIsWrittenWholeAndReadBack() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("state-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("site.state.json").path
        var s = ServeState()
        s.sourceAdded(name: "yard", uri: "file:///yard.mp4")
        s.propertiesSet(source: "door", stage: "detect", [("interval", "3")])
        #expect(s.save(path: path) == nil)
        #expect(try ServeState.load(path: path) == s)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["site.state.json"], "no temporary file left")
        // Missing: empty. Not ours: refused, naming the file.
        #expect(try ServeState.load(path: dir.appendingPathComponent("none.json").path) == ServeState())
        try Data("{\"added\": 3}".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: ConfigError.self) { try ServeState.load(path: path) }
    }

    @Test func aStateThatCannotBeWrittenIsSaidOnceAndTheChangeStillCounts() throws {
        let lines = LockedLines()
        let keeper = ServeStateKeeper(path: "/proc/streamlens-cannot-write/state.json", state: ServeState(), config: config, log: { lines.append($0) })
        keeper.sourceAdded(name: "yard", uri: "file:///yard.mp4")
        keeper.sourceRemoved(name: "hall")
        #expect(keeper.problem?.contains("cannot write") == true)
        #expect(lines.all.count == 1, "\(lines.all)")
        #expect(keeper.state.added.map(\.name) == ["yard"] && keeper.state.removed == ["hall"])
    }

    @Test func aSetRacingTheSourcesRemovalIsNotKept() {
        let keeper = ServeStateKeeper(path: "/dev/null/x", state: ServeState(), config: config, log: { _ in })
        keeper.sourceRemoved(name: "door")
        keeper.propertiesSet(source: "door", stage: "detect", [("interval", "4")])
        keeper.propertiesSet(source: "nosuch", stage: "detect", [("interval", "4")])
        #expect(keeper.state.stages.isEmpty)
    }
}

final class LockedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.lock(); lines.append(line); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
}
