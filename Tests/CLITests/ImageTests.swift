import Foundation
import StreamLensTesting
import Testing

/// The OCI image `make image` builds (tools/make-image.sh), run as a deployment runs it: loaded
/// into podman (its own scratch storage), `serve --config` from a mounted /config, ready and
/// healthy, a non-root user, records in a mounted /out, and a clean exit on podman's SIGTERM.
/// Only with STREAMLENS_IMAGE=out/streamlens-image.tar (make test does not build the image) and
/// podman installed (make image installs it).
@Suite struct ImageTests {
    static let archive = ProcessInfo.processInfo.environment["STREAMLENS_IMAGE"].map {
        $0.hasPrefix("/") ? $0 : CLI.packageRoot.appendingPathComponent($0).path
    }
    static let podman = "/usr/bin/podman"
    static var skipReason: String? {
        guard let archive else { return "STREAMLENS_IMAGE is not set: run make image, then STREAMLENS_IMAGE=out/streamlens-image.tar swift test --filter ImageTests" }
        guard FileManager.default.fileExists(atPath: archive) else { return "STREAMLENS_IMAGE=\(archive): no such file (make image writes it)" }
        guard FileManager.default.isExecutableFile(atPath: podman) else { return "podman is not installed (make image installs it)" }
        return nil
    }

    @Test(.enabled(if: skipReason == nil, Comment(rawValue: skipReason ?? "")), .timeLimit(.minutes(10)))
    func theImageServesAsANonRootUserAndStopsCleanly() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // podman's own storage, scratch too (its runroot may not be longer than 50 characters).
        let containers = URL(fileURLWithPath: "/tmp/streamlens-podman-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: containers) }
        // The flags podman needs on this kind of host (docs/deploy.md, The image).
        let storage = ["--storage-driver", "vfs", "--root", containers.appendingPathComponent("root").path,
                       "--runroot", containers.appendingPathComponent("run").path, "--cgroup-manager", "cgroupfs", "--runtime", "runc"]
        func podman(_ args: [String], timeout: Double = 300) throws -> CLI.Result {
            try CLI.spawn(URL(fileURLWithPath: Self.podman), storage + args, timeout: timeout)
        }
        let load = try podman(["load", "-q", "-i", try #require(Self.archive)])
        let ref = try #require(load.stdout.split(separator: "\n").last { $0.hasPrefix("Loaded image") }?
            .split(separator: ":", maxSplits: 1).last?.trimmingCharacters(in: .whitespaces), "podman load: \(load.stderr)")

        let config = dir.appendingPathComponent("config"), out = dir.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: out.path)
        _ = try ConfigTests.clip(in: config)
        let port = freeLoopbackPort()
        // The image's default command reads /config/streamlens.yaml; Models/ resolves from its
        // working directory and catalogue: through its model store.
        try """
        http:
          listen: 127.0.0.1:\(port)
        pipeline: >-
          uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=BGRx
          ! lensdetect model=Models/face-short-range.json draw=false
          ! lensmetadata location=/out/${NAME}.jsonl ! fakesink sync=true
        sources:
          - name: door
            uri: file:///config/clip.mp4
        """.write(to: config.appendingPathComponent("streamlens.yaml"), atomically: true, encoding: .utf8)

        let name = "streamlens-test-\(port)"
        // Attached, not -d: after `podman run -d` exits, Foundation's Process still says it runs
        // (unreaped) for as long as the container's conmon, which inherited its descriptors, lives.
        let run = try Background(URL(fileURLWithPath: Self.podman), storage + [
            "run", "--name", name, "--network", "host", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
            "-v", "\(config.path):/config:Z", "-v", "\(out.path):/out:Z", ref])
        defer { _ = try? podman(["rm", "-f", name], timeout: 60); withExtendedLifetime(run) {} }
        let u = "http://127.0.0.1:\(port)"
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline, run.isRunning, (try? HTTPAPITests.curl("\(u)/readyz", timeout: 5))?.status != 200 { usleep(500_000) }
        let logs = { run.stdout + run.stderr }
        #expect(try HTTPAPITests.curl("\(u)/readyz").status == 200, "\(logs())")
        #expect(try HTTPAPITests.curl("\(u)/healthz").status == 200)
        let uid = try podman(["exec", name, "id", "-u"], timeout: 30).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!uid.isEmpty && uid != "0", "the container runs as uid '\(uid)'")

        let records = out.appendingPathComponent("door.jsonl").path
        func lines() -> Int { ((try? String(contentsOfFile: records, encoding: .utf8)) ?? "").split(separator: "\n").count }
        let recordsDeadline = Date().addingTimeInterval(60)
        while Date() < recordsDeadline, lines() < 10 { usleep(250_000) }
        #expect(lines() >= 10, "\(lines()) records in /out: \(logs())")

        let start = Date()
        let stop = try podman(["stop", "-t", "20", name], timeout: 60)
        let seconds = Date().timeIntervalSince(start)
        let exit = try podman(["inspect", "--format", "{{.State.ExitCode}}", name], timeout: 30).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(stop.status == 0 && exit == "0", "podman stop: \(stop.stderr); exit code \(exit): \(logs())")
        #expect(seconds <= 15, "SIGTERM took \(seconds) s to end the container")
    }
}
