import Foundation
import StreamLensCore
import StreamLensGst
import StreamLensHTTP
import Synchronization

/// The sources' video for browsers and tools: WHEP (WebRTC), MJPEG, the next frame's regions,
/// and the pictures of a stage's styles.
extension APIServer {
    func endWHEP(_ name: String, _ session: String) -> HTTPReply {
        guard catalog.commands(of: name) != nil else { return noSource(name) }
        return web.endSession(source: name, id: session) ? Self.encoded(200, APIAnswer.Ended()) : Self.error(404, "no WHEP session \(session) of \(name)")
    }

    /// The picture of the index-th style of a stage whose number keys pick its model from a list
    /// (lensstylize's `styles`): its manifest's style picture, or the picture it was trained
    /// from (styles/NAME.jpg beside the manifest).
    func stylePicture(_ name: String, _ stage: String, _ index: String) -> HTTPReply {
        guard let commands = catalog.commands(of: name) else { return noSource(name) }
        let state: PipelineCommands.StageState
        do { state = try commands.stage(stage) } catch { return Self.error(404, Self.message(error)) }
        guard let pick = state.keys.pickList, let styles = state.properties.first(where: { $0.spec.name == pick.listProperty }),
              case .string(let list) = styles.value else {
            return Self.error(404, "\(stage) has no styles")
        }
        let manifests = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard let i = Int(index), manifests.indices.contains(i) else { return Self.error(404, "\(stage) has \(manifests.count) styles (0…\(max(0, manifests.count - 1)))") }
        let manifest = URL(fileURLWithPath: manifests[i])
        let dir = manifest.deletingLastPathComponent()
        var candidates: [URL] = []
        if let data = FileManager.default.contents(atPath: manifest.path), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
            if let style = object["style"] as? [String: Any], let image = style["image"] as? String { candidates.append(dir.appendingPathComponent(image)) }
            if let name = object["name"] as? String { candidates.append(dir.appendingPathComponent("styles/\(name).jpg")) }
        }
        candidates.append(dir.appendingPathComponent("styles/\(manifest.deletingPathExtension().lastPathComponent).jpg"))
        for url in candidates {
            let ext = url.pathExtension.lowercased()
            guard ["jpg", "jpeg", "png"].contains(ext), let data = FileManager.default.contents(atPath: url.path), data.count <= 8 << 20 else { continue }
            return HTTPReply(status: 200, headers: [("Content-Type", ext == "png" ? "image/png" : "image/jpeg"), ("Cache-Control", "max-age=300")], body: Array(data))
        }
        return Self.error(404, "style \(manifests[i]) has no picture")
    }

    /// WHEP: the offer to the source's tap (made now if needed); the answer once the server's
    /// candidates are gathered, from a thread of its own.
    func whep(_ call: APICall) {
        let (name, request, reply) = (call.parameter("name"), call.request, call.replying)
        guard let commands = catalog.commands(of: name) else { return reply(noSource(name)) }
        guard request.mediaType == "application/sdp" else { return reply(Self.error(415, "the body must be an SDP offer, sent with Content-Type: application/sdp")) }
        let at = request.query["at"]
        let offer = String(decoding: request.body, as: UTF8.self)
        waiting.run(else: reply) { [self] in reply(answer(name, at: at, offer: offer, commands: commands)) }
    }

    /// A source's video can be tapped once it plays (before, its caps are not settled and the
    /// last raw video before a sink cannot be told).
    private func notPlaying(_ name: String) -> HTTPReply? {
        guard let s = catalog.statuses().first(where: { $0.name == name }) else { return noSource(name) }
        guard s.state == SourceSet.State.playing.rawValue else {
            var r = Self.error(503, "source \(name) is \(s.state), not playing: its video can be watched once it plays")
            r.headers.append(("Retry-After", "1"))
            return r
        }
        return nil
    }

    private func answer(_ name: String, at: String?, offer: String, commands: PipelineCommands) -> HTTPReply {
        if let refusal = notPlaying(name) { return refusal }
        do {
            let tap = try web.tap(source: name, at: at, commands: commands)
            let (session, answer) = try tap.offer(offer)
            let id = web.addSession(WebViews.Key(source: name, at: at ?? ""), session)
            return HTTPReply(status: 201, headers: [("Content-Type", "application/sdp"), ("Location", "/api/sources/\(name)/whep/\(id)"),
                                                    ("Access-Control-Expose-Headers", "Location")], body: Array(answer.utf8))
        } catch {
            return Self.error(error.status, error.message)
        }
    }

    static let mjpegBoundary = "streamlensframe"

    func mjpeg(_ call: APICall) {
        let (name, request, exchange, reply) = (call.parameter("name"), call.request, call.exchange, call.replying)
        guard let commands = catalog.commands(of: name) else { return reply(noSource(name)) }
        let at = request.query["at"]
        var fps = 10
        if let text = request.query["fps"] {
            guard let n = Int(text), (1...30).contains(n) else { return reply(Self.error(422, "fps must be 1…30")) }
            fps = n
        }
        if let refusal = notPlaying(name) { return reply(refusal) }
        let tap: WebTap
        do { tap = try web.tap(source: name, at: at, commands: commands) } catch { return reply(Self.error(error.status, error.message)) }
        if request.method == "HEAD" {
            return reply(HTTPReply(status: 200, headers: [("Content-Type", "multipart/x-mixed-replace; boundary=\(Self.mjpegBoundary)")]))
        }
        final class Holder: Sendable { let subscription = Mutex<JPEGSubscription?>(nil); let closed = Atomic<Bool>(false) }
        let holder = Holder()
        let key = WebViews.Key(source: name, at: at ?? "")
        let id = exchange.id
        let opened = exchange.openStream(headers: [("Content-Type", "multipart/x-mixed-replace; boundary=\(Self.mjpegBoundary)"),
                                                   ("Cache-Control", "no-cache, no-store"), ("X-Accel-Buffering", "no")]) { [weak self] in
            holder.closed.store(true, ordering: .relaxed)
            holder.subscription.withLock { $0?.cancel(); $0 = nil }
            self?.web.removeStream(key, id)
        }
        guard opened else { return }
        web.addStream(key, exchange)
        let subscription = tap.subscribeJPEG(fps: fps) { jpeg in
            var part = Array("--\(Self.mjpegBoundary)\r\nContent-Type: image/jpeg\r\nContent-Length: \(jpeg.count)\r\n\r\n".utf8)
            part.append(contentsOf: jpeg)
            part.append(contentsOf: Array("\r\n".utf8))
            part.withUnsafeBytes { exchange.offer($0) }
        }
        guard let subscription else { exchange.close(); return }
        holder.subscription.withLock { $0 = subscription }
        if holder.closed.load(ordering: .relaxed) { holder.subscription.withLock { $0?.cancel(); $0 = nil } }
    }

    /// The next frame's regions at a point (the video's, or `?at=`), as lensmetadata's record:
    /// a probe takes the frame's buffer by reference (its metas; no pixels) when asked, waited
    /// for on a thread of its own.
    func regions(_ call: APICall) {
        let (name, request, reply) = (call.parameter("name"), call.request, call.replying)
        guard let commands = catalog.commands(of: name) else { return reply(noSource(name)) }
        let at = request.query["at"]
        if let refusal = notPlaying(name) { return reply(refusal) }
        waiting.run(else: reply) { [self] in reply(regionsRecord(name, at: at, commands: commands)) }
    }

    private func regionsRecord(_ name: String, at: String?, commands: PipelineCommands) -> HTTPReply {
        let tap: WebTap
        do { tap = try web.tap(source: name, at: at, commands: commands) } catch { return Self.error(error.status, error.message) }
        guard let observed = tap.nextFrame(timeout: 2) else {
            var r = Self.error(503, "no frame passed \(tap.point) of \(name) in 2 s")
            r.headers.append(("Retry-After", "1"))
            return r
        }
        let encoder = JSONEncoder.stable()
        let line: Data?? = observed.read { frame in
            MetadataRecord.line(frame.pixels.regionsOfInterest(), frame: frame, encoder: encoder)
        }
        guard let record = line ?? nil else { return Self.error(500, "the frame at \(tap.point) could not be read") }
        return HTTPReply(status: 200, headers: [("Content-Type", "application/json")], body: Array(record))
    }
}
