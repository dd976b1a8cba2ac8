/// Where lensmetadata publishes: `mqtt://HOST[:PORT]/TOPIC` or `mqtts://HOST[:PORT]/TOPIC`
/// (TLS). Parsed here, without C, so the rules have unit tests; the client is StreamLensMQTT.
public struct MQTTLocation: Equatable, Sendable {
    public var host: String
    public var port: Int
    public var topic: String
    public var tls: Bool

    public init(host: String, port: Int, topic: String, tls: Bool) {
        self.host = host; self.port = port; self.topic = topic; self.tls = tls
    }

    /// True when `location` names a broker rather than a file (the scheme decides).
    public static func isBrokerURL(_ location: String) -> Bool {
        location.hasPrefix("mqtt://") || location.hasPrefix("mqtts://")
    }

    /// Parses a URL; a StageError naming the `location` property and what is wrong.
    /// The port defaults to 1883 (mqtt) or 8883 (mqtts), MQTT's registered ports. IPv6 hosts go
    /// in brackets (`mqtt://[::1]:1883/t`). The topic is everything after the first `/` after
    /// the host, taken as written (MQTT topics may hold any character but the wildcards).
    public init(parsing location: String) throws {
        func bad(_ why: String) -> StageError { StageError("property location=\(location): \(why)") }
        let rest: Substring
        if location.hasPrefix("mqtts://") {
            tls = true; rest = location.dropFirst("mqtts://".count)
        } else if location.hasPrefix("mqtt://") {
            tls = false; rest = location.dropFirst("mqtt://".count)
        } else if let colon = location.range(of: "://") {
            throw bad("unknown scheme \(location[..<colon.lowerBound]) (mqtt:// or mqtts://, or a file path)")
        } else {
            throw bad("not an MQTT URL (mqtt://HOST:PORT/TOPIC)")
        }
        guard let slash = rest.firstIndex(of: "/") else {
            throw bad("no topic: write mqtt://HOST:PORT/TOPIC, e.g. mqtt://127.0.0.1:1883/streamlens/camera1")
        }
        let authority = rest[..<slash]
        topic = String(rest[rest.index(after: slash)...])
        guard !topic.isEmpty else {
            throw bad("no topic: write mqtt://HOST:PORT/TOPIC, e.g. mqtt://127.0.0.1:1883/streamlens/camera1")
        }
        guard !topic.contains("+"), !topic.contains("#") else {
            throw bad("topic \(topic) holds a wildcard (+ or #): one publishes to a plain topic")
        }
        guard !authority.contains("@") else {
            throw bad("no user or password in the URL: use credentials= (a file) or STREAMLENS_MQTT_USER and STREAMLENS_MQTT_PASSWORD")
        }
        var hostPart = authority, portPart: Substring? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw bad("unclosed [ in the host") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("expected :PORT after ]") }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw bad("no host") }
        host = String(hostPart)
        if let portPart {
            guard let p = Int(portPart), (1...65535).contains(p) else {
                throw bad("bad port \(portPart) (1…65535)")
            }
            port = p
        } else {
            port = tls ? 8883 : 1883
        }
    }

    /// The URL as given back in messages.
    public var description: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return "\(tls ? "mqtts" : "mqtt")://\(h):\(port)/\(topic)"
    }
}
