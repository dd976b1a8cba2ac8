import Foundation
import StreamLensCore
import StreamLensHTTP
import Synchronization

/// The console's page and files, its login form, and the events (Server-Sent Events, a
/// snapshot's picture).
extension APIServer {
    func consoleFile(_ name: String) -> HTTPReply {
        guard let file = console.file(name) else {
            if !console.found {
                return Self.error(404, "the console's files are not installed beside this binary (looked in \(console.directory); STREAMLENS_CONSOLE=DIR names their place)")
            }
            return Self.error(404, "the console has no file \(name)")
        }
        // Its own scripts and styles only: a page that a stream's name or an event could
        // inject into would run nothing foreign.
        return HTTPReply(status: 200, headers: [("Content-Type", file.type), ("Cache-Control", "no-cache"),
                                                ("Content-Security-Policy", "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; connect-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'"),
                                                ("X-Content-Type-Options", "nosniff")],
                         body: file.bytes)
    }

    /// The login form's token, checked like a bearer token; right: a session cookie.
    func login(_ request: HTTPRequest) -> HTTPReply {
        let given = HTTPRequest.formFields(String(decoding: request.body, as: UTF8.self))["token"] ?? ""
        guard let token = settings.token else {
            return HTTPReply(status: 303, headers: [("Location", "/")])
        }
        guard Self.sameToken(Array(given.utf8), Array(token.utf8)) else {
            return HTTPReply(status: 303, headers: [("Location", "/?failed=1")])
        }
        return HTTPReply(status: 303, headers: [("Location", "/"),
                                                ("Set-Cookie", "\(Self.sessionCookie)=\(session); Path=/; HttpOnly; SameSite=Strict")])
    }

    /// Server-Sent Events: every event from `Last-Event-ID` on, kept open.
    func events(_ call: APICall) {
        let (request, exchange, cors) = (call.request, call.exchange, call.cors)
        let last = (request.header("last-event-id") ?? request.query["last-event-id"]).flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        final class Subscription: Sendable {
            let token = Mutex<Int?>(nil)
            let closed = Atomic<Bool>(false)
        }
        let subscription = Subscription()
        let id = exchange.id
        let opened = exchange.openStream(headers: [("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache"),
                                                   ("X-Accel-Buffering", "no")] + cors) { [weak self] in
            subscription.closed.store(true, ordering: .relaxed)
            if let token = subscription.token.withLock({ $0 }) { EventLog.shared.unsubscribe(token) }
            _ = self?.streams.withLock { $0.removeValue(forKey: id) }
        }
        guard opened else { return }
        exchange.write("retry: 2000\n\n")
        streams.withLock { $0[id] = exchange }
        let token = EventLog.shared.subscribe(after: last) { entry in
            exchange.write("id: \(entry.id)\ndata: \(entry.json)\n\n")
        }
        subscription.token.withLock { $0 = token }
        if subscription.closed.load(ordering: .relaxed) { EventLog.shared.unsubscribe(token) }
    }

    /// The file a snapshot event names, while the event is kept.
    func eventPicture(_ id: String) -> HTTPReply {
        guard let n = Int(id), let entry = EventLog.shared.entries.first(where: { $0.id == n }) else { return Self.error(404, "no event \(id) (the last 1000 are kept)") }
        guard let data = entry.json.data(using: .utf8), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              object["type"] as? String == "snapshot", let path = object["path"] as? String else {
            return Self.error(404, "event \(id) is not a snapshot")
        }
        let ext = (path as NSString).pathExtension.lowercased()
        guard let file = FileManager.default.contents(atPath: path) else { return Self.error(404, "the snapshot \(path) is gone") }
        return HTTPReply(status: 200, headers: [("Content-Type", ext == "png" ? "image/png" : "image/jpeg"), ("Cache-Control", "max-age=3600")], body: Array(file))
    }
}
