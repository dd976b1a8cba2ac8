import Foundation
import StreamLensTesting
import StreamLensAPI
import StreamLensGst
import Testing

/// `--http`: the API of `run` and `serve` through the built binary, with curl as the client (a
/// client no one here wrote) and Python's sockets as the hostile ones.
@Suite(.serialized) struct HTTPAPITests {
    /// One exchange with curl: its status, headers (lower-cased names) and body.
    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: String
        var json: Any? { try? JSONSerialization.jsonObject(with: Data(body.utf8), options: [.fragmentsAllowed]) }
        var object: [String: Any] { json as? [String: Any] ?? [:] }
    }

    static func curl(_ url: String, headers: [String] = [], timeout: Double = 60) throws -> Answer {
        try request("GET", url, headers: headers, timeout: timeout)
    }

    static func request(_ method: String, _ url: String, json: String? = nil, headers: [String] = [], timeout: Double = 60) throws -> Answer {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let head = dir.appendingPathComponent("head").path, body = dir.appendingPathComponent("body").path
        var args = ["-s", "-X", method, "-D", head, "-o", body, "-w", "%{http_code}", "--max-time", String(Int(timeout))]
        if let json { args += ["-H", "Content-Type: application/json", "--data-binary", json] }
        for h in headers { args += ["-H", h] }
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/curl"), args + [url], timeout: timeout + 10)
        var parsed: [String: String] = [:]
        for line in ((try? String(contentsOfFile: head, encoding: .utf8)) ?? "").split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            parsed[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Answer(status: Int(r.stdout) ?? 0, headers: parsed, body: (try? String(contentsOfFile: body, encoding: .utf8)) ?? "")
    }

    /// Waits (bounded) until `url` answers `status`.
    static func waitFor(_ url: String, status: Int = 200, headers: [String] = [], timeout: Double = 60, process: Background) -> Bool {
        let deadline = Date().addingTimeInterval(timeout * CLI.slowdown)
        while Date() < deadline, process.isRunning {
            if (try? curl(url, headers: headers, timeout: 5))?.status == status { return true }
            usleep(100_000)
        }
        return false
    }

    static let live = "videotestsrc is-live=true ! video/x-raw,format=BGRx,width=320,height=240,framerate=30/1"

    /// The lensblur's properties as the API lists them: name → entry.
    static func properties(_ answer: Answer) -> [String: [String: Any]] {
        let list = answer.object["properties"] as? [[String: Any]] ?? []
        return Dictionary(list.map { ($0["name"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// Under `run` the pipeline is source `main`; a stage's every property is listed with its
    /// value, type, range and whether it is live; PATCH changes live ones and the control socket
    /// reads the change back (one command layer); a refused PATCH changes nothing.
    @Test func runServesItsStagesAndPatchesLiveProperties() throws {
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let socket = try scratchDirectory().appendingPathComponent("control.sock").path
        let run = try Background.streamlens(["run", "--http", "\(port)", "--control", socket,
                                             "\(Self.live) ! lensblur name=hide margin=0.2 ! fakesink"])
        try #require(Self.waitFor("\(u)/readyz", process: run), "not ready: \(run.stderr)")
        #expect(run.stderr.contains("http: http://127.0.0.1:\(port)/"), "\(run.stderr)")

        let sources = try Self.curl("\(u)/api/sources")
        let list = try #require(sources.json as? [[String: Any]])
        #expect(list.count == 1 && list[0]["name"] as? String == "main" && list[0]["state"] as? String == "playing", "\(sources.body)")
        let one = try Self.curl("\(u)/api/sources/main")
        #expect((one.object["stages"] as? [[String: Any]])?.map { $0["name"] as? String } == ["hide"], "\(one.body)")
        // The frame rate reaches the API (30 fps live, measured over 5 s: bounded wait for it to show).
        var fps = 0.0
        for _ in 0..<100 where fps < 20 {
            fps = (try Self.curl("\(u)/api/sources/main").object["fps"] as? Double) ?? 0
            usleep(100_000)
        }
        #expect(fps >= 20 && fps <= 40, "fps \(fps)")

        let stage = try Self.curl("\(u)/api/sources/main/stages/hide")
        #expect(stage.status == 200 && stage.object["factory"] as? String == "lensblur", "\(stage.body)")
        let p = Self.properties(stage)
        // Every row of lensblur's table, bridge settings included (`streamlens stages lensblur`).
        for name in ["method", "block", "color", "margin", "labels", "hold", "mode"] { #expect(p[name] != nil, "no \(name) in \(stage.body)") }
        #expect(p["margin"]?["value"] as? Double == 0.2 && p["margin"]?["type"] as? String == "number")
        #expect(p["margin"]?["minimum"] as? Double == 0 && p["margin"]?["maximum"] as? Double == 2 && p["margin"]?["live"] as? Bool == true)
        #expect(p["method"]?["choices"] as? [String] == ["pixelate", "gaussian", "fill"])
        #expect(p["mode"]?["live"] as? Bool == false)

        let patched = try Self.request("PATCH", "\(u)/api/sources/main/stages/hide", json: #"{"margin": 0.5, "method": "fill", "block": 8}"#)
        #expect(patched.status == 200, "\(patched.body)")
        #expect(Self.properties(patched)["margin"]?["value"] as? Double == 0.5)
        // The control socket reads what the API set, and the API what the socket set.
        let got = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw")
            for line in ["get hide method", "set hide margin=0.75"]:
                f.write(line + "\\n"); f.flush(); print(f.readline().strip())
            """, socket], timeout: 30)
        #expect(got.stdout == "fill\nok\n", "\(got.stdout) \(got.stderr)")
        #expect(Self.properties(try Self.curl("\(u)/api/sources/main/stages/hide"))["margin"]?["value"] as? Double == 0.75)

        // Refused, each naming the property; nothing changed by any of them.
        let refusals: [(String, String, Int, String)] = [
            (#"{"margin": 7}"#, "margin", 422, "out of range"),
            (#"{"margin": 0.1, "no-such-property": 1}"#, "no-such-property", 422, "has no property no-such-property"),
            (#"{"margin": 0.1, "mode": "live"}"#, "mode", 422, "cannot change while the pipeline runs"),
            (#"{"method": "smear"}"#, "method", 422, "is not one of pixelate, gaussian, fill"),
            (#"{"margin": [1]}"#, "margin", 422, "a string, a number or true/false"),
        ]
        for (body, property, status, words) in refusals {
            let r = try Self.request("PATCH", "\(u)/api/sources/main/stages/hide", json: body)
            #expect(r.status == status && r.object["property"] as? String == property, "\(body): \(r.status) \(r.body)")
            #expect((r.object["error"] as? String ?? "").contains(words), "\(body): \(r.body)")
        }
        let after = Self.properties(try Self.curl("\(u)/api/sources/main/stages/hide"))
        #expect(after["margin"]?["value"] as? Double == 0.75 && after["method"]?["value"] as? String == "fill" && after["mode"]?["value"] as? String == "auto")
        #expect(try Self.request("PATCH", "\(u)/api/sources/main/stages/hide", json: "{not json").status == 400)
        let plain = try Self.request("PATCH", "\(u)/api/sources/main/stages/hide", headers: ["Content-Type: text/plain"])
        #expect(plain.status == 415, "\(plain.body)")
        #expect(try Self.curl("\(u)/api/sources/main/stages/nosuch").status == 404)
        #expect(try Self.curl("\(u)/api/sources/other/stages").status == 404)
        // run has one source: it is not added to or removed over HTTP.
        #expect(try Self.request("POST", "\(u)/api/sources", json: #"{"name":"b","uri":"file:///x.mp4"}"#).status == 409)
        #expect(try Self.request("DELETE", "\(u)/api/sources/main").status == 409)
        let metrics = try Self.curl("\(u)/metrics")
        #expect(metrics.status == 200 && metrics.body.contains("{stage=\"hide\","), "\(metrics.body.prefix(300))")
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// The OpenAPI document and the routes the server answers are the same set: every path and
    /// method in the document is answered (not 404 or 405), every route in the server's table is
    /// in the document, and every other method on a documented path is refused with 405 and an
    /// Allow header naming exactly the document's methods.
    @Test func theOpenAPIDocumentListsExactlyTheRoutes() throws {
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let run = try Background.streamlens(["run", "--http", "\(port)", "\(Self.live) ! lensblur name=hide ! fakesink"])
        try #require(Self.waitFor("\(u)/readyz", process: run), "not ready: \(run.stderr)")
        let doc = try Self.curl("\(u)/api/openapi.json")
        #expect((doc.object["openapi"] as? String)?.hasPrefix("3.") == true)
        let paths = try #require(doc.object["paths"] as? [String: [String: Any]])
        let verbs = ["get", "post", "put", "patch", "delete"]
        var documented = Set<String>()
        for (path, item) in paths {
            let methods = verbs.filter { item[$0] != nil }
            #expect(!methods.isEmpty, "\(path) has no method")
            let concrete = path.replacingOccurrences(of: "{name}", with: "main").replacingOccurrences(of: "{stage}", with: "hide")
                .replacingOccurrences(of: "{file}", with: "console.js").replacingOccurrences(of: "{index}", with: "0")
                .replacingOccurrences(of: "{session}", with: "none").replacingOccurrences(of: "{id}", with: "1")
            for m in methods {
                documented.insert("\(m.uppercased()) \(path)")
                let body = m == "post" || m == "patch" ? #"{"margin": 0.3}"# : nil
                // The event and MJPEG streams do not end: headers are enough (curl's time limit ends them).
                let streams = path == "/api/events" || path.hasSuffix("/mjpeg")
                let r = try Self.request(m.uppercased(), "\(u)\(concrete)", json: body, timeout: streams ? 2 : 30)
                // Answered by the route: a 404 may only say that what it names is not there
                // (no style 0 on lensblur, no session "none"), never that the route is not.
                #expect(r.status != 405 && r.status != 0 && !(r.status == 404 && r.body.contains("no such route")), "\(m) \(concrete): \(r.status) \(r.body)")
            }
            for other in verbs where !methods.contains(other) {
                let r = try Self.request(other.uppercased(), "\(u)\(concrete)", json: other == "get" ? nil : "{}")
                #expect(r.status == 405, "\(other) \(concrete): \(r.status)")
                let allow = Set((r.headers["allow"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
                #expect(allow.subtracting(["head", "options"]) == Set(methods), "\(concrete): Allow \(allow), documented \(methods)")
            }
        }
        let served = Set(APIServer.routeNames)
        #expect(served == documented, "served, not documented: \(served.subtracting(documented)); documented, not served: \(documented.subtracting(served))")
        #expect(try Self.curl("\(u)/api/nothing").status == 404)
        _ = run.stop(signal: SIGINT, timeout: 30)
    }

    /// serve --http starts with no source and gets them by POST; a duplicate or a bad URI is
    /// refused and changes nothing; DELETE answers once the source's MP4 is finalized; the event
    /// stream names each source's steps, and a client reconnecting with Last-Event-ID gets what
    /// it missed.
    @Test func serveAddsAndRemovesSourcesOverHTTPWithTheirEvents() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = dir.appendingPathComponent("clip.mp4").path
        try ServeTests.makeClip(clip, seconds: 30)
        let template = dir.appendingPathComponent("t.pipeline").path
        try "uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=I420 ! identity sync=true ! lenspass ! x264enc tune=zerolatency speed-preset=ultrafast ! mp4mux ! filesink location=\(dir.path)/${NAME}.mp4\n"
            .write(toFile: template, atomically: true, encoding: .utf8)
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let serve = try Background.streamlens(["serve", "--http", "127.0.0.1:\(port)", template])
        try #require(Self.waitFor("\(u)/healthz", process: serve), "\(serve.stderr)")
        #expect(try Self.curl("\(u)/api/sources").body.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
        #expect(try Self.curl("\(u)/readyz").status == 200)
        let events = try Background(URL(fileURLWithPath: "/usr/bin/curl"), ["-sN", "\(u)/api/events"])
        usleep(300_000)

        let added = try Self.request("POST", "\(u)/api/sources", json: #"{"name":"cam1","uri":"file://\#(clip)"}"#)
        #expect(added.status == 201 && added.headers["location"] == "/api/sources/cam1" && added.object["state"] as? String == "playing", "\(added.status) \(added.body)")
        let twice = try Self.request("POST", "\(u)/api/sources", json: #"{"name":"cam1","uri":"file://\#(clip)"}"#)
        #expect(twice.status == 409 && (twice.object["error"] as? String ?? "").contains("exists already"), "\(twice.body)")
        for (body, words) in [(#"{"name":"cam2","uri":"not a uri"}"#, "holds a space"), (#"{"name":"cam 2","uri":"file:///x.mp4"}"#, "must be 1–64 letters"),
                              (#"{"name":"cam2"}"#, "needs \"name\" and \"uri\"")] {
            let r = try Self.request("POST", "\(u)/api/sources", json: body)
            #expect(r.status == 422 && (r.object["error"] as? String ?? "").contains(words), "\(body): \(r.status) \(r.body)")
        }
        let listed = try #require(try Self.curl("\(u)/api/sources").json as? [[String: Any]])
        #expect(listed.map { $0["name"] as? String } == ["cam1"], "\(listed)")
        // Frames go through before the source is removed.
        var frames = 0
        for _ in 0..<100 where frames < 30 {
            frames = (try Self.curl("\(u)/api/sources/cam1").object["frames"] as? Int) ?? 0
            usleep(100_000)
        }
        #expect(frames >= 30)
        let removed = try Self.request("DELETE", "\(u)/api/sources/cam1")
        #expect(removed.status == 200 && removed.object["state"] as? String == "ended", "\(removed.body)")
        // Answered once finalized: the file plays now, every frame that went through in it.
        let probe = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffprobe"), ["-v", "error", "-count_frames", "-select_streams", "v:0",
                                  "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", "\(dir.path)/cam1.mp4"], timeout: 60)
        #expect(probe.status == 0 && (Int(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) >= frames, "\(probe.stdout) \(probe.stderr)")
        #expect(try Self.curl("\(u)/api/sources").body.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
        #expect(try Self.request("DELETE", "\(u)/api/sources/cam1").status == 404)

        // A source that has ended is not ready: /readyz says which and why, until it is removed.
        let short = dir.appendingPathComponent("short.mp4").path
        let cut = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"), ["-v", "error", "-y", "-i", clip, "-t", "1", "-c", "copy", short], timeout: 60)
        try #require(cut.status == 0, "\(cut.stderr)")
        #expect(try Self.request("POST", "\(u)/api/sources", json: #"{"name":"brief","uri":"file://\#(short)"}"#).status == 201)
        var ready = try Self.curl("\(u)/readyz")
        for _ in 0..<100 where ready.status == 200 {
            usleep(100_000)
            ready = try Self.curl("\(u)/readyz")
        }
        let waiting = ready.object["not_playing"] as? [[String: Any]] ?? []
        #expect(ready.status == 503 && waiting.first?["name"] as? String == "brief" && waiting.first?["state"] as? String == "ended", "\(ready.body)")
        #expect(try Self.request("DELETE", "\(u)/api/sources/brief").status == 200)
        #expect(try Self.curl("\(u)/readyz").status == 200)

        // The stream: id and data lines, each event naming its source.
        #expect(events.waitFor("\"type\":\"source-removed\"", count: 2, in: \.stdout), "\(events.stdout)")
        let received = Self.sse(events.stdout)
        let cam1 = received.filter { $0.data["source"] as? String == "cam1" }.map { $0.data["type"] as? String ?? "" }
        #expect(cam1 == ["source-added", "source-playing", "source-ended", "source-removed"], "\(received)")
        let brief = received.filter { $0.data["source"] as? String == "brief" }.map { $0.data["type"] as? String ?? "" }
        #expect(brief == ["source-added", "source-playing", "source-ended", "source-removed"], "\(received)")
        #expect(received.map(\.id) == received.map(\.id).sorted() && Set(received.map(\.id)).count == received.count)
        // Reconnecting after the first: the rest again, from the replay window.
        let first = try #require(received.first?.id)
        let replay = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/curl"), ["-sN", "--max-time", "2", "-H", "Last-Event-ID: \(first)", "\(u)/api/events"], timeout: 20)
        #expect(Self.sse(replay.stdout).map(\.id) == received.dropFirst().map(\.id), "\(replay.stdout)")
        _ = events.stop(signal: SIGTERM)
        let r = serve.stop(signal: SIGINT, timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// The `id:`/`data:` pairs of an event stream.
    static func sse(_ text: String) -> [(id: Int, data: [String: Any])] {
        text.components(separatedBy: "\n\n").compactMap { block in
            var id: Int?, data: [String: Any]?
            for line in block.split(separator: "\n") {
                if line.hasPrefix("id: ") { id = Int(line.dropFirst(4)) }
                if line.hasPrefix("data: ") { data = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: Any] }
            }
            guard let id, let data else { return nil }
            return (id, data)
        }
    }

    /// The stages' events reach the event stream as they happen, each naming the source and the
    /// stage: lenstrack's new id for the astronaut's face, lenssnapshot's picture of it (its file
    /// written), lenszone's crossing.
    @Test func stageEventsReachTheEventStream() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = try ZoneStagesTests.crossingFaceClip(in: dir)
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        // The clip is played live (identity sync) so that the stream is open before the face crosses.
        let spec = "filesrc location=\(clip) ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! identity sync=true ! lensdetect model=Models/face-full-range.json threshold=0.5 draw=false ! lenstrack ! lenszone name=zones lines=mid:320,360,320,0 ! lenssnapshot on=track what=crop path=\(dir.path)/snaps/face-{id}.jpg ! fakesink"
        let run = try Background.streamlens(["run", "--http", "\(port)", spec])
        try #require(Self.waitFor("\(u)/healthz", process: run), "\(run.stderr)")
        let events = try Background(URL(fileURLWithPath: "/usr/bin/curl"), ["-sN", "\(u)/api/events?last-event-id=0"])
        #expect(events.waitFor("\"type\":\"crossed\"", in: \.stdout, timeout: 60), "\(events.stdout) \(run.stderr)")
        let received = Self.sse(events.stdout).map(\.data).filter { $0["source"] as? String == "main" }
        // The tracker's quality is ZoneStagesTests' to judge (one id for the face); here: every
        // new id, its snapshot and the crossing arrive, with their fields, in the order they happened.
        let types = received.compactMap { $0["type"] as? String }
        let tracks = received.filter { $0["type"] as? String == "track" }
        #expect(tracks.first?["object_id"] as? Int == 1 && tracks.allSatisfy { $0["stage"] as? String == "lenstrack0" && $0["label"] as? String == "face" }, "\(tracks)")
        let ids = tracks.compactMap { $0["object_id"] as? Int }
        let snapshots = received.filter { $0["type"] as? String == "snapshot" }
        #expect(snapshots.compactMap { $0["path"] as? String } == ids.map { "\(dir.path)/snaps/face-\($0).jpg" }, "\(snapshots)")
        let crossed = received.filter { $0["type"] as? String == "crossed" }
        #expect(crossed.count == 1 && crossed.first?["stage"] as? String == "zones" && crossed.first?["zone"] as? String == "mid"
                && crossed.first?["direction"] as? String == "in" && ids.contains(crossed.first?["object_id"] as? Int ?? -1), "\(crossed)")
        #expect(types.firstIndex(of: "track") ?? 99 < types.firstIndex(of: "snapshot") ?? -1 && types.firstIndex(of: "snapshot") ?? 99 < types.firstIndex(of: "crossed") ?? -1, "\(types)")
        _ = events.stop(signal: SIGTERM)
        #expect(run.waitForExit(timeout: 60))
        for id in ids { #expect(FileManager.default.fileExists(atPath: "\(dir.path)/snaps/face-\(id).jpg")) }
    }

    /// Beyond loopback a token is required to start; with one, every request without it or with
    /// a wrong one gets 401 (loopback clients too), the right one 200.
    @Test func aTokenIsRequiredBeyondLoopbackAndThenOfEveryone() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let port = freeLoopbackPort()
        let refused = try CLI.run(["run", "--http", "0.0.0.0:\(port)", "\(Self.live) ! fakesink"], timeout: 30)
        #expect(refused.status == 2 && refused.stderr.contains("streamlens: --http 0.0.0.0:\(port) listens beyond this machine: give a bearer token with --http-token-file FILE"), "\(refused.stderr)")
        let tokenFile = dir.appendingPathComponent("token").path
        try "s3cret-Token_42\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let run = try Background.streamlens(["run", "--http", "0.0.0.0:\(port)", "--http-token-file", tokenFile, "\(Self.live) ! fakesink"])
        let u = "http://127.0.0.1:\(port)"
        try #require(Self.waitFor("\(u)/healthz", headers: ["Authorization: Bearer s3cret-Token_42"], process: run), "\(run.stderr)")
        // Kubernetes' probes cannot send a token: /healthz and /readyz answer without one,
        // and then say only alive or ready, never which sources (with the token, readyz does).
        let probe = try Self.curl("\(u)/healthz", timeout: 5)
        #expect(probe.status == 200 && probe.body.trimmingCharacters(in: .whitespacesAndNewlines) == #"{"alive":true}"#, "\(probe.status) \(probe.body)")
        let ready = try Self.curl("\(u)/readyz", timeout: 5)
        #expect(ready.status == 200 && ready.body.trimmingCharacters(in: .whitespacesAndNewlines) == #"{"ready":true}"#, "\(ready.status) \(ready.body)")
        let readyWithToken = try Self.curl("\(u)/readyz", headers: ["Authorization: Bearer s3cret-Token_42"], timeout: 5)
        #expect(readyWithToken.body.contains(#""sources":["#), "\(readyWithToken.body)")
        for path in ["/api/sources", "/metrics", "/api/events", "/nothing"] {
            let none = try Self.curl("\(u)\(path)", timeout: 5)
            #expect(none.status == 401 && none.headers["www-authenticate"]?.hasPrefix("Bearer") == true, "\(path): \(none.status)")
            for wrong in ["Bearer s3cret-Token_4", "Bearer s3cret-Token_42x", "Bearer S3cret-Token_42", "Basic s3cret-Token_42", "Bearer "] {
                #expect(try Self.curl("\(u)\(path)", headers: ["Authorization: \(wrong)"], timeout: 5).status == 401, "\(path) \(wrong)")
            }
        }
        #expect(try Self.curl("\(u)/api/sources", headers: ["Authorization: Bearer s3cret-Token_42"]).status == 200)
        _ = run.stop(signal: SIGINT, timeout: 30)
        // An empty token file is refused, saying so.
        try "\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let empty = try CLI.run(["run", "--http", "0.0.0.0:\(port)", "--http-token-file", tokenFile, "\(Self.live) ! fakesink"], timeout: 30)
        #expect(empty.status == 2 && empty.stderr.contains("is empty: write the token in it"), "\(empty.stderr)")
    }

    /// PATCH answers 2xx only for a value the stage takes: its own check runs first (a picture
    /// that is not there or does not decode, a reason that is not a word, a control character
    /// anywhere), and a refused value is 422 with the stage's reason, nothing set, GET reading
    /// back what the stage uses. The control socket refuses the same.
    @Test func aPatchIsAnsweredOnlyForAValueTheStageTakes() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let picture = dir.appendingPathComponent("back.png").path
        _ = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/gst-launch-1.0"),
                          ["-q", "videotestsrc", "num-buffers=1", "!", "video/x-raw,width=64,height=48", "!", "pngenc", "!", "filesink", "location=\(picture)"])
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let socket = dir.appendingPathComponent("control.sock").path
        let run = try Background.streamlens(["run", "--http", "\(port)", "--control", socket,
                                             "\(Self.live) ! lensblur name=blur ! tee name=t t. ! queue ! fakesink t. ! queue ! videoconvert ! x264enc tune=zerolatency speed-preset=ultrafast ! h264parse ! lensrecord name=rec on=none location=\(dir.path)/clip-{event}-%03d.mp4 ! fakesink"])
        try #require(Self.waitFor("\(u)/readyz", process: run), "not ready: \(run.stderr)")
        let stage = "\(u)/api/sources/main/stages/blur"
        for (value, words) in [("/nonexistent/picture.png", "no such picture file"), ("Package.swift", "cannot be decoded as a picture"),
                               ("#12345", "is not a #rrggbb colour"), ("/tmp\nerror: forged", "control character")] {
            let body = String(decoding: try JSONSerialization.data(withJSONObject: ["replace": value]), as: UTF8.self)
            let r = try Self.request("PATCH", stage, json: body)
            #expect(r.status == 422 && (r.object["error"] as? String ?? "").contains(words) && r.object["property"] as? String == "replace",
                    "\(value.debugDescription): \(r.status) \(r.body)")
            #expect(Self.properties(try Self.curl(stage))["replace"]?["value"] as? String == "", "after refusing \(value.debugDescription)")
        }
        // A good one is taken, and reads back.
        let good = try Self.request("PATCH", stage, json: "{\"replace\": \"\(picture)\"}")
        #expect(good.status == 200 && Self.properties(good)["replace"]?["value"] as? String == picture, "\(good.status) \(good.body)")
        // A clip's reason is a word: a line break would forge a log line and a file name.
        let forged = try Self.request("PATCH", "\(u)/api/sources/main/stages/rec", json: #"{"record": "x\nerror: forged"}"#)
        #expect(forged.status == 422 && (forged.object["error"] as? String ?? "").contains("control character"), "\(forged.body)")
        let sentence = try Self.request("PATCH", "\(u)/api/sources/main/stages/rec", json: #"{"record": "two words"}"#)
        #expect(sentence.status == 422 && (sentence.object["error"] as? String ?? "").contains("a reason is at most 64 letters"), "\(sentence.body)")
        #expect(try Self.request("POST", "\(u)/api/sources/main/keys", json: #"{"key": "\u001b"}"#).status == 422)
        // The control socket refuses the same, through the same check.
        let control = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw")
            f.write("set blur replace=/etc/shadow\\n"); f.flush(); print(f.readline().strip())
            """, socket], timeout: 30)
        #expect(control.stdout.contains("error: blur:") && control.stdout.contains("cannot be decoded as a picture"), "\(control.stdout)")
        #expect(Self.properties(try Self.curl(stage))["replace"]?["value"] as? String == picture)
        _ = run.stop(signal: SIGINT, timeout: 30)
        #expect(!run.stderr.contains("forged"), "\(run.stderr)")
    }

    /// A flood of starts that never finish (UDP sources nobody sends to): at most
    /// `SourceSet.maxStarting` start at once, the rest are answered 503 with Retry-After at
    /// once, and while those four wait for their start timeout the other requests (health, the
    /// list, a DELETE of a name that is not there) are answered, not held behind them; the
    /// process's threads stay bounded (60 such POSTs used to hold the API for a minute and grow
    /// 160 threads).
    @Test func aFloodOfStartsWaitsItsTurn() throws {
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let serve = try Background.streamlens(["serve", "--timeout", "8", "--http", "127.0.0.1:\(port)",
                                               "uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=BGRx ! lenspass ! fakesink"])
        try #require(Self.waitFor("\(u)/healthz", process: serve), "\(serve.stderr)")
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let base = freeLoopbackPort()
        let posts = try (1...20).map { i in
            try Background(URL(fileURLWithPath: "/usr/bin/curl"), ["-s", "-D", dir.appendingPathComponent("h\(i)").path, "-o", "/dev/null", "-w", "%{http_code}",
                                                                  "--max-time", "60", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary",
                                                                  #"{"name":"f\#(i)","uri":"udp://127.0.0.1:\#(base + i)"}"#, "\(u)/api/sources"])
        }
        // While the admitted ones are starting, everything else is answered.
        var starting: [[String: Any]] = []
        for _ in 0..<100 where starting.count < SourceSet.maxStarting {
            starting = ((try Self.curl("\(u)/api/sources", timeout: 10).json as? [[String: Any]]) ?? []).filter { $0["state"] as? String == "starting" }
            usleep(50_000)
        }
        #expect(starting.count == SourceSet.maxStarting, "\(starting)")
        #expect(try Self.curl("\(u)/healthz", timeout: 10).status == 200)
        #expect(try Self.request("DELETE", "\(u)/api/sources/nosuch", timeout: 10).status == 404)
        let stillStarting = ((try Self.curl("\(u)/api/sources", timeout: 10).json as? [[String: Any]]) ?? []).filter { $0["state"] as? String == "starting" }
        #expect(stillStarting.count == SourceSet.maxStarting, "the others were answered while the starts were still waiting")
        let threads = try String(contentsOfFile: "/proc/\(serve.pid)/status", encoding: .utf8).split(separator: "\n")
            .first { $0.hasPrefix("Threads:") }.flatMap { Int($0.dropFirst(8).trimmingCharacters(in: .whitespaces)) } ?? 0
        #expect(threads > 0 && threads <= 60, "\(threads) threads")
        var codes: [String: Int] = [:]
        for (i, post) in posts.enumerated() {
            #expect(post.waitForExit(timeout: 60), "POST \(i + 1) unanswered")
            codes[post.stdout, default: 0] += 1
            if post.stdout == "503" {
                let head = (try? String(contentsOfFile: dir.appendingPathComponent("h\(i + 1)").path, encoding: .utf8)) ?? ""
                #expect(head.lowercased().contains("retry-after: 2"), "\(head)")
            }
        }
        #expect(codes == ["422": SourceSet.maxStarting, "503": 20 - SourceSet.maxStarting], "\(codes)")
        _ = serve.stop(signal: SIGINT, timeout: 30)
    }

    /// curl run as another user of this machine (`nobody`, through setpriv: needs root): the
    /// status of one request.
    static func statusAsNobody(_ method: String, _ url: String, json: String? = nil, headers: [String] = []) throws -> Int {
        var args = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                    "--max-time", "10", "-X", method]
        if let json { args += ["-H", "Content-Type: application/json", "--data-binary", json] }
        for h in headers { args += ["-H", h] }
        return Int(try CLI.spawn(URL(fileURLWithPath: "/usr/bin/setpriv"), args + [url], timeout: 20).stdout) ?? 0
    }

    /// On loopback without a token only the server's own user (and root) is served: another
    /// local user gets 401 on every route, its POST starts nothing (it could otherwise have
    /// the server read a file it may not: a source's pixels come back as JPEGs). With a token,
    /// whoever holds it is served, and no one without it.
    @Test(.enabled(if: getuid() == 0, "switching to another user (nobody) needs root"))
    func anotherLocalUserIsServedOnlyWithTheToken() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let template = "uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=BGRx ! lenspass ! fakesink"
        let serve = try Background.streamlens(["serve", "--http", "127.0.0.1:\(port)", template])
        try #require(Self.waitFor("\(u)/healthz", process: serve), "\(serve.stderr)")
        #expect(try Self.curl("\(u)/api/sources").status == 200)
        for path in ["/healthz", "/api/sources", "/metrics", "/api/events", "/", "/console/console.js"] {
            #expect(try Self.statusAsNobody("GET", "\(u)\(path)") == 401, "nobody GET \(path)")
        }
        #expect(try Self.statusAsNobody("POST", "\(u)/api/sources", json: #"{"name":"peek","uri":"file:///etc/hostname"}"#) == 401)
        let refused = try Self.request("GET", "\(u)/api/sources")
        #expect(refused.body.trimmingCharacters(in: .whitespacesAndNewlines) == "[]", "nobody's POST started a source: \(refused.body)")
        // The message a refused user reads, over IPv6's loopback too.
        _ = serve.stop(signal: SIGINT, timeout: 30)
        let v6 = try Background.streamlens(["serve", "--http", "[::1]:\(port)", template])
        try #require(Self.waitFor("http://[::1]:\(port)/healthz", process: v6), "\(v6.stderr)")
        #expect(try Self.statusAsNobody("GET", "http://[::1]:\(port)/api/sources") == 401)
        _ = v6.stop(signal: SIGINT, timeout: 30)

        let tokenFile = dir.appendingPathComponent("token").path
        try "k3y-\(UInt32.random(in: 0...UInt32.max))\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let token = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let tokened = try Background.streamlens(["serve", "--http", "127.0.0.1:\(port)", "--http-token-file", tokenFile, template])
        try #require(Self.waitFor("\(u)/healthz", headers: ["Authorization: Bearer \(token)"], process: tokened), "\(tokened.stderr)")
        #expect(try Self.statusAsNobody("GET", "\(u)/api/sources") == 401)
        #expect(try Self.statusAsNobody("GET", "\(u)/api/sources", headers: ["Authorization: Bearer \(token)"]) == 200)
        #expect(try Self.curl("\(u)/api/sources").status == 401, "with a token, its own user needs it too")
        _ = tokened.stop(signal: SIGINT, timeout: 30)
    }

    /// No CORS unless an origin is allowed: a page of another origin is refused (403, no
    /// Access-Control header: the browser would not show it the answer anyway, and the request
    /// did nothing); the allowed origin gets its header and a preflight answer.
    @Test func otherOriginsAreRefusedUnlessAllowed() throws {
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let run = try Background.streamlens(["run", "--http", "\(port)", "--http-allow-origin", "https://dash.example.com",
                                             "\(Self.live) ! lensblur name=hide ! fakesink"])
        try #require(Self.waitFor("\(u)/readyz", process: run), "\(run.stderr)")
        let evil = try Self.request("PATCH", "\(u)/api/sources/main/stages/hide", json: #"{"margin": 1.5}"#, headers: ["Origin: https://evil.example.com"])
        #expect(evil.status == 403 && evil.headers["access-control-allow-origin"] == nil, "\(evil.status) \(evil.headers)")
        // A "simple" cross-site form post (no preflight in a browser) is refused too.
        let form = try Self.request("POST", "\(u)/api/sources", headers: ["Origin: https://evil.example.com", "Content-Type: text/plain"])
        #expect(form.status == 403)
        #expect(Self.properties(try Self.curl("\(u)/api/sources/main/stages/hide"))["margin"]?["value"] as? Double == 0.15)
        let allowed = try Self.curl("\(u)/api/sources", headers: ["Origin: https://dash.example.com"])
        #expect(allowed.status == 200 && allowed.headers["access-control-allow-origin"] == "https://dash.example.com")
        let preflight = try Self.request("OPTIONS", "\(u)/api/sources/main/stages/hide", headers: ["Origin: https://dash.example.com", "Access-Control-Request-Method: PATCH"])
        #expect(preflight.status == 204 && (preflight.headers["access-control-allow-methods"] ?? "").contains("PATCH")
                && (preflight.headers["access-control-allow-headers"] ?? "").contains("Authorization"), "\(preflight.headers)")
        let same = try Self.curl("\(u)/api/sources", headers: ["Origin: http://127.0.0.1:\(port)"])
        #expect(same.status == 200 && same.headers["access-control-allow-origin"] == nil)
        // DNS rebinding: a page of evil.example.com whose name now points at 127.0.0.1 is
        // same-origin with itself; its Host header gives it away.
        let rebound = try Self.request("PATCH", "\(u)/api/sources/main/stages/hide", json: #"{"margin": 1.5}"#,
                                       headers: ["Host: evil.example.com:\(port)", "Origin: http://evil.example.com:\(port)"])
        #expect(rebound.status == 403 && (rebound.object["error"] as? String ?? "").contains("not this machine's loopback name"), "\(rebound.body)")
        #expect(try Self.curl("\(u)/api/sources", headers: ["Host: localhost:\(port)"]).status == 200)
        #expect(Self.properties(try Self.curl("\(u)/api/sources/main/stages/hide"))["margin"]?["value"] as? Double == 0.15)
        _ = run.stop(signal: SIGINT, timeout: 30)
    }

    /// Hostile clients cost their own requests only: while 300 idle connections, 8 clients
    /// trickling a request a byte at a time, a flood of 2,000 short connections, a body too large,
    /// a head too large, a chunked body and clients hanging up mid-request and mid-stream come at
    /// once, the pipeline's frames keep flowing and the API keeps answering; the tricklers are
    /// closed at the request deadline (10 s).
    @Test func hostileClientsCostOnlyTheirOwnRequests() throws {
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let run = try Background.streamlens(["run", "--http", "\(port)", "\(Self.live) ! lenspass name=p ! fakesink"])
        try #require(Self.waitFor("\(u)/readyz", process: run), "\(run.stderr)")
        let script = """
            import socket, sys, threading, time, json, urllib.request
            port = int(sys.argv[1]); stop = threading.Event(); out = {}
            def connect(): return socket.create_connection(("127.0.0.1", port), timeout=20)
            def status(raw):
                s = connect(); s.sendall(raw); data = b""
                try:
                    while True:
                        d = s.recv(65536)
                        if not d: break
                        data += d
                        if b"\\r\\n\\r\\n" in data and raw.startswith(b"POST"): break
                except OSError: pass
                s.close(); return data.split(b" ")[1].decode() if data else "closed"
            idle = [connect() for _ in range(300)]
            trickled = []
            def trickle():
                s = connect(); t0 = time.time()
                try:
                    for b in b"GET /api/sources HTTP/1.1\\r\\nX-Slow: " + b"a" * 100000:
                        s.send(bytes([b])); time.sleep(0.5)
                except OSError: pass
                trickled.append(time.time() - t0)
            threads = [threading.Thread(target=trickle) for _ in range(8)]
            for t in threads: t.start()
            def flood():
                n = 0
                while not stop.is_set() and n < 2000:
                    try: s = connect(); s.sendall(b"GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"); s.close(); n += 1
                    except OSError: pass
                out["flood"] = n
            f = threading.Thread(target=flood); f.start()
            out["big body"] = status(b"POST /api/sources HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nContent-Length: 10000000\\r\\n\\r\\n")
            out["big head"] = status(b"GET /api/sources HTTP/1.1\\r\\nHost: x\\r\\nX-Big: " + b"a" * 200000 + b"\\r\\n\\r\\n")
            out["chunked"] = status(b"POST /api/sources HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\n")
            for _ in range(20):
                s = connect(); s.sendall(b"GET /api/sources HTTP/1.1\\r\\nHost"); s.close()
                s = connect(); s.sendall(b"GET /api/events HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"); s.recv(10); s.close()
            # While all that goes on: the API answers, the frames keep coming.
            answers = []
            for _ in range(10):
                t0 = time.time()
                with urllib.request.urlopen("http://127.0.0.1:%d/api/sources/main" % port, timeout=20) as r: body = json.load(r)
                answers.append((time.time() - t0, body["frames"])); time.sleep(0.3)
            out["api seconds max"] = round(max(a for a, _ in answers), 3)
            out["frames during"] = answers[-1][1] - answers[0][1]
            for t in threads: t.join(60)
            stop.set(); f.join(60)
            out["trickled seconds"] = sorted(round(t, 1) for t in trickled)
            for s in idle: s.close()
            print(json.dumps(out))
            """
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", script, String(port)], timeout: 240)
        let out = try #require(try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "\(r.stdout) \(r.stderr)")
        #expect(out["big body"] as? String == "413" && out["chunked"] as? String == "411", "\(out)")
        #expect(out["big head"] as? String == "400" || out["big head"] as? String == "closed", "\(out)")
        #expect((out["flood"] as? Int ?? 0) == 2000, "\(out)")
        // 10 s bounded wait per trickler, generously bounded above (a busy core).
        let trickled = out["trickled seconds"] as? [Double] ?? []
        #expect(trickled.count == 8 && trickled.allSatisfy { $0 >= 9 && $0 < 30 }, "\(out)")
        // 3 s of requests at 30 fps: the frames went on (at least half of them).
        #expect((out["frames during"] as? Int ?? 0) >= 40, "\(out)")
        #expect((try Self.curl("\(u)/api/sources")).status == 200)
        let stopped = run.stop(signal: SIGINT, timeout: 30)
        #expect(stopped.status == 0, "\(stopped.stderr)")
    }
}
