import Foundation
import StreamLensCore
import StreamLensGst
import StreamLensHTTP

/// The API's bodies: every JSON answer is one of these, encoded (sorted keys), never built as text.
enum APIAnswer {
    struct Failure: Encodable {
        var error: String
        /// The property refused (PATCH).
        var property: String?
    }

    struct Root: Encodable {
        var name = "StreamLens"
        var version: String
        var console = "/"
        var openapi = "/api/openapi.json"
        var metrics = "/metrics"
        var events = "/api/events"
    }

    struct Alive: Encodable { var alive = true }

    struct Ready: Encodable {
        var ready = true
        var sources: [String]?
    }

    struct NotReady: Encodable {
        struct Source: Encodable { var name: String; var state: String; var error: String? }
        var ready = false
        var notPlaying: [Source]?
        enum CodingKeys: String, CodingKey { case ready, notPlaying = "not_playing" }
    }

    struct Done: Encodable { var done: [String] }
    struct Recording: Encodable { var recording: [String]; var reason: String }
    struct Ended: Encodable { var ended = true }

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

    /// A stage with every property: its row (type, range, default, live, help) and its value now.
    struct Stage: Encodable {
        var name: String
        var factory: String
        var properties: [Property]
        var keys: [Key]

        struct Key: Encodable { var key: String; var help: String }

        struct Property: Encodable {
            var name: String
            var value: Value
            var defaultValue: Value
            var live: Bool
            var readonly: Bool
            var type: String
            var minimum: Double?
            var maximum: Double?
            var choices: [String]?
            var help: String
            enum CodingKeys: String, CodingKey { case name, value, defaultValue = "default", live, readonly, type, minimum, maximum, choices, help }
        }

        /// A property's value as JSON: true, 3, 0.5, "text" (a number that is not finite: null).
        struct Value: Encodable {
            var value: PropertyValue
            init(_ value: PropertyValue) { self.value = value }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.singleValueContainer()
                switch value {
                case .bool(let b): try c.encode(b)
                case .int(let i): try c.encode(i)
                case .double(let d): if d.isFinite { try c.encode(d) } else { try c.encodeNil() }
                case .string(let s): try c.encode(s)
                }
            }
        }

        init(_ stage: PipelineCommands.StageState) {
            name = stage.name
            factory = stage.factory
            keys = stage.keys.map { Key(key: $0.label, help: $0.help) }
            properties = stage.properties.map { p in
                var property = Property(name: p.spec.name, value: Value(p.value), defaultValue: Value(p.spec.defaultValue), live: p.spec.live,
                                        readonly: p.spec.readOnly, type: "string", help: p.spec.help)
                switch p.spec.kind {
                case .bool: property.type = "boolean"
                case .int(let r): (property.type, property.minimum, property.maximum) = ("integer", Double(r.lowerBound), Double(r.upperBound))
                case .double(let r): (property.type, property.minimum, property.maximum) = ("number", r.lowerBound, r.upperBound)
                case .string: break
                case .choice(let c): property.choices = c
                }
                return property
            }
        }
    }
}

extension APIServer {
    static func message(_ error: any Error) -> String { (error as? ControlError)?.message ?? "\(error)" }

    /// A JSON answer of `value`.
    static func encoded<T: Encodable>(_ status: Int, _ value: T) -> HTTPReply {
        guard var data = try? JSONEncoder.stable().encode(value) else { return .text(500, "could not encode the answer\n") }
        data.append(0x0A)
        return HTTPReply(status: status, headers: [("Content-Type", "application/json")], body: Array(data))
    }

    static func error(_ status: Int, _ message: String, property: String? = nil) -> HTTPReply {
        encoded(status, APIAnswer.Failure(error: message, property: property))
    }

    /// A catalog's refusal: its message (first line) with the status its reason calls for.
    static func error(_ refusal: SourceRefusal) -> HTTPReply {
        let status: Int
        switch refusal.kind {
        case .invalid, .didNotStart: status = 422
        case .taken, .notHere: status = 409
        case .unknown: status = 404
        case .busy: status = 503
        }
        var reply = error(status, String(refusal.message.split(separator: "\n").first ?? ""))
        if refusal.kind == .busy { reply.headers.append(("Retry-After", "2")) }
        return reply
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
