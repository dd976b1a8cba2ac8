/// The API as an OpenAPI 3 document, served at `/api/openapi.json`. Written by hand, apart from
/// the routes' table (`APIServer.routes`): APITests holds the two to each other, both ways, and
/// calls every route in it.
enum OpenAPIDocument {
    static func text(version: String) -> String {
        template.replacingOccurrences(of: "@VERSION@", with: version)
    }

    private static let template = #"""
{
  "openapi": "3.0.3",
  "info": {
    "title": "StreamLens",
    "version": "@VERSION@",
    "description": "The HTTP API of `streamlens run --http` and `streamlens serve --http` (docs/http-api.md). Under run the pipeline is the one source, named main. Beyond loopback every request carries the bearer token of --http-token-file."
  },
  "security": [{"bearer": []}, {"cookie": []}],
  "paths": {
    "/": {"get": {"summary": "The console (a browser, Accept: text/html), else where things are", "security": [], "responses": {"200": {"description": "The console's page (its login form when a token is needed and no session cookie was given), or pointers to the OpenAPI document, metrics and events", "content": {"text/html": {"schema": {"type": "string"}}, "application/json": {"schema": {"type": "object"}}}}}}},
    "/console/{file}": {"get": {"summary": "The console's static files (CSS, JavaScript)", "security": [], "parameters": [{"name": "file", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "The file"}, "404": {"$ref": "#/components/responses/Error"}}}},
    "/api/login": {"post": {"summary": "The console's login form: the token in, an HTTP-only session cookie out", "security": [], "requestBody": {"required": true, "content": {"application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": {"token": {"type": "string"}}}}}},
      "responses": {"303": {"description": "Right token: a cookie (HttpOnly, SameSite=Strict) and back to /; wrong: back to the form", "headers": {"Set-Cookie": {"schema": {"type": "string"}}, "Location": {"schema": {"type": "string"}}}}}}},
    "/healthz": {"get": {"summary": "The process is alive (Kubernetes liveness)", "responses": {"200": {"description": "Alive", "content": {"application/json": {"schema": {"type": "object", "properties": {"alive": {"type": "boolean"}}}}}}}}},
    "/readyz": {"get": {"summary": "Every source is playing (Kubernetes readiness)", "responses": {
      "200": {"description": "Every source plays", "content": {"application/json": {"schema": {"type": "object", "properties": {"ready": {"type": "boolean"}, "sources": {"type": "array", "items": {"type": "string"}}}}}}},
      "503": {"description": "Sources not playing, each with its state and error", "content": {"application/json": {"schema": {"type": "object", "properties": {"ready": {"type": "boolean"}, "not_playing": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "state": {"type": "string"}, "error": {"type": "string"}}}}}}}}}}}},
    "/metrics": {"get": {"summary": "Prometheus metrics (text exposition format 0.0.4)", "responses": {"200": {"description": "The metrics", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
    "/api/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
    "/api/sources": {
      "get": {"summary": "Every source with its state and figures", "responses": {"200": {"description": "The sources, in the order they were added", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Source"}}}}}}},
      "post": {"summary": "Add a source (serve): answers once it plays or failed to start", "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewSource"}}}},
        "responses": {
          "201": {"description": "Playing", "headers": {"Location": {"schema": {"type": "string"}}}, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SourceDetail"}}}},
          "400": {"$ref": "#/components/responses/Error"},
          "409": {"$ref": "#/components/responses/Error"},
          "413": {"description": "The body is larger than 64 KB"},
          "415": {"$ref": "#/components/responses/Error"},
          "422": {"$ref": "#/components/responses/Error"},
          "503": {"description": "As many sources as may start at once (4) are starting: try again after Retry-After seconds", "headers": {"Retry-After": {"schema": {"type": "integer"}}}}}}
    },
    "/api/sources/{name}": {
      "parameters": [{"$ref": "#/components/parameters/name"}],
      "get": {"summary": "One source: state, figures and each stage's", "responses": {"200": {"description": "The source", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SourceDetail"}}}}, "404": {"$ref": "#/components/responses/Error"}}},
      "delete": {"summary": "End a source (serve): answers once its outputs are finalized", "responses": {"200": {"description": "Ended and forgotten; its last status", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Source"}}}}, "404": {"$ref": "#/components/responses/Error"}, "409": {"$ref": "#/components/responses/Error"}}}
    },
    "/api/sources/{name}/stages": {
      "parameters": [{"$ref": "#/components/parameters/name"}],
      "get": {"summary": "The source's StreamLens stages with every property", "responses": {"200": {"description": "The stages", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Stage"}}}}}, "404": {"$ref": "#/components/responses/Error"}}}
    },
    "/api/sources/{name}/stages/{stage}": {
      "parameters": [{"$ref": "#/components/parameters/name"}, {"name": "stage", "in": "path", "required": true, "description": "The stage element's name (name= in the spec, or GStreamer's default such as lensstylize0)", "schema": {"type": "string"}}],
      "get": {"summary": "One stage with every property", "responses": {"200": {"description": "The stage", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Stage"}}}}, "404": {"$ref": "#/components/responses/Error"}}},
      "patch": {"summary": "Change live properties, all or nothing (the control socket's set)", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]}}, "example": {"strength": 0.5}}}},
        "responses": {"200": {"description": "Every property set; the stage as it is now", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Stage"}}}}, "404": {"$ref": "#/components/responses/Error"}, "415": {"$ref": "#/components/responses/Error"}, "422": {"description": "A property refused (unknown, not live, a reading, out of range, the wrong type); nothing changed", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}}
    },
    "/api/sources/{name}/stages/{stage}/styles/{index}": {
      "parameters": [{"$ref": "#/components/parameters/name"}, {"name": "stage", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "index", "in": "path", "required": true, "description": "0-based, in the stage's styles property (lensstylize)", "schema": {"type": "integer"}}],
      "get": {"summary": "The picture of a style of a lensstylize stage (a thumbnail to pick it by)", "responses": {"200": {"description": "The style's picture", "content": {"image/jpeg": {}, "image/png": {}}}, "404": {"$ref": "#/components/responses/Error"}}}
    },
    "/api/sources/{name}/keys": {
      "parameters": [{"$ref": "#/components/parameters/name"}],
      "post": {"summary": "A key pressed in a view of the source: what a preview window does with it (space pauses; stages' bindings set properties)", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["key"], "properties": {"key": {"type": "string", "example": "+"}}}}}},
        "responses": {"200": {"description": "The commands carried out, each with its answer", "content": {"application/json": {"schema": {"type": "object", "properties": {"done": {"type": "array", "items": {"type": "string"}}}}}}}, "404": {"$ref": "#/components/responses/Error"}, "415": {"$ref": "#/components/responses/Error"}, "422": {"$ref": "#/components/responses/Error"}}}
    },
    "/api/sources/{name}/record": {
      "parameters": [{"$ref": "#/components/parameters/name"}, {"name": "stage", "in": "query", "required": false, "description": "Only this lensrecord (default: every lensrecord of the source)", "schema": {"type": "string"}}, {"name": "reason", "in": "query", "required": false, "description": "What the clip's JSON and event name as its trigger (default api; letters, digits, - _ .)", "schema": {"type": "string"}}],
      "post": {"summary": "An event clip now: each lensrecord of the source records from pre seconds ago to post seconds on (the clip comes later as a clip event)", "responses": {"202": {"description": "The stages asked", "content": {"application/json": {"schema": {"type": "object", "properties": {"recording": {"type": "array", "items": {"type": "string"}}, "reason": {"type": "string"}}}}}}, "404": {"$ref": "#/components/responses/Error"}, "422": {"$ref": "#/components/responses/Error"}}}
    },
    "/api/sources/{name}/whep": {
      "parameters": [{"$ref": "#/components/parameters/name"}, {"$ref": "#/components/parameters/at"}],
      "post": {"summary": "WHEP: watch the source over WebRTC (VP8, encoded once per point whatever the number of viewers)", "requestBody": {"required": true, "content": {"application/sdp": {"schema": {"type": "string", "description": "An SDP offer with a recvonly video transceiver"}}}},
        "responses": {"201": {"description": "The SDP answer, every candidate of the server in it (no trickle)", "headers": {"Location": {"description": "The session: DELETE it to end", "schema": {"type": "string"}}}, "content": {"application/sdp": {"schema": {"type": "string"}}}},
          "400": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"}, "415": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}}}
    },
    "/api/sources/{name}/whep/{session}": {
      "parameters": [{"$ref": "#/components/parameters/name"}, {"name": "session", "in": "path", "required": true, "schema": {"type": "string"}}],
      "delete": {"summary": "End a WHEP session", "responses": {"200": {"description": "Ended"}, "404": {"$ref": "#/components/responses/Error"}}}
    },
    "/api/sources/{name}/mjpeg": {
      "parameters": [{"$ref": "#/components/parameters/name"}, {"$ref": "#/components/parameters/at"}, {"name": "fps", "in": "query", "required": false, "description": "At most this many pictures a second (1-30, default 10); a client that reads slower gets fewer", "schema": {"type": "integer"}}],
      "get": {"summary": "The source as Motion JPEG (for <img>, curl, VLC)", "responses": {"200": {"description": "One JPEG per part", "content": {"multipart/x-mixed-replace": {"schema": {"type": "string"}}}}, "404": {"$ref": "#/components/responses/Error"}}}
    },
    "/api/sources/{name}/regions": {
      "parameters": [{"$ref": "#/components/parameters/name"}, {"$ref": "#/components/parameters/at"}],
      "get": {"summary": "The regions of interest of the next frame to pass the point: lensmetadata's JSON record (schema_version 4: boxes, labels, ids, masks as COCO RLE, the frame's events and zones), its frame -1 (a point counts no frames). Name a point before any videoconvert (which drops what is attached to regions)", "responses": {"200": {"description": "One record", "content": {"application/json": {"schema": {"type": "object"}}}}, "404": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}}}
    },
    "/api/events/{id}/picture": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
      "get": {"summary": "The picture a snapshot event wrote (only files named by an event still kept)", "responses": {"200": {"description": "The picture", "content": {"image/jpeg": {}, "image/png": {}}}, "404": {"$ref": "#/components/responses/Error"}}}
    },
    "/api/events": {"get": {"summary": "Server-Sent Events: every event of every source", "description": "One `data:` line of JSON per event, with `id:`; a client that reconnects with Last-Event-ID (or ?last-event-id=) is given the events after it that are still kept (the last 1000). Types: crossed, entered, left (lenszone), track (lenstrack: a new id), snapshot (lenssnapshot: its path), source-added, source-playing, source-ended, source-failed, source-restarted, source-removed. A comment line every 15 s keeps proxies from closing the stream.",
      "parameters": [{"name": "Last-Event-ID", "in": "header", "required": false, "schema": {"type": "integer"}}, {"name": "last-event-id", "in": "query", "required": false, "schema": {"type": "integer"}}],
      "responses": {"200": {"description": "The stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}}}}}
  },
  "components": {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "The content of --http-token-file, trailing whitespace trimmed; required with it, on every route but the console's page, files and login"},
      "cookie": {"type": "apiKey", "in": "cookie", "name": "streamlens_session", "description": "The console's session, set by POST /api/login; taken wherever the bearer token is"}},
    "parameters": {"name": {"name": "name", "in": "path", "required": true, "description": "The source's name (main under run)", "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}},
      "at": {"name": "at", "in": "query", "required": false, "description": "The element whose output to show (name=… in the pipeline); default the last raw video before a sink", "schema": {"type": "string"}}},
    "responses": {"Error": {"description": "What is wrong", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
    "schemas": {
      "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}, "property": {"type": "string", "description": "The property refused (PATCH)"}}},
      "NewSource": {"type": "object", "required": ["name", "uri"], "additionalProperties": false, "properties": {"name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}, "uri": {"type": "string", "description": "A URI GStreamer opens: file:///…, rtsp://…, http://…"}}},
      "Source": {"type": "object", "required": ["name", "uri", "state", "fps", "frames", "drops", "restarts", "seconds"], "properties": {
        "name": {"type": "string"}, "uri": {"type": "string"},
        "state": {"type": "string", "enum": ["starting", "playing", "ending", "ended", "failed"]},
        "fps": {"type": "number", "description": "Frames a second reaching the first stage over the last 5 s"},
        "frames": {"type": "integer"}, "drops": {"type": "integer"}, "restarts": {"type": "integer"},
        "seconds": {"type": "number", "description": "Since the source was added"}, "error": {"type": "string"},
        "latency_ms": {"type": "number", "description": "Median age of the recent frames leaving the pipeline's slowest stage (live sources)"}}},
      "SourceDetail": {"allOf": [{"$ref": "#/components/schemas/Source"}, {"type": "object", "properties": {"stages": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "frames": {"type": "integer"}, "fps": {"type": "number"}, "drops": {"type": "integer"}, "restarts": {"type": "integer"}}}}}}]},
      "Stage": {"type": "object", "properties": {"name": {"type": "string"}, "factory": {"type": "string"}, "properties": {"type": "array", "items": {"$ref": "#/components/schemas/Property"}},
        "keys": {"type": "array", "description": "Keys the stage binds (POST /api/sources/{name}/keys, a preview window)", "items": {"type": "object", "properties": {"key": {"type": "string"}, "help": {"type": "string"}}}}}},
      "Property": {"type": "object", "properties": {
        "name": {"type": "string"}, "value": {}, "default": {},
        "type": {"type": "string", "enum": ["boolean", "integer", "number", "string"]},
        "minimum": {"type": "number"}, "maximum": {"type": "number"}, "choices": {"type": "array", "items": {"type": "string"}},
        "live": {"type": "boolean", "description": "May change while the pipeline plays (PATCH)"},
        "readonly": {"type": "boolean", "description": "A reading the stage publishes (lenszone's counts)"},
        "help": {"type": "string"}}}
    }
  }
}
"""#
}
