import Foundation
import StreamLensCore
import StreamLensGst
import StreamLensHTTP
import Synchronization

/// `--http`: the HTTP API of `streamlens run` and `serve` (docs/http-api.md; the routes are in
/// `OpenAPIDocument`), on `HTTPServer`.
///
/// Requests that only read are answered on the server's thread at once; what waits (a source
/// starting or ending, a WHEP answer's candidates, the next frame at a point) runs on a thread of
/// its own (`WaitingWork`, bounded) and answers from there, so nothing waits behind it. Every change goes through the same calls as the control
/// socket: `SourceCatalog` (SourceSet's add and remove) and `PipelineCommands.set`.
public final class APIServer: Sendable {
    public struct Settings: Sendable {
        /// The bearer token every request must carry; nil: none (loopback only).
        public var token: String?
        /// The one origin a browser may call the API from (CORS); nil: none.
        public var allowOrigin: String?
        public var limits = HTTPServer.Limits()
        public init(token: String? = nil, allowOrigin: String? = nil) {
            self.token = token
            self.allowOrigin = allowOrigin
        }
    }

    public let http: HTTPServer
    private let catalog: any SourceCatalog
    private let settings: Settings
    private let version: String
    /// What waits, each on a thread of its own.
    private let waiting = WaitingWork(limit: 32)
    /// Taps of sources that are gone, let go one at a time.
    private let sweeping = DispatchQueue(label: "streamlens.api.sweep")
    /// Open event streams, for their keep-alive comments.
    private let streams = Mutex<[UInt64: HTTPExchange]>([:])
    private nonisolated(unsafe) let keepAlive: DispatchSourceTimer
    static let keepAliveSeconds = 15
    /// Video for browsers (WHEP, MJPEG), by source and point.
    let web = WebViews()
    private let console = ConsoleFiles()
    /// The console's session cookie after a login with the token: random, made at start (a
    /// restart logs everyone out), never the token itself.
    private let session: String = {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }()
    private let eventToken = Atomic<Int>(0)
    private let metricsSource = Atomic<Int>(0)
    static let sessionCookie = "streamlens_session"

