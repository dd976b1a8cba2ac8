import StreamLensHTTP

/// One request being answered: the request, the route's path parameters, and where the answer
/// goes (with the CORS headers an allowed origin gets).
struct APICall: Sendable {
    let request: HTTPRequest
    let parameters: [String: String]
    let exchange: HTTPExchange
    let cors: [(String, String)]
    /// The caller gave the token (or no token is configured).
    var authenticated = true

    func parameter(_ name: String) -> String { parameters[name] ?? "" }

    func reply(_ response: HTTPReply) {
        var response = response
        response.headers += cors
        exchange.respond(response)
    }

    /// `reply` as a value, for work that answers later from another thread.
    var replying: @Sendable (HTTPReply) -> Void { { reply($0) } }
}

/// One route of the API: its method and path pattern (`{name}` a parameter), who may call it,
/// its OpenAPI operation (what it takes and answers: the document is made from these rows),
/// and its handler. A new route is a handler and a row of `APIServer.routes`.
struct Route: Sendable {
    enum Access: Sendable {
        /// The console's page, files and login form: no token (they hold none).
        case open
        /// /healthz and /readyz: Kubernetes' probes cannot send a token, so these answer without
        /// one, and then tell only whether the process is alive or ready (`APICall.authenticated`).
        case probe
        /// Everything else: the token, or the session cookie, when a token is configured.
        case token
    }
    let method: String
    let path: String
    let access: Access
    /// The OpenAPI operation object, JSON (its path parameters are added from the pattern).
    let operation: String
    let handle: @Sendable (APIServer, APICall) -> Void

    init(_ method: String, _ path: String, _ access: Access = .token, operation: String, _ handle: @escaping @Sendable (APIServer, APICall) -> Void) {
        self.method = method
        self.path = path
        self.access = access
        self.operation = operation
        self.handle = handle
    }

    /// A request about one source that its holder answers, when another instance of a cluster
    /// runs it (`SourceCatalog.holder`): the source itself, its stages, keys, clips and WHEP
    /// (the browser then reaches the holder's video directly). Not adding or removing it (etcd
    /// does, from any instance), nor the streams (MJPEG, regions), which stay on their instance.
    var answeredByHolder: Bool {
        path.hasPrefix("/api/sources/{name}") && !(method == "DELETE" && path == "/api/sources/{name}")
            && !path.hasSuffix("/mjpeg") && !path.hasSuffix("/regions")
    }

    /// The parameters of `path` when it matches this route's pattern.
    func match(_ path: String) -> [String: String]? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        let segments = parts.last == "" && parts.count > 1 ? Array(parts.dropLast()) : Array(parts)
        let want = self.path == "/" ? [""] : self.path.split(separator: "/").map(String.init)
        guard want.count == segments.count else { return nil }
        var parameters: [String: String] = [:]
        for (w, s) in zip(want, segments) {
            if w.hasPrefix("{") {
                guard !s.isEmpty else { return nil }
                parameters[String(w.dropFirst().dropLast())] = String(s)
            } else if w != s {
                return nil
            }
        }
        return parameters
    }

    /// The names of its path parameters, in order.
    var parameterNames: [String] {
        path.split(separator: "/").filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) }
    }
}
