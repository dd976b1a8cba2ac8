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
  "security": [{"bearer": []}],
  "paths": {
    "/": {"get": {"summary": "Where things are", "responses": {"200": {"description": "Pointers to the OpenAPI document, metrics and events", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
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
          "422": {"$ref": "#/components/responses/Error"}}}
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
    "/api/events": {"get": {"summary": "Server-Sent Events: every event of every source", "description": "One `data:` line of JSON per event, with `id:`; a client that reconnects with Last-Event-ID (or ?last-event-id=) is given the events after it that are still kept (the last 1000). Types: crossed, entered, left (lenszone), track (lenstrack: a new id), snapshot (lenssnapshot: its path), source-added, source-playing, source-ended, source-failed, source-restarted, source-removed. A comment line every 15 s keeps proxies from closing the stream.",
      "parameters": [{"name": "Last-Event-ID", "in": "header", "required": false, "schema": {"type": "integer"}}, {"name": "last-event-id", "in": "query", "required": false, "schema": {"type": "integer"}}],
      "responses": {"200": {"description": "The stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}}}}}
  },
  "components": {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "The content of --http-token-file, trailing whitespace trimmed; required with it, on every route"}},
    "parameters": {"name": {"name": "name", "in": "path", "required": true, "description": "The source's name (main under run)", "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}}},
    "responses": {"Error": {"description": "What is wrong", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
    "schemas": {
      "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}, "property": {"type": "string", "description": "The property refused (PATCH)"}}},
      "NewSource": {"type": "object", "required": ["name", "uri"], "additionalProperties": false, "properties": {"name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}, "uri": {"type": "string", "description": "A URI GStreamer opens: file:///…, rtsp://…, http://…"}}},
      "Source": {"type": "object", "required": ["name", "uri", "state", "fps", "frames", "drops", "restarts", "seconds"], "properties": {
        "name": {"type": "string"}, "uri": {"type": "string"},
        "state": {"type": "string", "enum": ["starting", "playing", "ending", "ended", "failed"]},
        "fps": {"type": "number", "description": "Frames a second reaching the first stage over the last 5 s"},
        "frames": {"type": "integer"}, "drops": {"type": "integer"}, "restarts": {"type": "integer"},
        "seconds": {"type": "number", "description": "Since the source was added"}, "error": {"type": "string"}}},
      "SourceDetail": {"allOf": [{"$ref": "#/components/schemas/Source"}, {"type": "object", "properties": {"stages": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "frames": {"type": "integer"}, "fps": {"type": "number"}, "drops": {"type": "integer"}, "restarts": {"type": "integer"}}}}}}]},
      "Stage": {"type": "object", "properties": {"name": {"type": "string"}, "factory": {"type": "string"}, "properties": {"type": "array", "items": {"$ref": "#/components/schemas/Property"}}}},
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
