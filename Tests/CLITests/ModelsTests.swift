import Foundation
import Testing

/// `streamlens models`: the catalogue's third-party files fetched over HTTP from a real server on
/// loopback (Tests/Python/model_mirror.py, standing in for the public homes this machine cannot
/// reach), from mirror folders and URLs, each checked against its sha256; every way a download
/// goes wrong gives a clear message and installs nothing.
@Suite(.serialized) struct ModelsTests {
    /// A scratch catalogue, store and mirror folder, and the server serving that folder.
    final class Lab {
        let dir: URL
        let files: URL
        let store: URL
        let server: Background
        let port: Int

        init() throws {
            dir = try scratchDirectory()
            files = dir.appendingPathComponent("files")
            store = dir.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: files.appendingPathComponent("deep/er"), withIntermediateDirectories: true)
            // Two "models" of random bytes, and a zip holding one (a wheel's stand-in).
            var generator = SystemRandomNumberGenerator()
            for (name, size) in [("net.bin", 300_000), ("vec.bin", 70_000)] {
                try Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: files.appendingPathComponent(name))
            }
            let zip = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", """
                import sys, zipfile
                with zipfile.ZipFile(sys.argv[1] + "/pack-1.0-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
                    z.write(sys.argv[1] + "/vec.bin", "pack/data/vec.bin")
                """, files.path])
            try #require(zip.status == 0, "\(zip.stderr)")
            server = try Background(URL(fileURLWithPath: "/usr/bin/python3"), [CLI.packageRoot.appendingPathComponent("Tests/Python/model_mirror.py").path, files.path])
            try #require(server.waitFor("port ", in: \.stdout, timeout: 20), "mirror server: \(server.stderr)")
            port = Int(server.stdout.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
            try #require(port > 0)
        }

        deinit { try? FileManager.default.removeItem(at: dir) }

        func url(_ mode: String, _ name: String) -> String { "http://127.0.0.1:\(port)/\(mode)/\(name)" }

        func sha256(_ name: String) throws -> String {
            let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/sha256sum"), [files.appendingPathComponent(name).path])
            return String(r.stdout.prefix(64))
        }

        func size(_ name: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: files.appendingPathComponent(name).path)[.size] as? Int) ?? -1
        }

        /// A catalogue whose model `demo` has net.bin from `netURLs` and vec.bin out of the zip.
        func catalogue(netURLs: [String], zipURLs: [String]? = nil) throws -> String {
            let zip = "pack-1.0-py3-none-any.whl"
            let json: [String: Any] = [
                "schema_version": 1,
                "archives": [["name": zip, "size": try size(zip), "sha256": try sha256(zip), "urls": zipURLs ?? [url("good", zip)]]],
                "models": [[
                    "name": "demo", "description": "two files for the tests", "licence": "CC0-1.0",
                    "files": [
                        ["name": "net.bin", "size": try size("net.bin"), "sha256": try sha256("net.bin"), "urls": netURLs],
                        ["name": "vec.bin", "size": try size("vec.bin"), "sha256": try sha256("vec.bin"), "archive": zip, "member": "pack/data/vec.bin"],
                    ],
                ]],
            ]
            let path = dir.appendingPathComponent("catalogue-\(UUID().uuidString.prefix(6)).json").path
            try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
            return path
        }

        func models(_ args: [String], catalogue: String, extraEnvironment: [String: String] = [:]) throws -> CLI.Result {
            var environment = ProcessInfo.processInfo.environment
            environment["STREAMLENS_MODELS"] = store.path
            environment.removeValue(forKey: "STREAMLENS_MODEL_MIRROR")
            environment.merge(extraEnvironment) { $1 }
            return try CLI.spawn(CLI.binary, ["models", "--catalogue", catalogue] + args, environment: environment, timeout: 60)
        }

        /// The files of model demo in the store (hidden staging folders included: none may be left).
        var installed: [String] {
            let all = (try? FileManager.default.subpathsOfDirectory(atPath: store.path)) ?? []
            return all.filter { !$0.hasSuffix("/") && $0 != "demo" }.sorted()
        }

        func installedBytes(_ name: String) -> Data? { try? Data(contentsOf: store.appendingPathComponent("demo/\(name)")) }
        func original(_ name: String) -> Data? { try? Data(contentsOf: files.appendingPathComponent(name)) }
    }

    @Test func fetchesOverHTTPVerifiesAndInstalls() throws {
        let lab = try Lab()
        // The first URL answers 404: the next one is tried.
        let catalogue = try lab.catalogue(netURLs: [lab.url("missing", "net.bin"), lab.url("good", "net.bin")])
        let before = try lab.models(["list"], catalogue: catalogue)
        #expect(before.status == 0, "\(before.stderr)")
        #expect(before.stdout.contains("demo") && before.stdout.contains("not installed") && before.stdout.contains("CC0-1.0"), "\(before.stdout)")
        let r = try lab.models(["fetch", "demo"], catalogue: catalogue)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("demo: installed 2 files into \(lab.store.path)/demo (sha256 checked)"), "\(r.stderr)")
        #expect(lab.installed == ["demo/net.bin", "demo/vec.bin"], "\(lab.installed)")
        #expect(lab.installedBytes("net.bin") == lab.original("net.bin") && lab.installedBytes("vec.bin") == lab.original("vec.bin"))
        #expect(lab.server.stderr.contains("GET /missing/net.bin") && lab.server.stderr.contains("GET /good/pack-1.0-py3-none-any.whl"))
        let list = try lab.models(["list"], catalogue: catalogue)
        #expect(list.stdout.contains(" installed "), "\(list.stdout)")
        // Installed and intact: a second fetch downloads nothing.
        let requests = lab.server.stderr.split(separator: "\n").count
        let again = try lab.models(["fetch", "demo"], catalogue: catalogue)
        #expect(again.status == 0 && again.stderr.contains("demo: already installed"), "\(again.stderr)")
        #expect(lab.server.stderr.split(separator: "\n").count == requests)
        let verify = try lab.models(["verify"], catalogue: catalogue)
        #expect(verify.status == 0 && verify.stdout.contains("demo: ok (2 files, sha256 checked)"), "\(verify.stdout)")
        // A file damaged after installing: verify says so and fails; fetch --force mends it.
        var damaged = try #require(lab.installedBytes("net.bin"))
        damaged[10] ^= 1
        try damaged.write(to: lab.store.appendingPathComponent("demo/net.bin"))
        let bad = try lab.models(["verify", "demo"], catalogue: catalogue)
        #expect(bad.status == 1 && bad.stdout.contains("demo: DAMAGED") && bad.stdout.contains("net.bin: sha256 "), "\(bad.stdout)")
        let mended = try lab.models(["fetch", "demo"], catalogue: catalogue)
        #expect(mended.status == 0 && lab.installedBytes("net.bin") == lab.original("net.bin"), "\(mended.stderr)")
    }

    /// Each broken download: exit 1, a message naming what went wrong, nothing installed, and
    /// an earlier installation left as it was.
    @Test(arguments: [
        ("corrupt", "sha256 mismatch: expected "),
        ("short", "the server offers 150000 bytes, the catalogue lists 300000"),
        ("drop", "the connection was lost after "),
        ("missing", "HTTP 404 Not Found"),
        ("stall", "no data for 1 s after 150000 of 300000 bytes (the server stalled)"),
    ])
    func aBrokenDownloadInstallsNothing(_ mode: String, _ message: String) throws {
        let lab = try Lab()
        let catalogue = try lab.catalogue(netURLs: [lab.url(mode, "net.bin")])
        let r = try lab.models(["fetch", "demo"], catalogue: catalogue, extraEnvironment: ["STREAMLENS_FETCH_TIMEOUT": "1"])
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("error: demo: could not fetch net.bin; nothing was installed for demo"), "\(r.stderr)")
        #expect(r.stderr.contains(message), "\(mode): expected '\(message)' in \(r.stderr)")
        #expect(lab.installed.isEmpty, "\(mode): \(lab.installed)")
    }

    @Test func aFailureAfterAGoodFileInstallsNeitherAndKeepsTheOldCopy() throws {
        let lab = try Lab()
        // An installed, intact net.bin and an old vec.bin of the wrong content: the fetch of
        // vec.bin's archive fails, so nothing changes.
        let good = try lab.catalogue(netURLs: [lab.url("good", "net.bin")], zipURLs: [lab.url("drop", "pack-1.0-py3-none-any.whl")])
        try FileManager.default.createDirectory(at: lab.store.appendingPathComponent("demo"), withIntermediateDirectories: true)
        try Data("old".utf8).write(to: lab.store.appendingPathComponent("demo/vec.bin"))
        let r = try lab.models(["fetch", "demo"], catalogue: good)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("error: demo: could not fetch vec.bin; nothing was installed for demo"), "\(r.stderr)")
        #expect(lab.installed == ["demo/vec.bin"], "\(lab.installed)")
        #expect(lab.installedBytes("vec.bin") == Data("old".utf8))
    }

    @Test func mirrorsInsteadOfThePublicURLs() throws {
        let lab = try Lab()
        // The catalogue's own URLs all fail: only the mirror can give the files.
        let catalogue = try lab.catalogue(netURLs: [lab.url("missing", "net.bin")], zipURLs: [lab.url("missing", "pack-1.0-py3-none-any.whl")])
        // A folder, searched recursively by file name: net.bin deep inside, vec.bin straight (no zip needed).
        let mirror = lab.dir.appendingPathComponent("mirror")
        try FileManager.default.createDirectory(at: mirror.appendingPathComponent("a/b"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: lab.files.appendingPathComponent("net.bin"), to: mirror.appendingPathComponent("a/b/net.bin"))
        try FileManager.default.copyItem(at: lab.files.appendingPathComponent("vec.bin"), to: mirror.appendingPathComponent("vec.bin"))
        let r = try lab.models(["fetch", "all", "--from", mirror.path], catalogue: catalogue)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(lab.installedBytes("net.bin") == lab.original("net.bin") && lab.installedBytes("vec.bin") == lab.original("vec.bin"))
        #expect(!lab.server.stderr.contains("GET /missing"), "the public URLs were tried: \(lab.server.stderr)")
        // A base URL from the environment holding net.bin and the archive but not vec.bin itself:
        // vec.bin is then taken out of the archive, found there by its own name.
        try FileManager.default.removeItem(at: lab.store)
        let served = lab.files.appendingPathComponent("mirror")
        try FileManager.default.createDirectory(at: served, withIntermediateDirectories: true)
        for name in ["net.bin", "pack-1.0-py3-none-any.whl"] {
            try FileManager.default.copyItem(at: lab.files.appendingPathComponent(name), to: served.appendingPathComponent(name))
        }
        let viaURL = try lab.models(["fetch", "demo"], catalogue: catalogue, extraEnvironment: ["STREAMLENS_MODEL_MIRROR": "http://127.0.0.1:\(lab.port)/good/mirror/"])
        #expect(viaURL.status == 0, "\(viaURL.stderr)")
        #expect(lab.installed == ["demo/net.bin", "demo/vec.bin"], "\(lab.installed)")
        #expect(lab.installedBytes("vec.bin") == lab.original("vec.bin"))
        #expect(lab.server.stderr.contains("GET /good/mirror/vec.bin") && lab.server.stderr.contains("GET /good/mirror/pack-1.0-py3-none-any.whl"),
                "\(lab.server.stderr)")
        // A corrupt copy in a mirror folder is refused by its sha256.
        try FileManager.default.removeItem(at: lab.store)
        var corrupt = try Data(contentsOf: mirror.appendingPathComponent("a/b/net.bin"))
        corrupt[corrupt.count / 2] ^= 0xFF
        try corrupt.write(to: mirror.appendingPathComponent("a/b/net.bin"))
        let refused = try lab.models(["fetch", "demo", "--from", mirror.path], catalogue: catalogue)
        #expect(refused.status == 1 && refused.stderr.contains("sha256 mismatch"), "\(refused.stderr)")
        #expect(lab.installed.isEmpty, "\(lab.installed)")
    }

    @Test func badRequestsAreNamed() throws {
        let lab = try Lab()
        let catalogue = try lab.catalogue(netURLs: [lab.url("good", "net.bin")])
        let unknown = try lab.models(["fetch", "nope"], catalogue: catalogue)
        #expect(unknown.status == 2 && unknown.stderr.contains("error: no model nope in the catalogue; it has: demo"), "\(unknown.stderr)")
        let noMirror = try lab.models(["fetch", "demo", "--from", "/nonexistent/mirror"], catalogue: catalogue)
        #expect(noMirror.status == 2 && noMirror.stderr.contains("mirror /nonexistent/mirror is not a folder"), "\(noMirror.stderr)")
        let noCatalogue = try lab.models(["list"], catalogue: "/nonexistent/catalogue.json")
        #expect(noCatalogue.status == 2 && noCatalogue.stderr.contains("catalogue /nonexistent/catalogue.json not found"), "\(noCatalogue.stderr)")
    }

    /// A file taken out of an archive with a transform ("tflite-transpose-conv"): installed as the
    /// transform's output, checked against the catalogue's size and sha256 of that output. A member
    /// the transform refuses installs nothing; an unknown transform name is a bad catalogue.
    @Test func aTransformRewritesAnArchiveMember() throws {
        let lab = try Lab()
        let tool = CLI.packageRoot.appendingPathComponent("tools/tflite_transpose_conv.py").path
        // The smallest model with MediaPipe's custom op: x [1,2,2,1] -> y [1,4,4,1] (weights
        // [1,2,2,1], bias [1], custom options padding 2 = VALID, strides 2x2), written with the
        // tool's flatbuffer builder (field ids of TFLite's schema.fbs), zipped with vec.bin.
        let make = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", """
            import struct, sys, zipfile
            sys.path.insert(0, sys.argv[1])
            from tflite_transpose_conv import Builder
            b = Builder(b"")
            buffers = [b.table({})] + [b.table({0: ("ref", b.bytes_vector(d))}) for d in (struct.pack("<4f", 1, 2, 3, 4), struct.pack("<f", 0.5))]
            def tensor(shape, buffer, name):
                return b.table({0: ("ref", b.vector("i", shape)), 2: ("I", buffer), 3: ("ref", b.string(name))})
            tensors = [tensor([1, 2, 2, 1], 0, "x"), tensor([1, 2, 2, 1], 1, "w"), tensor([1], 2, "b"), tensor([1, 4, 4, 1], 0, "y")]
            op = b.table({0: ("I", 0), 1: ("ref", b.vector("i", [0, 1, 2])), 2: ("ref", b.vector("i", [3])),
                          5: ("ref", b.bytes_vector(struct.pack("<3i", 2, 2, 2), 4))})
            graph = b.table({0: ("ref", b.refs(tensors)), 1: ("ref", b.vector("i", [0])), 2: ("ref", b.vector("i", [3])), 3: ("ref", b.refs([op]))})
            code = b.table({0: ("b", 32), 1: ("ref", b.string("Convolution2DTransposeBias")), 3: ("i", 32)})
            model = b.table({0: ("I", 3), 1: ("ref", b.refs([code])), 2: ("ref", b.refs([graph])), 4: ("ref", b.refs(buffers))})
            with open(sys.argv[2] + "/tiny.tflite", "wb") as f:
                f.write(b.finish(model, b"TFL3"))
            with zipfile.ZipFile(sys.argv[2] + "/seg-1.0-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
                z.write(sys.argv[2] + "/tiny.tflite", "seg/tiny.tflite")
                z.write(sys.argv[2] + "/vec.bin", "seg/vec.bin")
            """, CLI.packageRoot.appendingPathComponent("tools").path, lab.files.path])
        try #require(make.status == 0, "\(make.stderr)")
        let rewrite = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), [tool, lab.files.appendingPathComponent("tiny.tflite").path,
                                                                                lab.files.appendingPathComponent("rewritten.tflite").path])
        try #require(rewrite.status == 0, "\(rewrite.stderr)")
        #expect(rewrite.stderr.contains("Convolution2DTransposeBias -> TRANSPOSE_CONV v3 (VALID, stride 2x2, output [1, 4, 4, 1], bias as input 4)"),
                "\(rewrite.stderr)")

        func catalogue(_ transform: String, member: String = "seg/tiny.tflite") throws -> String {
            let zip = "seg-1.0-py3-none-any.whl"
            let json: [String: Any] = [
                "schema_version": 1,
                "archives": [["name": zip, "size": try lab.size(zip), "sha256": try lab.sha256(zip), "urls": [lab.url("good", zip)]]],
                "models": [[
                    "name": "demo", "description": "a rewritten model", "licence": "CC0-1.0",
                    "files": [["name": "tiny.tflite", "size": try lab.size("rewritten.tflite"), "sha256": try lab.sha256("rewritten.tflite"),
                               "archive": zip, "member": member, "transform": transform]],
                ]],
            ]
            let path = lab.dir.appendingPathComponent("catalogue-\(UUID().uuidString.prefix(6)).json").path
            try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
            return path
        }

        let r = try lab.models(["fetch", "demo"], catalogue: try catalogue("tflite-transpose-conv"))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(lab.installed == ["demo/tiny.tflite"], "\(lab.installed)")
        #expect(lab.installedBytes("tiny.tflite") == lab.original("rewritten.tflite"))
        #expect(lab.original("rewritten.tflite") != lab.original("tiny.tflite"))
        let verify = try lab.models(["verify"], catalogue: try catalogue("tflite-transpose-conv"))
        #expect(verify.status == 0 && verify.stdout.contains("demo: ok (1 files, sha256 checked)"), "\(verify.stdout)")

        try FileManager.default.removeItem(at: lab.store)
        let refused = try lab.models(["fetch", "demo"], catalogue: try catalogue("tflite-transpose-conv", member: "seg/vec.bin"))
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("tiny.tflite: transform tflite-transpose-conv of seg/vec.bin from seg-1.0-py3-none-any.whl failed: "
                                        + "not a TFLite model (no TFL3 file identifier)"), "\(refused.stderr)")
        #expect(lab.installed.isEmpty, "\(lab.installed)")

        let unknown = try lab.models(["list"], catalogue: try catalogue("tflite-nope"))
        #expect(unknown.status == 2 && unknown.stderr.contains("demo/tiny.tflite: unknown transform 'tflite-nope' (known: tflite-transpose-conv)"),
                "\(unknown.stderr)")
    }

    /// The project's own catalogue: every entry well formed, and the shipped manifests' catalogue
    /// references all name files it lists.
    @Test func theProjectCatalogueCoversEveryReference() throws {
        let r = try CLI.run(["models", "list", "--json"])
        #expect(r.status == 0, "\(r.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let models = try #require(json["models"] as? [[String: Any]])
        var files: Set<String> = []
        for m in models {
            for f in (m["files"] as? [String]) ?? [] { files.insert("catalogue:\(m["name"] as? String ?? "")/\(f)") }
        }
        #expect(models.map { $0["name"] as? String } == ["mediapipe-face-detection", "mediapipe-pose-detection", "mediapipe-face-landmark", "mediapipe-pose-landmark", "mediapipe-selfie-segmentation", "magenta", "centerface", "fer-emotion", "ppocr-v5"])
        let manifests = try FileManager.default.contentsOfDirectory(atPath: CLI.packageRoot.appendingPathComponent("Models").path).filter { $0.hasSuffix(".json") }
        var references = 0
        for name in manifests {
            let text = try String(contentsOf: CLI.packageRoot.appendingPathComponent("Models/\(name)"), encoding: .utf8)
            for match in text.matches(of: /"(catalogue:[^"]+)"/) {
                references += 1
                #expect(files.contains(String(match.1)), "\(name): \(match.1) is not in Models/model-catalogue.json")
            }
        }
        #expect(references == 15)
    }
}