    /// Listens now; throws when it cannot (a busy port, an address this machine does not have),
    /// or when the address is beyond loopback and there is no token.
    public init(address: HTTPAddress, option: String = "--http", catalog: any SourceCatalog, settings: Settings, version: String) throws {
        if !address.isLoopback, settings.token == nil {
            throw HTTPServerError("\(option) \(address.host):\(address.port) listens beyond this machine: give a bearer token with --http-token-file FILE (every request must then carry it)")
        }
        self.catalog = catalog
        self.settings = settings
        self.version = version
        let route = Router()
        http = try HTTPServer(address: address, option: option, limits: settings.limits) { request, exchange in
            route.handle(request, exchange)
        }
        // Made once the server listens: a timer source let go before it was resumed traps.
        keepAlive = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "streamlens.api.keepalive"))
        route.api.withLock { $0.server = self }
        keepAlive.schedule(deadline: .now() + .seconds(Self.keepAliveSeconds), repeating: .seconds(Self.keepAliveSeconds))
        keepAlive.setEventHandler { [weak self] in
            self?.streams.withLock { $0.values.forEach { $0.write(": keep-alive\n\n") } }
            self?.sweepWeb()
        }
        keepAlive.resume()
        // A source that ends takes its video for browsers with it at once.
        let token = EventLog.shared.subscribe(after: EventLog.shared.entries.last?.id) { [weak self] entry in
            guard entry.json.contains("\"type\":\"source-"), let self else { return }
            sweeping.async { self.sweepWeb() }
        }
        eventToken.store(token, ordering: .relaxed)
        let web = self.web
        metricsSource.store(MetricsRegistry.shared.addCollector { web.metrics() }, ordering: .relaxed)
    }

    private func sweepWeb() {
        let running = catalog.statuses().filter { $0.state == SourceSet.State.playing.rawValue || $0.state == SourceSet.State.starting.rawValue }.map(\.name)
        web.sweep(running: Set(running))
    }

    public func stop() {
        keepAlive.cancel()
        EventLog.shared.unsubscribe(eventToken.load(ordering: .relaxed))
        MetricsRegistry.shared.remove(source: metricsSource.load(ordering: .relaxed))
        web.stop()
        http.stop()
    }

    /// The server's answer to one request.
    final class Router: Sendable {
        struct WeakAPI: @unchecked Sendable { weak var server: APIServer? }
        let api = Mutex<WeakAPI>(WeakAPI())
        func handle(_ request: HTTPRequest, _ exchange: HTTPExchange) {
            guard let server = api.withLock({ $0.server }) else {
                exchange.respond(.text(503, "starting\n"))
                return
            }
            server.handle(request, exchange)
        }
    }

    // MARK: - Routes

    /// Every route the server answers (the OpenAPI document lists the same; a test holds them
    /// to each other). HEAD is answered as GET.
    public static let routes: [(method: String, path: String)] = [
        ("GET", "/"),
        ("GET", "/console/{file}"),
        ("POST", "/api/login"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
        ("GET", "/api/openapi.json"),
        ("GET", "/api/sources"),
        ("POST", "/api/sources"),
        ("GET", "/api/sources/{name}"),
        ("DELETE", "/api/sources/{name}"),
        ("GET", "/api/sources/{name}/stages"),
        ("GET", "/api/sources/{name}/stages/{stage}"),
        ("PATCH", "/api/sources/{name}/stages/{stage}"),
        ("GET", "/api/sources/{name}/stages/{stage}/styles/{index}"),
        ("POST", "/api/sources/{name}/keys"),
        ("POST", "/api/sources/{name}/record"),
        ("POST", "/api/sources/{name}/whep"),
        ("DELETE", "/api/sources/{name}/whep/{session}"),
        ("GET", "/api/sources/{name}/mjpeg"),
        ("GET", "/api/sources/{name}/regions"),
        ("GET", "/api/events"),
        ("GET", "/api/events/{id}/picture"),
    ]

    /// The route pattern `path` matches, and its parameters.
    static func match(_ path: String) -> (pattern: String, parameters: [String: String])? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        let segments = parts.last == "" && parts.count > 1 ? Array(parts.dropLast()) : Array(parts)
        for pattern in Set(routes.map(\.path)) {
            let want = pattern == "/" ? [""] : pattern.split(separator: "/").map(String.init)
            guard want.count == segments.count else { continue }
            var parameters: [String: String] = [:]
            var matched = true
            for (w, s) in zip(want, segments) {
                if w.hasPrefix("{") { guard !s.isEmpty else { matched = false; break }; parameters[String(w.dropFirst().dropLast())] = String(s) }
                else if w != s { matched = false; break }
            }
            if matched { return (pattern, parameters) }
        }
        return nil
    }

    func handle(_ request: HTTPRequest, _ exchange: HTTPExchange) {
        // With no token the API is loopback's alone: a Host header naming anything else is a
        // page of some other site whose name was pointed at 127.0.0.1 (DNS rebinding), which
        // the Origin check below would take for this server's own.
        if settings.token == nil, let host = request.header("host"), !Self.isLoopbackHost(host) {
            exchange.respond(Self.error(403, "Host \(host) is not this machine's loopback name (localhost, 127.0.0.1, [::1]): refused"))
            return
        }
        // With no token, only this server's own user (and root) is served: another user of this
        // machine reaches loopback too, and a source added over the API reads and opens what
        // this process may, so it would be their way into files and ports that are not theirs.
        if settings.token == nil, !Self.isOwnUser(request.peerUID) {
            var response = Self.error(401, "this server serves its own user only (uid \(geteuid())) without a token"
                                      + (request.peerUID.map { "; you are uid \($0)" } ?? "; the kernel could not say who you are")
                                      + ": its owner can start it with --http-token-file FILE, and anyone given the token is served")
            response.headers.append(("WWW-Authenticate", "Bearer realm=\"streamlens\""))
            exchange.respond(response)
            return
        }
        let origin = request.header("origin")
        let allowedOrigin = origin != nil && origin == settings.allowOrigin
        let cors: [(String, String)] = allowedOrigin ? [("Access-Control-Allow-Origin", origin!), ("Vary", "Origin")] : []
        if let origin, !allowedOrigin, !sameOrigin(origin, host: request.header("host")) {
            // A page of another site calling the API through the user's browser (which sends
            // simple requests without asking first): refused before anything is done.
            exchange.respond(Self.error(403, "requests from \(origin) are not allowed (--http-allow-origin ORIGIN allows one origin)"))
            return
        }
        @Sendable func reply(_ response: HTTPReply) {
            var response = response
            response.headers += cors
            exchange.respond(response)
        }
        if request.method == "OPTIONS" {
            guard let matched = Self.match(request.path) else { return reply(Self.error(404, "no such route: \(request.path) (the routes: /api/openapi.json)")) }
            let allow = Self.allowed(matched.pattern)
            var response = HTTPReply(status: 204, headers: [("Allow", allow)])
            if !cors.isEmpty {
                response.headers += [("Access-Control-Allow-Methods", allow), ("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID"),
                                     ("Access-Control-Max-Age", "600")]
            }
            return reply(response)
        }
        // The console's page, its files and its login form need no token (they hold none).
        let matchedPattern = Self.match(request.path)?.pattern
        let method0 = request.method == "HEAD" ? "GET" : request.method
        let open = (method0 == "GET" && (matchedPattern == "/" || matchedPattern == "/console/{file}")) || (method0 == "POST" && matchedPattern == "/api/login")
        if let token = settings.token, !open, !authenticated(request, token: token) {
            var response = Self.error(401, "a bearer token is required (Authorization: Bearer TOKEN, the content of --http-token-file; or the console's login)")
            response.headers.append(("WWW-Authenticate", "Bearer realm=\"streamlens\""))
            return reply(response)
        }
        guard let matched = Self.match(request.path) else {
            return reply(Self.error(404, "no such route: \(request.path) (the routes: /api/openapi.json)"))
        }
        let method = request.method == "HEAD" ? "GET" : request.method
        guard Self.routes.contains(where: { $0.method == method && $0.path == matched.pattern }) else {
            var response = Self.error(405, "\(request.method) is not allowed on \(matched.pattern) (allowed: \(Self.allowed(matched.pattern)))")
            response.headers.append(("Allow", Self.allowed(matched.pattern)))
            return reply(response)
        }
        let name = matched.parameters["name"] ?? "", stage = matched.parameters["stage"] ?? ""
        switch (method, matched.pattern) {
        case ("GET", "/"):
            if (request.header("accept") ?? "").contains("text/html") {
                let page = settings.token.map { authenticated(request, token: $0) } ?? true ? "index.html" : "login.html"
                return reply(consoleFile(page))
            }
            reply(Self.json(200, "{\"name\":\"StreamLens\",\"version\":\(JSONText.string(version)),\"console\":\"/\",\"openapi\":\"/api/openapi.json\",\"metrics\":\"/metrics\",\"events\":\"/api/events\"}"))
        case ("GET", "/console/{file}"):
            reply(consoleFile(matched.parameters["file"] ?? ""))
        case ("POST", "/api/login"):
            reply(login(request))
        case ("GET", "/api/sources/{name}/stages/{stage}/styles/{index}"):
            reply(stylePicture(name, stage, matched.parameters["index"] ?? ""))
        case ("POST", "/api/sources/{name}/keys"):
            reply(press(name, request))
        case ("POST", "/api/sources/{name}/record"):
            reply(record(name, request))
        case ("POST", "/api/sources/{name}/whep"):
            whep(name, request, reply)
        case ("DELETE", "/api/sources/{name}/whep/{session}"):
            guard catalog.commands(of: name) != nil else { return reply(noSource(name)) }
            reply(web.endSession(source: name, id: matched.parameters["session"] ?? "") ? Self.json(200, "{\"ended\":true}")
                  : Self.error(404, "no WHEP session \(matched.parameters["session"] ?? "") of \(name)"))
        case ("GET", "/api/sources/{name}/mjpeg"):
            mjpeg(name, request, exchange, reply)
        case ("GET", "/api/sources/{name}/regions"):
            regions(name, request, reply)
        case ("GET", "/api/events/{id}/picture"):
            reply(eventPicture(matched.parameters["id"] ?? ""))
        case ("GET", "/healthz"):
            reply(Self.json(200, "{\"alive\":true}"))
        case ("GET", "/readyz"):
            reply(readiness())
        case ("GET", "/metrics"):
            reply(.text(200, MetricsRegistry.shared.exposition(), type: "text/plain; version=0.0.4; charset=utf-8"))
        case ("GET", "/api/openapi.json"):
            reply(Self.json(200, OpenAPIDocument.text(version: version)))
        case ("GET", "/api/sources"):
            reply(Self.encoded(200, catalog.statuses()))
        case ("POST", "/api/sources"):
            waiting.run(else: reply) { [self] in reply(addSource(request)) }
        case ("GET", "/api/sources/{name}"):
            reply(source(name))
        case ("DELETE", "/api/sources/{name}"):
            // A name that is not there is answered at once: only a real removal waits (for the
            // source's end of stream), and it never waits behind starts.
            guard catalog.statuses().contains(where: { $0.name == name }) else { return reply(noSource(name)) }
            waiting.run(else: reply) { [self] in reply(removeSource(name)) }
        case ("GET", "/api/sources/{name}/stages"):
            guard let commands = catalog.commands(of: name) else { return reply(noSource(name)) }
            reply(Self.json(200, "[" + commands.stages().map(Self.stageJSON).joined(separator: ",") + "]"))
        case ("GET", "/api/sources/{name}/stages/{stage}"):
            guard let commands = catalog.commands(of: name) else { return reply(noSource(name)) }
            do { reply(Self.json(200, Self.stageJSON(try commands.stage(stage)))) } catch { reply(Self.error(404, Self.message(error))) }
        case ("PATCH", "/api/sources/{name}/stages/{stage}"):
            reply(patch(name, stage, request))
        case ("GET", "/api/events"):
            events(request, exchange, cors: cors)
        default:
            reply(Self.error(404, "no such route: \(request.path)"))
        }
    }

    static func allowed(_ pattern: String) -> String {
        let methods = routes.filter { $0.path == pattern }.map(\.method)
        return (methods + (methods.contains("GET") ? ["HEAD"] : []) + ["OPTIONS"]).joined(separator: ", ")
    }

    /// The client's socket belongs to the user this server runs as, or to root.
    static func isOwnUser(_ uid: UInt32?) -> Bool {
        guard let uid else { return false }
        return uid == geteuid() || uid == 0
    }

    /// localhost, 127.x.x.x or [::1], with or without a port.
    static func isLoopbackHost(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("[") { name = String(name.prefix { $0 != "]" }.dropFirst()) }
        else if let colon = name.lastIndex(of: ":") { name = String(name[..<colon]) }
        return name == "localhost" || name == "::1" || (name.hasPrefix("127.") && name.split(separator: ".").count == 4 && name.split(separator: ".").allSatisfy { UInt8($0) != nil })
    }

    /// An Origin header naming this server itself (a page it served).
    private func sameOrigin(_ origin: String, host: String?) -> Bool {
        guard let host else { return false }
        return origin == "http://\(host)"
    }

    /// Compared in constant time for tokens of the expected length: every byte of the expected
    /// token is looked at whatever the given one holds.
    static func sameToken(_ given: [UInt8], _ expected: [UInt8]) -> Bool {
        var difference = UInt8(given.count == expected.count ? 0 : 1)
        for i in 0..<expected.count { difference |= (i < given.count ? given[i] : 0) ^ expected[i] }
        return difference == 0 && !expected.isEmpty
    }

    // MARK: - Answers

    private func readiness() -> HTTPReply {
        let all = catalog.statuses()
        let waiting = all.filter { $0.state != SourceSet.State.playing.rawValue }
        if waiting.isEmpty {
            return Self.json(200, "{\"ready\":true,\"sources\":[" + all.map { JSONText.string($0.name) }.joined(separator: ",") + "]}")
        }
        let items = waiting.map { s in
            "{\"name\":\(JSONText.string(s.name)),\"state\":\(JSONText.string(s.state))" + (s.error.map { ",\"error\":\(JSONText.string($0))" } ?? "") + "}"
        }
        return Self.json(503, "{\"ready\":false,\"not_playing\":[" + items.joined(separator: ",") + "]}")
    }

    private func noSource(_ name: String) -> HTTPReply {
        Self.error(SourceRefusal.unknown(name, among: catalog.statuses().map(\.name)))
    }

    /// A source's status with its stages' figures.
    struct SourceDetail: Encodable {
        var status: SourceSet.Status
        var stages: [StageSummary]
        enum Keys: String, CodingKey { case stages }
        func encode(to encoder: any Encoder) throws {
            try status.encode(to: encoder)
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(stages, forKey: .stages)
        }
    }

    private func source(_ name: String) -> HTTPReply {
        guard let status = catalog.statuses().first(where: { $0.name == name }) else { return noSource(name) }
        return Self.encoded(200, SourceDetail(status: status, stages: catalog.stageSummaries(of: name)))
    }

    private func addSource(_ request: HTTPRequest) -> HTTPReply {
        let body: [String: JSONValue]
        switch Self.jsonBody(request) {
        case .failure(let refusal): return refusal
        case .success(let value):
            guard case .object(let object) = value else { return Self.error(400, "the body must be a JSON object {\"name\": …, \"uri\": …}") }
            body = object
        }
        if !catalog.acceptsNewSources, let refusal = catalog.add(name: "", uri: "") { return Self.error(refusal) }
        guard case .string(let name)? = body["name"], case .string(let uri)? = body["uri"] else {
            return Self.error(422, "the body needs \"name\" and \"uri\", both strings")
        }
        if let unknown = body.keys.first(where: { $0 != "name" && $0 != "uri" }) { return Self.error(422, "unknown field \(unknown) (a source has name and uri)") }
        // The name, the URI and whether the name is taken are checked by the catalog (under its lock).
        if let refusal = catalog.add(name: name, uri: uri) { return Self.error(refusal) }
        var response = source(name)
        response.status = 201
        response.headers.append(("Location", "/api/sources/\(name)"))
        return response
    }

    private func removeSource(_ name: String) -> HTTPReply {
        if !catalog.acceptsNewSources, let refusal = catalog.remove(name: name) { return Self.error(refusal) }
        guard let before = catalog.statuses().first(where: { $0.name == name }) else { return noSource(name) }
        if let refusal = catalog.remove(name: name) { return Self.error(refusal) }
        var status = before
        status.state = before.state == SourceSet.State.failed.rawValue ? before.state : SourceSet.State.ended.rawValue
        status.fps = 0
        return Self.encoded(200, status)
    }

    private func patch(_ name: String, _ stage: String, _ request: HTTPRequest) -> HTTPReply {
        guard let commands = catalog.commands(of: name) else { return noSource(name) }
        do { _ = try commands.stage(stage) } catch { return Self.error(404, Self.message(error)) }
        let object: [String: JSONValue]
        switch Self.jsonBody(request) {
        case .failure(let refusal): return refusal
        case .success(let value):
            guard case .object(let o) = value, !o.isEmpty else { return Self.error(422, "the body must be a JSON object of properties and values, e.g. {\"strength\": 0.5}") }
            object = o
        }
        var assignments: [(name: String, value: String)] = []
        for key in object.keys.sorted() {
            guard let text = object[key]!.propertyText else {
                return Self.error(422, "property \(key): the value must be a string, a number or true/false", property: key)
            }
            assignments.append((key, text))
        }
        do {
            try commands.set(element: stage, assignments)
        } catch {
            return Self.error(422, error.message, property: error.property)
        }

        do { return Self.json(200, Self.stageJSON(try commands.stage(stage))) } catch { return Self.error(404, Self.message(error)) }
    }

    /// A clip now from every lensrecord of the source (or the one `?stage=` names): each one's
    /// `record` property set to the reason (`?reason=`, default api). 202: the stages asked;
    /// the clip itself comes later, as a `clip` event.
    private func record(_ name: String, _ request: HTTPRequest) -> HTTPReply {
        guard let commands = catalog.commands(of: name) else { return noSource(name) }
        let wanted = request.query["stage"]
        let recorders = commands.stages().filter { $0.factory == "lensrecord" && (wanted == nil || $0.name == wanted) }
        guard !recorders.isEmpty else {
            return Self.error(404, wanted.map { "source \(name) has no lensrecord named \($0)" } ?? "source \(name) has no lensrecord stage")
        }
        var reason = (request.query["reason"] ?? "api").trimmingCharacters(in: .whitespacesAndNewlines)
        if reason.isEmpty { reason = "api" }
        guard reason.count <= 64, reason.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
            return Self.error(422, "reason: at most 64 letters, digits, - _ or .", property: "reason")
        }
        for stage in recorders {
            do { try commands.set(element: stage.name, [("record", reason)]) } catch { return Self.error(422, error.message, property: error.property) }
        }
        return Self.json(202, "{\"recording\":[" + recorders.map { JSONText.string($0.name) }.joined(separator: ",") + "],\"reason\":\(JSONText.string(reason))}")
    }

    private func events(_ request: HTTPRequest, _ exchange: HTTPExchange, cors: [(String, String)]) {
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

    // MARK: - The console

    /// The bearer token, or the console's session cookie.
    private func authenticated(_ request: HTTPRequest, token: String) -> Bool {
        if let given = request.header("authorization").flatMap({ $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }) {
            return Self.sameToken(Array(given.utf8), Array(token.utf8))
        }
        let cookies = (request.header("cookie") ?? "").split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        let prefix = Self.sessionCookie + "="
        return cookies.contains { $0.hasPrefix(prefix) && Self.sameToken(Array($0.dropFirst(prefix.count).utf8), Array(session.utf8)) }
    }

    private func consoleFile(_ name: String) -> HTTPReply {
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
    private func login(_ request: HTTPRequest) -> HTTPReply {
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

    /// The picture of the index-th style of a stage whose number keys pick its model from a list
    /// (lensstylize's `styles`): its manifest's style picture, or the picture it was trained
    /// from (styles/NAME.jpg beside the manifest).
    private func stylePicture(_ name: String, _ stage: String, _ index: String) -> HTTPReply {
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

    private func press(_ name: String, _ request: HTTPRequest) -> HTTPReply {
        guard let commands = catalog.commands(of: name) else { return noSource(name) }
        switch Self.jsonBody(request) {
        case .failure(let refusal): return refusal
        case .success(let value):
            guard case .object(let o) = value, case .string(let key)? = o["key"], !key.isEmpty, key.count <= 32,
                  !key.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                return Self.error(422, "the body must be {\"key\": NAME}, e.g. {\"key\": \"+\"} or {\"key\": \"space\"}")
            }
            let done = commands.press(key: key)
            return Self.json(200, "{\"done\":[" + done.map(JSONText.string).joined(separator: ",") + "]}")
        }
    }

    /// WHEP: the offer to the source's tap (made now if needed); the answer once the server's
    /// candidates are gathered, from a thread of its own.
    private func whep(_ name: String, _ request: HTTPRequest, _ reply: @escaping @Sendable (HTTPReply) -> Void) {
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

    private func mjpeg(_ name: String, _ request: HTTPRequest, _ exchange: HTTPExchange, _ reply: @escaping @Sendable (HTTPReply) -> Void) {
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
    private func regions(_ name: String, _ request: HTTPRequest, _ reply: @escaping @Sendable (HTTPReply) -> Void) {
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

    /// The file a snapshot event names, while the event is kept.
    private func eventPicture(_ id: String) -> HTTPReply {
        guard let n = Int(id), let entry = EventLog.shared.entries.first(where: { $0.id == n }) else { return Self.error(404, "no event \(id) (the last 1000 are kept)") }
        guard let data = entry.json.data(using: .utf8), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              object["type"] as? String == "snapshot", let path = object["path"] as? String else {
            return Self.error(404, "event \(id) is not a snapshot")
        }
        let ext = (path as NSString).pathExtension.lowercased()
        guard let file = FileManager.default.contents(atPath: path) else { return Self.error(404, "the snapshot \(path) is gone") }
        return HTTPReply(status: 200, headers: [("Content-Type", ext == "png" ? "image/png" : "image/jpeg"), ("Cache-Control", "max-age=3600")], body: Array(file))
    }

    // MARK: - JSON

    static func message(_ error: any Error) -> String { (error as? ControlError)?.message ?? "\(error)" }

    static func json(_ status: Int, _ text: String) -> HTTPReply {
        .text(status, text + "\n", type: "application/json")
    }

    /// A catalog's refusal: its message (first line) with the status its reason calls for.
    static func error(_ refusal: SourceRefusal) -> HTTPReply {
        let status: Int
        switch refusal.reason {
        case .invalid, .didNotStart: status = 422
        case .taken, .notHere: status = 409
        case .unknown: status = 404
        case .busy: status = 503
        }
        var reply = error(status, String(refusal.message.split(separator: "\n").first ?? ""))
        if refusal.reason == .busy { reply.headers.append(("Retry-After", "2")) }
        return reply
    }

    static func error(_ status: Int, _ message: String, property: String? = nil) -> HTTPReply {
        json(status, "{\"error\":\(JSONText.string(message))" + (property.map { ",\"property\":\(JSONText.string($0))" } ?? "") + "}")
    }

    static func encoded<T: Encodable>(_ status: Int, _ value: T) -> HTTPReply {
        guard let data = try? JSONEncoder.stable().encode(value) else { return error(500, "could not encode the answer") }
        return json(status, String(decoding: data, as: UTF8.self))
    }

    static func jsonBody(_ request: HTTPRequest) -> Result<JSONValue, HTTPReply> {
        guard request.mediaType == "application/json" else {
            return .failure(error(415, "the body must be JSON, sent with Content-Type: application/json"))
        }
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(request.body)) else {
            return .failure(error(400, "the body is not valid JSON"))
        }
        return .success(value)
    }

    static func stageJSON(_ stage: PipelineCommands.StageState) -> String {
        let properties = stage.properties.map { p -> String in
            var fields: [String] = [
                "\"name\":\(JSONText.string(p.spec.name))",
                "\"value\":\(valueJSON(p.value))",
                "\"default\":\(valueJSON(p.spec.defaultValue))",
                "\"live\":\(p.spec.live)",
                "\"readonly\":\(p.spec.readOnly)",
            ]
            switch p.spec.kind {
            case .bool: fields.append("\"type\":\"boolean\"")
            case .int(let r): fields += ["\"type\":\"integer\"", "\"minimum\":\(r.lowerBound)", "\"maximum\":\(r.upperBound)"]
            case .double(let r): fields += ["\"type\":\"number\"", "\"minimum\":\(JSONText.number(r.lowerBound))", "\"maximum\":\(JSONText.number(r.upperBound))"]
            case .string: fields.append("\"type\":\"string\"")
            case .choice(let c): fields += ["\"type\":\"string\"", "\"choices\":[" + c.map(JSONText.string).joined(separator: ",") + "]"]
            }
            fields.append("\"help\":\(JSONText.string(p.spec.help))")
            return "{" + fields.joined(separator: ",") + "}"
        }
        let keys = stage.keys.map { "{\"key\":\(JSONText.string($0.label)),\"help\":\(JSONText.string($0.help))}" }
        return "{\"name\":\(JSONText.string(stage.name)),\"factory\":\(JSONText.string(stage.factory)),\"properties\":[" + properties.joined(separator: ",") + "],\"keys\":[" + keys.joined(separator: ",") + "]}"
    }

    static func valueJSON(_ v: PropertyValue) -> String {
        switch v {
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return String(i)
        case .double(let d): return d.isFinite ? "\(d)" : "null"
        case .string(let s): return JSONText.string(s)
        }
    }
}

/// A JSON value as a request body holds it.
enum JSONValue: Decodable, Equatable {
    case null, bool(Bool), number(Double), string(String), array([JSONValue]), object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let d = try? c.decode(Double.self) { self = .number(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    /// A property's value as the control socket writes it (`set NAME=VALUE`); nil for what no
    /// property takes (null, arrays, objects).
    var propertyText: String? {
        switch self {
        case .bool(let b): return b ? "true" : "false"
        case .number(let d): return JSONText.number(d)
        case .string(let s): return s
        default: return nil
        }
    }
}

/// Requests whose answers wait (a source starting, up to its start timeout; a WHEP answer's
/// candidates; the next frame at a point), each on a thread of its own, at most `limit` at once;
/// beyond that the request is answered 503 with Retry-After at once. Not a GCD queue: on Linux
/// its pool is about as wide as the machine's cores and a block waiting on a semaphore holds a
/// worker, so two sources starting held up every other such answer (3 s for a refusal, here).
final class WaitingWork: Sendable {
    let limit: Int
    private let running = Atomic<Int>(0)

    init(limit: Int) { self.limit = limit }

    /// Runs `body` on a new thread, or answers `refuse` with 503 when `limit` are running.
    func run(else refuse: @escaping @Sendable (HTTPReply) -> Void, _ body: @escaping @Sendable () -> Void) {
        guard running.add(1, ordering: .relaxed).newValue <= limit else {
            running.subtract(1, ordering: .relaxed)
            var busy = APIServer.error(503, "\(limit) requests are already waiting for the pipelines (sources starting, video being negotiated): try again shortly")
            busy.headers.append(("Retry-After", "1"))
            return refuse(busy)
        }
        Thread.detachNewThread { [self] in
            defer { running.subtract(1, ordering: .relaxed) }
            body()
        }
    }
}
