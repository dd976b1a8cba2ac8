import StreamLensCore
import StreamLensHTTP

/// Every route of the API, in one table: method, path, access, what it takes and answers
/// (OpenAPI), handler. The OpenAPI document is made from it (`OpenAPIDocument`). HEAD is answered
/// as GET; OPTIONS from the table.
extension APIServer {
    static let routes: [Route] = [
        Route("GET", "/", .open, operation: #"""
            {"summary": "The console (a browser, Accept: text/html), else where things are", "security": [], "responses": {"200": {"description": "The console's page (its login form when a token is needed and no session cookie was given), or pointers to the OpenAPI document, metrics and events", "content": {"text/html": {"schema": {"type": "string"}}, "application/json": {"schema": {"type": "object"}}}}}}
            """#) { $0.root($1) },
        Route("GET", "/console/{file}", .open, operation: #"""
            {"summary": "The console's static files (CSS, JavaScript)", "security": [], "responses": {"200": {"description": "The file"}, "404": {"$ref": "#/components/responses/Error"}}}
            """#) { $1.reply($0.consoleFile($1.parameter("file"))) },
        Route("POST", "/api/login", .open, operation: #"""
            {"summary": "The console's login form: the token in, an HTTP-only session cookie out", "security": [], "requestBody": {"required": true, "content": {"application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": {"token": {"type": "string"}}}}}},
             "responses": {"303": {"description": "Right token: a cookie (HttpOnly, SameSite=Strict) and back to /; wrong: back to the form", "headers": {"Set-Cookie": {"schema": {"type": "string"}}, "Location": {"schema": {"type": "string"}}}}}}
            """#) { $1.reply($0.login($1.request)) },
        Route("GET", "/healthz", .probe, operation: #"""
            {"summary": "The process is alive (Kubernetes liveness; no token needed)", "responses": {"200": {"description": "Alive", "content": {"application/json": {"schema": {"type": "object", "properties": {"alive": {"type": "boolean"}}}}}}}}
            """#) { _, call in call.reply(encoded(200, APIAnswer.Alive())) },
        Route("GET", "/readyz", .probe, operation: #"""
            {"summary": "Every source is playing (Kubernetes readiness; without the token, only ready true or false)", "responses": {
              "200": {"description": "Every source plays", "content": {"application/json": {"schema": {"type": "object", "properties": {"ready": {"type": "boolean"}, "sources": {"type": "array", "items": {"type": "string"}}}}}}},
              "503": {"description": "Sources not playing, each with its state and error", "content": {"application/json": {"schema": {"type": "object", "properties": {"ready": {"type": "boolean"}, "not_playing": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "state": {"type": "string"}, "error": {"type": "string"}}}}}}}}}}}
            """#) { $1.reply($0.readiness(detailed: $1.authenticated)) },
        Route("GET", "/metrics", operation: #"""
            {"summary": "Prometheus metrics (text exposition format 0.0.4)", "responses": {"200": {"description": "The metrics", "content": {"text/plain": {"schema": {"type": "string"}}}}}}
            """#) { _, call in call.reply(.text(200, MetricsRegistry.shared.exposition(), type: "text/plain; version=0.0.4; charset=utf-8")) },
        Route("GET", "/api/openapi.json", operation: #"""
            {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3", "content": {"application/json": {"schema": {"type": "object"}}}}}}
            """#) { server, call in call.reply(.text(200, OpenAPIDocument.text(version: server.version), type: "application/json")) },
        Route("GET", "/api/sources", operation: #"""
            {"summary": "Every source with its state and figures", "responses": {"200": {"description": "The sources, in the order they were added", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Source"}}}}}}}
            """#) { $1.reply(encoded(200, $0.catalog.statuses())) },
        Route("POST", "/api/sources", operation: #"""
            {"summary": "Add a source (serve): answers once it plays or failed to start", "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewSource"}}}},
             "responses": {
               "201": {"description": "Playing", "headers": {"Location": {"schema": {"type": "string"}}}, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SourceDetail"}}}},
               "400": {"$ref": "#/components/responses/Error"}, "409": {"$ref": "#/components/responses/Error"}, "413": {"description": "The body is larger than 64 KB"},
               "415": {"$ref": "#/components/responses/Error"}, "422": {"$ref": "#/components/responses/Error"},
               "503": {"description": "As many sources as may start at once (4) are starting: try again after Retry-After seconds", "headers": {"Retry-After": {"schema": {"type": "integer"}}}}}}
            """#) { $0.addSource($1) },
        Route("GET", "/api/sources/{name}", operation: #"""
            {"summary": "One source: state, figures and each stage's", "responses": {"200": {"description": "The source", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SourceDetail"}}}}, "404": {"$ref": "#/components/responses/Error"}}}
            """#) { $1.reply($0.source($1.parameter("name"))) },
        Route("DELETE", "/api/sources/{name}", operation: #"""
            {"summary": "End a source (serve): answers once its outputs are finalized", "responses": {"200": {"description": "Ended and forgotten; its last status", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Source"}}}}, "404": {"$ref": "#/components/responses/Error"}, "409": {"$ref": "#/components/responses/Error"}}}
            """#) { $0.removeSource($1) },
        Route("GET", "/api/sources/{name}/stages", operation: #"""
            {"summary": "The source's StreamLens stages with every property", "responses": {"200": {"description": "The stages", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Stage"}}}}}, "404": {"$ref": "#/components/responses/Error"}}}
            """#) { $1.reply($0.stages($1.parameter("name"))) },
        Route("GET", "/api/sources/{name}/stages/{stage}", operation: #"""
            {"summary": "One stage with every property", "responses": {"200": {"description": "The stage", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Stage"}}}}, "404": {"$ref": "#/components/responses/Error"}}}
            """#) { $1.reply($0.stage($1.parameter("name"), $1.parameter("stage"))) },
        Route("PATCH", "/api/sources/{name}/stages/{stage}", operation: #"""
            {"summary": "Change live properties, all or nothing (the control socket's set): each value checked by the stage before anything is set", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]}}, "example": {"strength": 0.5}}}},
             "responses": {"200": {"description": "Every property set; the stage as it is now", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Stage"}}}}, "404": {"$ref": "#/components/responses/Error"}, "415": {"$ref": "#/components/responses/Error"}, "422": {"description": "A property refused (unknown, not live, a reading, out of range, the wrong type, a control character, or the stage's own check: a file missing or not a picture, a device this machine lacks); nothing changed", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}}
            """#) { $1.reply($0.patch($1)) },
        Route("GET", "/api/sources/{name}/stages/{stage}/styles/{index}", operation: #"""
            {"summary": "The picture of a style of a lensstylize stage (a thumbnail to pick it by)", "responses": {"200": {"description": "The style's picture", "content": {"image/jpeg": {}, "image/png": {}}}, "404": {"$ref": "#/components/responses/Error"}}}
            """#) { $1.reply($0.stylePicture($1.parameter("name"), $1.parameter("stage"), $1.parameter("index"))) },
        Route("POST", "/api/sources/{name}/keys", operation: #"""
            {"summary": "A key pressed in a view of the source: what a preview window does with it (space pauses; stages' bindings set properties)", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["key"], "properties": {"key": {"type": "string", "example": "+"}}}}}},
             "responses": {"200": {"description": "The commands carried out, each with its answer", "content": {"application/json": {"schema": {"type": "object", "properties": {"done": {"type": "array", "items": {"type": "string"}}}}}}}, "404": {"$ref": "#/components/responses/Error"}, "415": {"$ref": "#/components/responses/Error"}, "422": {"$ref": "#/components/responses/Error"}}}
            """#) { $1.reply($0.press($1)) },
        Route("POST", "/api/sources/{name}/record", operation: #"""
            {"summary": "An event clip now: each lensrecord of the source records from pre seconds ago to post seconds on (the clip comes later as a clip event)",
             "parameters": [{"name": "stage", "in": "query", "required": false, "description": "Only this lensrecord (default: every lensrecord of the source)", "schema": {"type": "string"}}, {"name": "reason", "in": "query", "required": false, "description": "What the clip's JSON and event name as its trigger (default api; letters, digits, - _ .)", "schema": {"type": "string"}}],
             "responses": {"202": {"description": "The stages asked", "content": {"application/json": {"schema": {"type": "object", "properties": {"recording": {"type": "array", "items": {"type": "string"}}, "reason": {"type": "string"}}}}}}, "404": {"$ref": "#/components/responses/Error"}, "422": {"$ref": "#/components/responses/Error"}}}
            """#) { $1.reply($0.record($1)) },
        Route("POST", "/api/sources/{name}/whep", operation: #"""
            {"summary": "WHEP: watch the source over WebRTC (VP8, encoded once per point whatever the number of viewers)", "parameters": [{"$ref": "#/components/parameters/at"}], "requestBody": {"required": true, "content": {"application/sdp": {"schema": {"type": "string", "description": "An SDP offer with a recvonly video transceiver"}}}},
             "responses": {"201": {"description": "The SDP answer, every candidate of the server in it (no trickle)", "headers": {"Location": {"description": "The session: DELETE it to end", "schema": {"type": "string"}}}, "content": {"application/sdp": {"schema": {"type": "string"}}}},
               "400": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"}, "415": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}}}
            """#) { $0.whep($1) },
        Route("DELETE", "/api/sources/{name}/whep/{session}", operation: #"""
            {"summary": "End a WHEP session", "responses": {"200": {"description": "Ended"}, "404": {"$ref": "#/components/responses/Error"}}}
            """#) { $1.reply($0.endWHEP($1.parameter("name"), $1.parameter("session"))) },
        Route("GET", "/api/sources/{name}/mjpeg", operation: #"""
            {"summary": "The source as Motion JPEG (for <img>, curl, VLC)", "parameters": [{"$ref": "#/components/parameters/at"}, {"name": "fps", "in": "query", "required": false, "description": "At most this many pictures a second (1-30, default 10); a client that reads slower gets fewer", "schema": {"type": "integer"}}],
             "responses": {"200": {"description": "One JPEG per part", "content": {"multipart/x-mixed-replace": {"schema": {"type": "string"}}}}, "404": {"$ref": "#/components/responses/Error"}}}
            """#) { $0.mjpeg($1) },
        Route("GET", "/api/sources/{name}/regions", operation: #"""
            {"summary": "The regions of interest of the next frame to pass the point: lensmetadata's JSON record (schema_version 4: boxes, labels, ids, masks as COCO RLE, the frame's events and zones), its frame -1 (a point counts no frames). Name a point before any videoconvert (which drops what is attached to regions)", "parameters": [{"$ref": "#/components/parameters/at"}],
             "responses": {"200": {"description": "One record", "content": {"application/json": {"schema": {"type": "object"}}}}, "404": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}}}
            """#) { $0.regions($1) },
        Route("GET", "/api/events", operation: #"""
            {"summary": "Server-Sent Events: every event of every source", "description": "One `data:` line of JSON per event, with `id:`; a client that reconnects with Last-Event-ID (or ?last-event-id=) is given the events after it that are still kept (the last 1000). Types: crossed, entered, left (lenszone), track (lenstrack: a new id), snapshot (lenssnapshot: its path), clip (lensrecord), source-added, source-playing, source-ended, source-failed, source-restarted, source-removed. A comment line every 15 s keeps proxies from closing the stream.",
             "parameters": [{"name": "Last-Event-ID", "in": "header", "required": false, "schema": {"type": "integer"}}, {"name": "last-event-id", "in": "query", "required": false, "schema": {"type": "integer"}}],
             "responses": {"200": {"description": "The stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}}}}
            """#) { $0.events($1) },
        Route("GET", "/api/events/{id}/picture", operation: #"""
            {"summary": "The picture a snapshot event wrote (only files named by an event still kept)", "responses": {"200": {"description": "The picture", "content": {"image/jpeg": {}, "image/png": {}}}, "404": {"$ref": "#/components/responses/Error"}}}
            """#) { $1.reply($0.eventPicture($1.parameter("id"))) },
    ]

    /// The route for a method and path (HEAD as GET), its parameters; or the answer when there
    /// is none (404 no such path, 405 not that method).
    static func route(_ method: String, _ path: String) -> Result<(Route, [String: String]), HTTPReply> {
        let candidates = routes.compactMap { route in route.match(path).map { (route, $0) } }
        guard let first = candidates.first else {
            return .failure(error(404, "no such route: \(path) (the routes: /api/openapi.json)"))
        }
        let wanted = method == "HEAD" ? "GET" : method
        if let found = candidates.first(where: { $0.0.method == wanted }) { return .success(found) }
        var reply = error(405, "\(method) is not allowed on \(first.0.path) (allowed: \(allowed(first.0.path)))")
        reply.headers.append(("Allow", allowed(first.0.path)))
        return .failure(reply)
    }

    /// "METHOD /path" of every route, for tests that hold the document and the server to the table.
    public static var routeNames: [String] { routes.map { "\($0.method) \($0.path)" } }

    static func allowed(_ path: String) -> String {
        let methods = routes.filter { $0.path == path }.map(\.method)
        return (methods + (methods.contains("GET") ? ["HEAD"] : []) + ["OPTIONS"]).joined(separator: ", ")
    }
}

