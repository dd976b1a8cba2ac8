import Foundation

/// The API as an OpenAPI 3 document, served at `/api/openapi.json`: made from the routes' table
/// (`APIServer.routes`: each row's path, method and operation, its path parameters added from
/// the pattern), with the shared components below.
enum OpenAPIDocument {
    static func text(version: String) -> String {
        var paths: [String: [String: Any]] = [:]
        for route in APIServer.routes {
            guard var operation = (try? JSONSerialization.jsonObject(with: Data(route.operation.utf8))) as? [String: Any] else {
                preconditionFailure("the OpenAPI operation of \(route.method) \(route.path) is not JSON")
            }
            let given = operation["parameters"] as? [Any] ?? []
            let parameters = route.parameterNames.map(pathParameter) + given
            if !parameters.isEmpty { operation["parameters"] = parameters }
            paths[route.path, default: [:]][route.method.lowercased()] = operation
        }
        let document: [String: Any] = [
            "openapi": "3.0.3",
            "info": ["title": "StreamLens", "version": version,
                     "description": "The HTTP API of `streamlens run --http` and `streamlens serve --http` (docs/http-api.md). Under run the pipeline is the one source, named main. Without a token only the server's own user is served on loopback; with one, every request carries the bearer token of --http-token-file."],
            "security": [["bearer": []], ["cookie": []]],
            "paths": paths,
            "components": (try? JSONSerialization.jsonObject(with: Data(components.utf8))) ?? [:],
        ]
        let data = (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    /// A path parameter of a route's pattern.
    private static func pathParameter(_ name: String) -> Any {
        if name == "name" { return ["$ref": "#/components/parameters/name"] }
        let (type, description): (String, String?) = switch name {
        case "stage": ("string", "The stage element's name (name= in the spec, or GStreamer's default such as lensstylize0)")
        case "index": ("integer", "0-based, in the stage's list of styles (lensstylize's styles)")
        case "id": ("integer", nil)
        default: ("string", nil)
        }
        var parameter: [String: Any] = ["name": name, "in": "path", "required": true, "schema": ["type": type]]
        if let description { parameter["description"] = description }
        return parameter
    }

    private static let components = #"""
{
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
        "state": {"type": "string", "enum": ["starting", "playing", "ending", "ended", "failed", "unclaimed"], "description": "unclaimed: in a cluster, no instance runs it yet"},
        "fps": {"type": "number", "description": "Frames a second reaching the first stage over the last 5 s"},
        "frames": {"type": "integer"}, "drops": {"type": "integer"}, "restarts": {"type": "integer"},
        "seconds": {"type": "number", "description": "Since the source was added"}, "error": {"type": "string"},
        "latency_ms": {"type": "number", "description": "Median age of the recent frames leaving the pipeline's slowest stage (live sources)"},
        "instance": {"type": "string", "description": "In a cluster (serve --config with cluster:), the instance that runs it"}}},
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
"""#
}
