import Foundation
import StreamLensTesting
import Synchronization
import Testing

/// The console (`/`) and the video for browsers, in a real browser: Debian's chromium, headless,
/// driven by Selenium (Tests/Browser/console_browser.py, which does what a person would in the
/// page and reports what the browser saw); MJPEG and the login through curl.
@Suite(.serialized) struct ConsoleTests {
    static let python = CLI.packageRoot.appendingPathComponent(".deps/browser-venv/bin/python")
    static let script = CLI.packageRoot.appendingPathComponent("Tests/Browser/console_browser.py").path
    static let astronaut = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path
    /// The seed app's picture: a still photo as a live 30 fps camera.
    static let camera = "filesrc location=\(astronaut) ! pngdec ! imagefreeze is-live=true ! videoconvert ! video/x-raw,format=BGRx,width=512,height=512,framerate=30/1"

    static func browser(_ args: [String], timeout: Double = 240) throws -> [String: Any] {
        try #require(FileManager.default.isExecutableFile(atPath: python.path), "no Selenium: run make setup (tools/setup.sh step 7)")
        let r = try CLI.spawn(python, [script] + args, environment: ProcessInfo.processInfo.environment, timeout: timeout * CLI.slowdown)
        try #require(r.status == 0, "the browser scenario failed: \(r.stderr.suffix(1500))")
        let line = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(r.stdout)")
    }

    /// Where the detector finds the face in the photo: its own metadata (one frame, no video path).
    static func faceBox() throws -> (x0: Int, y0: Int, x1: Int, y1: Int) {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("m.jsonl").path
        let r = try CLI.run(["run", "-q", "filesrc location=\(astronaut) ! pngdec ! imagefreeze num-buffers=2 ! videoconvert ! video/x-raw,format=BGRx,width=512,height=512,framerate=30/1 ! lensdetect metadata=\(file) ! fakesink"], timeout: 120)
        try #require(r.status == 0, "\(r.stderr)")
        let first = try #require(try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").first)
        let frame = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
        let d = try #require((frame["detections"] as? [[String: Any]])?.first, "no face found: \(first)")
        let x = d["x"] as? Double ?? 0, y = d["y"] as? Double ?? 0, w = d["width"] as? Double ?? 0, h = d["height"] as? Double ?? 0
        return (Int(x.rounded()), Int(y.rounded()), Int((x + w).rounded()), Int((y + h).rounded()))
    }

