/// Where lensmetadata publishes: `mqtt://HOST[:PORT]/TOPIC` or `mqtts://HOST[:PORT]/TOPIC`
/// (TLS). Parsed here, without C, so the rules have unit tests; the client is StreamLensMQTT.
public struct MQTTLocation: Equatable, Sendable {
    public var broker: URLAuthority
    public var topic: String
    public var tls: Bool
    public var host: String { broker.host }
    public var port: Int { broker.port }

    public init(host: String, port: Int, topic: String, tls: Bool) {
        broker = URLAuthority(host: host, port: port)
        self.topic = topic
        self.tls = tls
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
        broker = try URLAuthority(parsing: authority, defaultPort: tls ? 8883 : 1883, noHost: "no host",
                                  credentials: "no user or password in the URL: use credentials= (a file) or STREAMLENS_MQTT_USER and STREAMLENS_MQTT_PASSWORD",
                                  bad: bad)
    }

    /// The URL as given back in messages.
    public var description: String {
        "\(tls ? "mqtts" : "mqtt")://\(broker.description)/\(topic)"
    }
}
