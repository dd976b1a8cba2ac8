import Foundation
import StreamLensCore
import StreamLensGst
import StreamLensHTTP
import Synchronization

/// `--http`: the HTTP API of `streamlens run` and `serve` (docs/http-api.md), on `HTTPServer`:
/// who may call it and how a request finds its route, here; the routes in one table
/// (`APIServer+Routes`), their handlers by concern (`+Sources`, `+Video`, `+Console`).
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
    let catalog: any SourceCatalog
    let settings: Settings
    let version: String
    /// What waits, each on a thread of its own.
    let waiting = WaitingWork(limit: 32)
    /// Taps of sources that are gone, let go one at a time.
    private let sweeping = DispatchQueue(label: "streamlens.api.sweep")
    /// Open event streams, for their keep-alive comments.
    let streams = Mutex<[UInt64: HTTPExchange]>([:])
    private nonisolated(unsafe) let keepAlive: DispatchSourceTimer
    static let keepAliveSeconds = 15
    /// Video for browsers (WHEP, MJPEG), by source and point.
    let web = WebViews()
    let console = ConsoleFiles()
    /// The console's session cookie after a login with the token: random, made at start (a
    /// restart logs everyone out), never the token itself.
    let session: String = {
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

    /// Who may call, then the route: the user (loopback without a token), the Host (DNS
    /// rebinding), the Origin (CORS), the token (or the console's cookie), then the table.
    func handle(_ request: HTTPRequest, _ exchange: HTTPExchange) {
        // With no token, only this server's own user (and root) is served: another user of this
        // machine reaches loopback too, and a source added over the API reads and opens what
        // this process may, so it would be their way into files and ports that are not theirs.
        if settings.token == nil, !Self.isOwnUser(request.peerUID) {
            var response = Self.error(401, "this server serves its own user only (uid \(geteuid())) without a token"
                                      + (request.peerUID.map { "; you are uid \($0)" } ?? "; the kernel could not say who you are")
                                      + ": its owner can start it with --http-token-file FILE, and anyone given the token is served")
            response.headers.append(("WWW-Authenticate", "Bearer realm=\"streamlens\""))
            return exchange.respond(response)
        }
        // With no token the API is loopback's alone: a Host header naming anything else is a
        // page of some other site whose name was pointed at 127.0.0.1 (DNS rebinding), which
        // the Origin check below would take for this server's own.
        if settings.token == nil, let host = request.header("host"), !Self.isLoopbackHost(host) {
            return exchange.respond(Self.error(403, "Host \(host) is not this machine's loopback name (localhost, 127.0.0.1, [::1]): refused"))
        }
        let origin = request.header("origin")
        let allowedOrigin = origin != nil && origin == settings.allowOrigin
        let cors: [(String, String)] = allowedOrigin ? [("Access-Control-Allow-Origin", origin!), ("Vary", "Origin")] : []
        if let origin, !allowedOrigin, origin != request.header("host").map({ "http://\($0)" }) {
            // A page of another site calling the API through the user's browser (which sends
            // simple requests without asking first): refused before anything is done.
            return exchange.respond(Self.error(403, "requests from \(origin) are not allowed (--http-allow-origin ORIGIN allows one origin)"))
        }
        let call = { (parameters: [String: String]) in APICall(request: request, parameters: parameters, exchange: exchange, cors: cors) }
        if request.method == "OPTIONS" {
            guard let route = Self.routes.first(where: { $0.match(request.path) != nil }) else {
                return call([:]).reply(Self.error(404, "no such route: \(request.path) (the routes: /api/openapi.json)"))
            }
            let allow = Self.allowed(route.path)
            var response = HTTPReply(status: 204, headers: [("Allow", allow)])
            if !cors.isEmpty {
                response.headers += [("Access-Control-Allow-Methods", allow), ("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID"),
                                     ("Access-Control-Max-Age", "600")]
            }
            return call([:]).reply(response)
        }
        let found = Self.route(request.method, request.path)
        let access: Route.Access? = if case .success(let (route, _)) = found { route.access } else { nil }
        let tokenGiven = settings.token.map { authenticated(request, token: $0) } ?? true
        if !tokenGiven, access != .open, access != .probe {
            var response = Self.error(401, "a bearer token is required (Authorization: Bearer TOKEN, the content of --http-token-file; or the console's login)")
            response.headers.append(("WWW-Authenticate", "Bearer realm=\"streamlens\""))
            return call([:]).reply(response)
        }
        switch found {
        case .success(let (route, parameters)):
            var c = call(parameters)
            c.authenticated = tokenGiven
            if route.answeredByHolder, let name = parameters["name"], let holder = catalog.holder(of: name) {
                return forward(c, to: holder, source: name)
            }
            route.handle(self, c)
        case .failure(let refusal): call([:]).reply(refusal)
        }
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

    /// Compared in constant time for tokens of the expected length: every byte of the expected
    /// token is looked at whatever the given one holds.
    static func sameToken(_ given: [UInt8], _ expected: [UInt8]) -> Bool {
        var difference = UInt8(given.count == expected.count ? 0 : 1)
        for i in 0..<expected.count { difference |= (i < given.count ? given[i] : 0) ^ expected[i] }
        return difference == 0 && !expected.isEmpty
    }

    /// The bearer token, or the console's session cookie.
    func authenticated(_ request: HTTPRequest, token: String) -> Bool {
        if let given = request.header("authorization").flatMap({ $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }) {
            return Self.sameToken(Array(given.utf8), Array(token.utf8))
        }
        let cookies = (request.header("cookie") ?? "").split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        let prefix = Self.sessionCookie + "="
        return cookies.contains { $0.hasPrefix(prefix) && Self.sameToken(Array($0.dropFirst(prefix.count).utf8), Array(session.utf8)) }
    }
}