    /// `run --http`: the page plays the pipeline's video over WebRTC at the source's size, with
    /// no console error; the detector's box shows in the browser's picture where the face is;
    /// moving the strength slider changes the stage's property (read back by the API) and the
    /// picture; a preview window's key does what it does there; the tile shows the zone's
    /// counts and the event feed a snapshot's picture; the styles show as pictures; four viewers share one encoder; a WHEP session ends
    /// by DELETE of its Location.
    @Test func thePagePlaysTheVideoWithItsBoxesAndItsSliderChangesTheStyle() throws {
        let box = try Self.faceBox()
        let thickness = 8
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let run = try Background.streamlens(["run", "--http", "\(port)", "\(Self.camera) ! lensdetect name=faces color=#ff00ff thickness=\(thickness) ! lenstrack "
            + "! lenszone lines=door:0.5,0,0.5,1 ! lenssnapshot on=interval interval=2 what=crop path=\(dir.path)/snap-{n}.jpg "
            + "! lensstylize name=style model=Models/mosaic.json strength=0 ! fakesink"])
        try #require(HTTPAPITests.waitFor("\(u)/readyz", timeout: 120, process: run), "not ready: \(run.stderr)")
        let shot = CLI.packageRoot.appendingPathComponent(".build/console-test.png").path
        let seen = try Self.browser(["watch", u, "\(box.x0)", "\(box.y0)", "\(box.x1)", "\(box.y1)", "\(thickness)", shot])
        #expect(seen["width"] as? Int == 512 && seen["height"] as? Int == 512, "\(seen)")
        // Frames decoded advance (30 fps source; a busy machine may show fewer).
        #expect((seen["frames_in_2s"] as? Int ?? 0) >= 15, "\(seen)")
        #expect(seen["paused"] as? Bool == false)
        // The box's edges are the box's colour (#ff00ff, through VP8); the face inside is not.
        func magenta(_ key: String) -> Bool {
            guard let p = seen[key] as? [Int], p.count == 3 else { return false }
            return p[0] > 180 && p[1] < 90 && p[2] > 180
        }
        #expect(magenta("top_edge") && magenta("left_edge"), "box edges \(seen["top_edge"] ?? "-") \(seen["left_edge"] ?? "-") at \(box)")
        #expect(!magenta("face_middle"), "\(seen["face_middle"] ?? "-")")
        // The slider: strength 0 → 1 by the keyboard; the API reads 1 back; the picture changed.
        #expect(seen["slider_before"] as? String == "0" && seen["slider_after"] as? String == "1", "\(seen)")
        #expect(seen["strength_after_slider"] as? Double == 1.0, "\(seen)")
        // The preview window's keys work on the page: "-" lowered the strength by 0.1.
        #expect(seen["strength_after_key"] as? Double == 0.9, "\(seen)")
        let stage = try HTTPAPITests.curl("\(u)/api/sources/main/stages/style")
        #expect((HTTPAPITests.properties(stage)["strength"]?["value"] as? Double) == 0.9, "\(stage.body.prefix(300))")
        #expect((seen["picture_change"] as? Double ?? 0) > 15, "mean grey change \(seen["picture_change"] ?? "-") of 255")
        // lensstylize's four default styles, each a picture.
        let thumbnails = seen["thumbnails"] as? [Int] ?? []
        #expect(thumbnails.count == 4 && thumbnails.allSatisfy { $0 > 0 }, "\(thumbnails)")
        // Four viewers, one encoder: frames encoded a second at most the rate frames reach the
        // point (the last stage's), not four times it.
        let rate = seen["encoded_per_second"] as? Double ?? 0, reaching = seen["last_stage_fps"] as? Double ?? 0
        #expect(rate > 1 && rate <= reaching * 1.25 + 2, "\(rate) frames encoded a second for 4 viewers; \(reaching) reach the point")
        // WHEP: 201, an SDP answer with the server's candidates, a Location that DELETE ends.
        let whep = seen["whep"] as? [Any] ?? []
        #expect(whep.count == 5 && whep[0] as? Int == 201 && whep[1] as? String == "application/sdp" && whep[2] as? Bool == true && whep[4] as? Int == 200, "\(whep)")
        if let location = whep.count == 5 ? whep[3] as? String : nil {
            #expect(try HTTPAPITests.request("DELETE", "\(u)\(location)").status == 404, "a session ends once")
        }
        // The zone's counts on the tile; a snapshot's picture in the event feed.
        #expect((seen["zones"] as? String ?? "").contains("door"), "\(seen["zones"] ?? "-")")
        #expect((seen["snapshot_picture_width"] as? Int ?? 0) > 0, "\(seen)")
        #expect((seen["severe"] as? [String] ?? ["?"]).isEmpty, "console errors: \(seen["severe"] ?? "-")")
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// `serve --http`: a tile per source; a source added by the page's form gets a tile that
    /// plays; removing a source by its tile's button removes the tile and the source.
    @Test func tilesFollowTheSourcesAddedAndRemovedInThePage() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = dir.appendingPathComponent("clip.mp4").path
        try ServeTests.makeClip(clip, seconds: 120)
        let template = dir.appendingPathComponent("t.pipeline").path
        try "uridecodebin uri=${URI} ! videoconvert ! video/x-raw,format=BGRx ! identity sync=true ! lenspass ! fakesink\n".write(toFile: template, atomically: true, encoding: .utf8)
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let serve = try Background.streamlens(["serve", "--http", "127.0.0.1:\(port)", template])
        try #require(HTTPAPITests.waitFor("\(u)/healthz", process: serve), "\(serve.stderr)")
        for name in ["door", "yard"] {
            let added = try HTTPAPITests.request("POST", "\(u)/api/sources", json: #"{"name":"\#(name)","uri":"file://\#(clip)"}"#)
            try #require(added.status == 201, "\(added.body)")
        }
        let seen = try Self.browser(["tiles", u, "gate", "file://\(clip)", "door", CLI.packageRoot.appendingPathComponent(".build/console-tiles.png").path])
        #expect(seen["tiles_at_start"] as? [String] == ["door", "yard"], "\(seen)")
        #expect(seen["tiles_after_add"] as? [String] == ["door", "gate", "yard"], "\(seen)")
        #expect(seen["added_video_width"] as? Int == 320, "\(seen)")
        #expect(seen["tiles_after_remove"] as? [String] == ["gate", "yard"], "\(seen)")
        let listed = try #require(try HTTPAPITests.curl("\(u)/api/sources").json as? [[String: Any]])
        #expect(listed.compactMap { $0["name"] as? String }.sorted() == ["gate", "yard"])
        #expect((seen["severe"] as? [String] ?? ["?"]).isEmpty, "console errors: \(seen["severe"] ?? "-")")
        let r = serve.stop(signal: SIGINT, timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// The same page in Firefox (Debian's firefox-esr, headless, through Marionette): it plays
    /// the video at the source's size, with no uncaught error.
    @Test func firefoxPlaysTheVideoToo() throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/firefox-esr"), "no firefox-esr: run make setup")
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let run = try Background.streamlens(["run", "--http", "\(port)", "\(Self.camera) ! lensdetect ! fakesink"])
        try #require(HTTPAPITests.waitFor("\(u)/readyz", timeout: 120, process: run), "not ready: \(run.stderr)")
        let seen = try Self.browser(["firefox", u, CLI.packageRoot.appendingPathComponent(".build/console-firefox.png").path])
        #expect((seen["agent"] as? String ?? "").contains("Firefox"), "\(seen)")
        #expect(seen["width"] as? Int == 512 && seen["height"] as? Int == 512, "\(seen)")
        #expect((seen["advanced"] as? Double ?? 0) > 1, "\(seen)")
        #expect((seen["errors"] as? [String] ?? ["?"]).isEmpty, "\(seen)")
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// MJPEG for <img>, curl and VLC: multipart/x-mixed-replace, JPEG parts of the source's
    /// size, at most the rate asked for; a bad rate or point is refused.
    @Test func mjpegStreamsJPEGPartsAtTheRateAskedFor() throws {
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let run = try Background.streamlens(["run", "--http", "\(port)", "\(Self.camera) ! lenspass name=before ! videoscale ! video/x-raw,width=256,height=256 ! lenspass ! fakesink"])
        try #require(HTTPAPITests.waitFor("\(u)/readyz", timeout: 120, process: run), "not ready: \(run.stderr)")
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        for (query, width, most) in [("fps=5", 256, 5 * 4 + 2), ("at=before&fps=30", 512, 30 * 4 + 2)] {
            let file = dir.appendingPathComponent("mjpeg").path, head = dir.appendingPathComponent("head").path
            _ = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/curl"), ["-s", "--max-time", "4", "-D", head, "-o", file, "\(u)/api/sources/main/mjpeg?\(query)"], timeout: 30)
            let headers = try String(contentsOfFile: head, encoding: .utf8).lowercased()
            #expect(headers.contains("content-type: multipart/x-mixed-replace; boundary=streamlensframe"), "\(headers)")
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
            let parts = Self.jpegParts(bytes)
            #expect(parts.count >= 4 && parts.count <= most, "\(query): \(parts.count) pictures in 4 s")
            #expect(parts.allSatisfy { Self.jpegSize($0)?.width == width && Self.jpegSize($0)?.height == width }, "\(query): sizes \(parts.prefix(3).map { Self.jpegSize($0).map { "\($0)" } ?? "?" })")
        }
        #expect(try HTTPAPITests.curl("\(u)/api/sources/main/mjpeg?fps=0").status == 422)
        let nowhere = try HTTPAPITests.curl("\(u)/api/sources/main/mjpeg?at=nothing")
        #expect(nowhere.status == 404 && nowhere.body.contains("no element named nothing"), "\(nowhere.body)")
        #expect(try HTTPAPITests.curl("\(u)/api/sources/other/mjpeg").status == 404)
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// The JPEGs of a multipart body (SOI … EOI, by its Content-Length headers).
    static func jpegParts(_ bytes: [UInt8]) -> [[UInt8]] {
        var parts: [[UInt8]] = []
        let text = String(decoding: bytes, as: UTF8.self)
        _ = text
        var i = 0
        while i + 4 < bytes.count {
            // "Content-Length: N\r\n\r\n" then N bytes.
            guard let r = Self.find(Array("Content-Length: ".utf8), in: bytes, from: i) else { break }
            var j = r + 16, n = 0
            while j < bytes.count, bytes[j] >= 48, bytes[j] <= 57 { n = n * 10 + Int(bytes[j] - 48); j += 1 }
            let start = j + 4
            guard start + n <= bytes.count else { break }
            parts.append(Array(bytes[start..<start + n]))
            i = start + n
        }
        return parts
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8], from: Int) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        var i = from
        while i <= bytes.count - needle.count {
            if bytes[i] == needle[0], Array(bytes[i..<i + needle.count]) == needle { return i }
            i += 1
        }
        return nil
    }

    /// Width and height from a JPEG's SOF marker.
    static func jpegSize(_ j: [UInt8]) -> (width: Int, height: Int)? {
        guard j.count > 4, j[0] == 0xFF, j[1] == 0xD8 else { return nil }
        var i = 2
        while i + 9 < j.count {
            guard j[i] == 0xFF else { return nil }
            let marker = j[i + 1], length = Int(j[i + 2]) << 8 | Int(j[i + 3])
            if (0xC0...0xC3).contains(marker) { return (Int(j[i + 7]) << 8 | Int(j[i + 8]), Int(j[i + 5]) << 8 | Int(j[i + 6])) }
            i += 2 + length
        }
        return nil
    }

    /// Beyond loopback the page is a login form; the token posted to it gives an HTTP-only
    /// session cookie that the API takes as it takes the bearer token; a wrong one gives none.
    @Test func theLoginFormGivesAnHTTPOnlySessionCookie() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let tokenFile = dir.appendingPathComponent("token").path
        try "console-Token_7\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let run = try Background.streamlens(["run", "--http", "0.0.0.0:\(port)", "--http-token-file", tokenFile, "\(HTTPAPITests.live) ! lenspass ! fakesink"])
        try #require(HTTPAPITests.waitFor("\(u)/healthz", headers: ["Authorization: Bearer console-Token_7"], process: run), "\(run.stderr)")
        let page = try HTTPAPITests.curl("\(u)/", headers: ["Accept: text/html"])
        #expect(page.status == 200 && page.body.contains("data-page=\"login\"") && page.body.contains("name=\"token\""), "\(page.body.prefix(300))")
        #expect(try HTTPAPITests.curl("\(u)/console/console.js").status == 200)
        #expect(try HTTPAPITests.curl("\(u)/api/sources").status == 401)
        func login(_ token: String) throws -> HTTPAPITests.Answer {
            let dir = try scratchDirectory()
            defer { try? FileManager.default.removeItem(at: dir) }
            let head = dir.appendingPathComponent("h").path
            _ = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/curl"), ["-s", "-D", head, "-o", "/dev/null", "-H", "Origin: \(u)", "--data-urlencode", "token=\(token)", "\(u)/api/login"], timeout: 30)
            var headers: [String: String] = [:], status = 0
            for line in try String(contentsOfFile: head, encoding: .utf8).split(separator: "\r\n") {
                if line.hasPrefix("HTTP/") { status = Int(line.split(separator: " ")[1]) ?? 0 }
                if let colon = line.firstIndex(of: ":") { headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces) }
            }
            return HTTPAPITests.Answer(status: status, headers: headers, body: "")
        }
        let wrong = try login("console-Token_8")
        #expect(wrong.status == 303 && wrong.headers["location"] == "/?failed=1" && wrong.headers["set-cookie"] == nil, "\(wrong.headers)")
        let right = try login("console-Token_7")
        let cookie = right.headers["set-cookie"] ?? ""
        #expect(right.status == 303 && right.headers["location"] == "/" && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "\(right.headers)")
        #expect(!cookie.contains("console-Token_7"), "the cookie is not the token")
        let session = String(cookie.split(separator: ";").first ?? "")
        #expect(try HTTPAPITests.curl("\(u)/api/sources", headers: ["Cookie: \(session)"]).status == 200)
        let console = try HTTPAPITests.curl("\(u)/", headers: ["Accept: text/html", "Cookie: \(session)"])
        #expect(console.body.contains("id=\"grid\""), "\(console.body.prefix(300))")
        #expect(try HTTPAPITests.curl("\(u)/api/sources", headers: ["Cookie: \(session)x"]).status == 401)
        #expect(try HTTPAPITests.curl("\(u)/api/sources", headers: ["Cookie: streamlens_session="]).status == 401)
        _ = run.stop(signal: SIGINT, timeout: 30)
    }
}

/// Hostile WHEP peers: offers that are not SDP, or are SDP webrtcbin cannot answer, are refused
/// with a 4xx and a message; viewers beyond the limit get 503; sessions whose peer never
/// connects are ended by the server (and make room again); the video goes on throughout.
@Suite(.serialized) struct WHEPHostilePeerTests {
    static let offer = (try? String(contentsOf: CLI.packageRoot.appendingPathComponent("Tests/Browser/chromium-offer.sdp"), encoding: .utf8)) ?? ""

    static func post(_ url: String, _ body: String, type: String = "application/sdp") throws -> HTTPAPITests.Answer {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("offer").path
        try body.write(toFile: file, atomically: true, encoding: .utf8)
        let head = dir.appendingPathComponent("h").path, out = dir.appendingPathComponent("b").path
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/curl"), ["-s", "-D", head, "-o", out, "-w", "%{http_code}", "--max-time", "30",
                                                                      "-H", "Content-Type: \(type)", "--data-binary", "@\(file)", url], timeout: 60)
        var headers: [String: String] = [:]
        for line in ((try? String(contentsOfFile: head, encoding: .utf8)) ?? "").split(separator: "\r\n") {
            if let colon = line.firstIndex(of: ":") { headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces) }
        }
        return HTTPAPITests.Answer(status: Int(r.stdout) ?? 0, headers: headers, body: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
    }

    @Test func badOffersAreRefusedAndDeadSessionsEnded() throws {
        try #require(Self.offer.contains("VP8/90000"), "Tests/Browser/chromium-offer.sdp: a Chromium offer with VP8")
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)", whep = "http://127.0.0.1:\(port)/api/sources/main/whep"
        let run = try Background.streamlens(["run", "--http", "\(port)", "\(HTTPAPITests.live) ! lenspass ! fakesink"])
        try #require(HTTPAPITests.waitFor("\(u)/readyz", timeout: 120, process: run), "not ready: \(run.stderr)")
        func frames() throws -> Int { (try HTTPAPITests.curl("\(u)/api/sources/main").object["frames"] as? Int) ?? 0 }
        let lines = Self.offer.components(separatedBy: "\r\n")
        let hostile: [(String, String, Int, String)] = [
            ("not SDP", "hello, I am not an offer", 400, "not an SDP offer"),
            ("empty", "", 400, "not an SDP offer"),
            ("no VP8", Self.offer.replacingOccurrences(of: "VP8/90000", with: "XYZ/90000"), 400, "no VP8"),
            ("audio only", Self.offer.replacingOccurrences(of: "m=video", with: "m=audio"), 400, "no VP8"),
            ("no fingerprint", lines.filter { !$0.hasPrefix("a=fingerprint") }.joined(separator: "\r\n"), 400, ""),
            ("no ICE credentials", lines.filter { !$0.hasPrefix("a=ice-") }.joined(separator: "\r\n"), 400, ""),
            ("a port of 0 (rejected)", Self.offer.replacingOccurrences(of: "m=video 9", with: "m=video 0"), 400, ""),
            ("64 KB of m-lines", Self.offer + String(repeating: "m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=rtpmap:96 VP8/90000\r\n", count: 1500), 413, ""),
        ]
        let before = try frames()
        for (what, body, status, words) in hostile {
            let r = try Self.post(whep, body)
            // Some of these webrtcbin accepts and answers (it is lenient); none may crash it or
            // get anything but a 201 with an answer or a 4xx with a message.
            #expect(r.status == status || (r.status == 201 && r.body.hasPrefix("v=0")) || (400..<500).contains(r.status), "\(what): \(r.status) \(r.body.prefix(200))")
            if r.status == status, !words.isEmpty { #expect(r.body.contains(words), "\(what): \(r.body)") }
            if let location = r.headers["location"] { _ = try HTTPAPITests.request("DELETE", "\(u)\(location)") }
        }
        #expect(try Self.post(whep, Self.offer, type: "application/json").status == 415)
        // Viewers joining while others leave, eight at a time: the last one leaving stops the
        // encoder while another starts it again.
        let answered = Mutex<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<4 {
                guard let r = try? Self.post(whep, Self.offer) else { continue }
                answered.withLock { $0.append(r.status) }
                if let l = r.headers["location"] { _ = try? HTTPAPITests.request("DELETE", "\(u)\(l)") }
            }
        }
        let statuses = answered.withLock { $0 }
        #expect(statuses.count == 32 && statuses.allSatisfy { $0 == 201 }, "\(statuses)")
        // Sixteen viewers that never connect (the offer's DTLS fingerprint is no one's), then a 17th.
        var locations: [String] = []
        for _ in 0..<16 {
            let r = try Self.post(whep, Self.offer)
            #expect(r.status == 201 && r.body.contains("a=candidate"), "\(r.status) \(r.body.prefix(200))")
            if let l = r.headers["location"] { locations.append(l) }
        }
        let full = try Self.post(whep, Self.offer)
        #expect(full.status == 503 && full.body.contains("16 viewers already watch"), "\(full.status) \(full.body)")
        // Another source's name does not end these sessions.
        #expect(try HTTPAPITests.request("DELETE", "\(u)\(locations[0].replacingOccurrences(of: "sources/main", with: "sources/other"))").status == 404)
        // Ended by the server 20 s after their answers; then there is room again.
        let deadline = Date().addingTimeInterval(60 * CLI.slowdown)
        var again = 0
        while Date() < deadline {
            usleep(2_000_000)
            let r = try Self.post(whep, Self.offer)
            again = r.status
            if let l = r.headers["location"] { _ = try HTTPAPITests.request("DELETE", "\(u)\(l)") }
            if r.status == 201 { break }
        }
        #expect(again == 201, "no room after the dead sessions: \(again)")
        #expect(try HTTPAPITests.request("DELETE", "\(u)\(locations[0])").status == 404, "the first dead session (the first to be ended) is gone")
        #expect(try frames() > before + 30, "the video went on")
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
    }
}
