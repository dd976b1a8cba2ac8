import Foundation
import StreamLensCore

/// A value from the config with the line it is on, for messages about it.
public struct Located<Value: Sendable & Equatable>: Sendable, Equatable {
    public var value: Value
    public var line: Int
    public init(_ value: Value, line: Int) { (self.value, self.line) = (value, line) }
}

/// What is wrong with a config file: the file, the line and the key, in one message.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var message: String
    public init(file: String, line: Int, _ message: String) { (self.file, self.line, self.message) = (file, line, message) }
    public var description: String { "\(file):\(line): \(message)" }
}

/// `streamlens serve --config FILE`: the HTTP listener, the pipeline template, its variables and
/// the cameras, as a YAML file says them (docs/deploy.md shows one). Read whole and checked for
/// its shape here (keys, kinds of value, names given twice); what needs GStreamer (URIs, the
/// template, stage properties) is checked by the CLI before anything starts, with these lines.
public struct ServeConfig: Sendable, Equatable {
    public struct HTTP: Sendable, Equatable {
        /// `[ADDRESS:]PORT`, as `--http` takes it.
        public var listen: Located<String>
        public var tokenFile: Located<String>?
        public var allowOrigin: Located<String>?
    }

    /// One property of one stage of a source's pipeline (`stages: {detect: {interval: 3}}`).
    public struct StageValue: Sendable, Equatable {
        public var element: String
        public var property: String
        public var value: String
        public var line: Int
    }

    public struct Source: Sendable, Equatable {
        public var name: String
        public var uri: String
        /// Template variables for this source only (over the file's `variables`).
        public var variables: [String: String]
        public var stages: [StageValue]
        public var line: Int
        public var uriLine: Int
    }

    /// `cluster:`: serve as one of several instances sharing one camera list in etcd
    /// (docs/scaling.md).
    public struct Cluster: Sendable, Equatable {
        /// etcd client URLs (`http://HOST:PORT`), tried in turn.
        public var etcd: [String]
        /// This instance's name in the cluster (the host name by default).
        public var instance: String
        /// The lease's time to live, seconds: how long a dead instance's cameras wait.
        public var leaseTTL: Int
        /// At most this many cameras here (nil: no limit but the fair share).
        public var limit: Int?
        /// The keys' prefix in etcd (one cluster per prefix).
        public var prefix: String
        /// The HTTP address the other instances reach this one's API at (the listener's by default).
        public var advertise: String?
        public var line: Int

        public static let defaultLeaseTTL = 5
        public static let defaultPrefix = "/streamlens/"
    }

    public var file: String
    public var http: HTTP?
    public var cluster: Cluster?
    /// A control socket's path (`--control`).
    public var control: Located<String>?
    /// A name under Pipelines/, a path, or the pipeline's text, as `serve TEMPLATE` takes it.
    public var pipeline: Located<String>
    public var variables: [String: String]
    /// Where what the API changes is kept (`ServeState`): `state:`, or beside the file.
    public var statePath: String
    public var sources: [Source]

    static let keys = ["http", "control", "pipeline", "variables", "state", "sources", "cluster"]

    /// Reads and checks `path`.
    public static func load(path: String) throws(ConfigError) -> ServeConfig {
        guard let data = FileManager.default.contents(atPath: path) else {
            let why = FileManager.default.fileExists(atPath: path) ? "cannot be read (permission denied?)" : "no such file"
            throw ConfigError(file: path, line: 1, "the config \(why)")
        }
        guard let text = String(data: data, encoding: .utf8) else { throw ConfigError(file: path, line: 1, "the config is not UTF-8 text") }
        return try parse(text, file: path)
    }

    /// Reads and checks YAML `text` (`file` names it in messages and places the state beside it).
    public static func parse(_ text: String, file: String) throws(ConfigError) -> ServeConfig {
        let root: YAMLNode?
        do { root = try YAMLDocument.load(text) } catch { throw ConfigError(file: file, line: error.line, error.message) }
        guard let root else { throw ConfigError(file: file, line: 1, "the config is empty: it needs pipeline: and sources: (or http: to add them later)") }
        let r = Reader(file: file)
        let top = try r.mapping(root, "the config", keys: keys)
        guard let pipelineNode = top["pipeline"], let pipeline = try r.scalar(pipelineNode, "pipeline"), !pipeline.isEmpty else {
            throw ConfigError(file: file, line: top["pipeline"]?.line ?? root.line, "pipeline: is missing (a name under Pipelines/, a file, or the pipeline's text using ${URI})")
        }
        var config = ServeConfig(file: file, pipeline: Located(pipeline, line: pipelineNode.line), variables: [:],
                                 statePath: Self.defaultStatePath(for: file), sources: [])
        if let node = top["http"] {
            let http = try r.mapping(node, "http", keys: ["listen", "token-file", "allow-origin"])
            guard let listen = try r.located(http["listen"], "http: listen") else {
                throw ConfigError(file: file, line: r.keyLine(root, "http") ?? node.line, "http: needs listen: [ADDRESS:]PORT (e.g. 127.0.0.1:8080)")
            }
            config.http = HTTP(listen: listen,
                               tokenFile: try r.located(http["token-file"], "http: token-file"),
                               allowOrigin: try r.located(http["allow-origin"], "http: allow-origin"))
        }
        if let node = top["cluster"] { config.cluster = try r.cluster(node, keyLine: r.keyLine(root, "cluster") ?? node.line) }
        config.control = try r.located(top["control"], "control")
        if let state = try r.located(top["state"], "state") { config.statePath = state.value }
        if let node = top["variables"] { config.variables = try r.variables(node, "variables") }
        if let node = top["sources"] {
            guard case .sequence(let items) = node.value else {
                throw ConfigError(file: file, line: node.line, "sources: is \(node.kind); it is a list, one '- name: … uri: …' per camera")
            }
            for (i, item) in items.enumerated() {
                let source = try r.source(item, index: i)
                if let first = config.sources.first(where: { $0.name == source.name }) {
                    throw ConfigError(file: file, line: source.line, "sources: the name \(source.name) is given twice (first on line \(first.line))")
                }
                config.sources.append(source)
            }
        }
        return config
    }

    /// `site.yaml` → `site.state.json` in the same folder.
    public static func defaultStatePath(for file: String) -> String {
        let url = URL(fileURLWithPath: file)
        return url.deletingPathExtension().appendingPathExtension("state.json").path
    }

    /// Template variables: ${NAME} and ${URI} are each source's own; in a cluster ${INSTANCE}
    /// and ${CLAIM} are the instance's name and the claim's revision.
    static let reservedVariables: Set<String> = ["NAME", "URI", "INSTANCE", "CLAIM"]
}

extension ServeConfig.Cluster {
    /// Why an etcd endpoint is not one (nil: it is): http://HOST:PORT (etcd's JSON gateway on
    /// its client port; no TLS).
    public static func endpointProblem(_ endpoint: String) -> String? {
        guard let c = URLComponents(string: endpoint), c.scheme == "http", let host = c.host, !host.isEmpty, c.port != nil,
              c.path.isEmpty || c.path == "/" else {
            return endpoint.hasPrefix("https://") ? "\(endpoint): https is not supported (etcd's client port over plain HTTP; keep it on a private network)"
                : "\(endpoint) is not an etcd client URL (http://HOST:PORT, e.g. http://127.0.0.1:2379)"
        }
        return nil
    }
}

/// Reads nodes against the schema; every refusal names the file, the line and the key.
private struct Reader {
    let file: String

    func fail(_ line: Int, _ message: String) -> ConfigError { ConfigError(file: file, line: line, message) }

    /// A mapping whose keys are among `keys`, by key.
    func mapping(_ node: YAMLNode, _ what: String, keys: [String]?) throws(ConfigError) -> [String: YAMLNode] {
        guard case .mapping(let pairs) = node.value else { throw fail(node.line, "\(what) is \(node.kind); it should be a mapping (key: value lines)") }
        var out: [String: YAMLNode] = [:]
        for pair in pairs {
            if let keys, !keys.contains(pair.key) {
                throw fail(pair.keyLine, "\(what): unknown key \(pair.key) (the keys are \(keys.joined(separator: ", ")))")
            }
            out[pair.key] = pair.value
        }
        return out
    }

    /// The line of `key` in mapping `node`.
    func keyLine(_ node: YAMLNode, _ key: String) -> Int? {
        guard case .mapping(let pairs) = node.value else { return nil }
        return pairs.first { $0.key == key }?.keyLine
    }

    /// A single value as text; nil for an empty one (`key:` or `~`).
    func scalar(_ node: YAMLNode, _ what: String) throws(ConfigError) -> String? {
        guard case .scalar(let text, let plain) = node.value else { throw fail(node.line, "\(what) is \(node.kind); it should be a single value") }
        if plain && (text.isEmpty || text == "~" || text == "null") { return nil }
        return text
    }

    func located(_ node: YAMLNode?, _ what: String) throws(ConfigError) -> Located<String>? {
        guard let node, let text = try scalar(node, what) else { return nil }
        return Located(text, line: node.line)
    }

    func variables(_ node: YAMLNode, _ what: String) throws(ConfigError) -> [String: String] {
        guard case .mapping(let pairs) = node.value else { throw fail(node.line, "\(what) is \(node.kind); it should be a mapping of NAME: value") }
        var out: [String: String] = [:]
        for pair in pairs {
            let valid = !pair.key.isEmpty && pair.key.unicodeScalars.allSatisfy { ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
                && !("0"..."9").contains(pair.key.unicodeScalars.first!)
            guard valid else { throw fail(pair.keyLine, "\(what): \(pair.key) is not a variable name (capitals, digits and _, as ${NAME} in the template)") }
            guard !ServeConfig.reservedVariables.contains(pair.key) else {
                let whose = ["NAME", "URI"].contains(pair.key) ? "each source's own (its name: and uri:)" : "set by serve in a cluster (the instance, the claim's revision)"
                throw fail(pair.keyLine, "\(what): \(pair.key) is \(whose), not a variable to set")
            }
            out[pair.key] = try scalar(pair.value, "\(what): \(pair.key)") ?? ""
        }
        return out
    }

    func cluster(_ node: YAMLNode, keyLine: Int) throws(ConfigError) -> ServeConfig.Cluster {
        let m = try mapping(node, "cluster", keys: ["etcd", "instance", "lease-ttl", "limit", "prefix", "advertise"])
        var endpoints: [String] = []
        switch m["etcd"]?.value {
        case .sequence(let items)?:
            for item in items { if let e = try scalar(item, "cluster: etcd") { endpoints.append(e) } }
        case .some:
            endpoints = (try scalar(m["etcd"]!, "cluster: etcd") ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        case nil: break
        }
        guard !endpoints.isEmpty else { throw fail(m["etcd"]?.line ?? keyLine, "cluster: needs etcd: the etcd client URL(s), e.g. http://etcd:2379") }
        for e in endpoints where ServeConfig.Cluster.endpointProblem(e) != nil {
            throw fail(m["etcd"]!.line, "cluster: etcd: \(ServeConfig.Cluster.endpointProblem(e)!)")
        }
        var cluster = ServeConfig.Cluster(etcd: endpoints, instance: ProcessInfo.processInfo.hostName, leaseTTL: ServeConfig.Cluster.defaultLeaseTTL,
                                          limit: nil, prefix: ServeConfig.Cluster.defaultPrefix, advertise: nil, line: keyLine)
        if let n = m["instance"], let name = try scalar(n, "cluster: instance") {
            guard SourceName.isValid(name) else { throw fail(n.line, "cluster: instance \(name): a name is 1–64 letters, digits, '-' or '_'") }
            cluster.instance = name
        }
        if let n = m["lease-ttl"], let text = try scalar(n, "cluster: lease-ttl") {
            guard let ttl = Int(text), (2...60).contains(ttl) else { throw fail(n.line, "cluster: lease-ttl \(text): whole seconds from 2 to 60") }
            cluster.leaseTTL = ttl
        }
        if let n = m["limit"], let text = try scalar(n, "cluster: limit") {
            guard let limit = Int(text), limit >= 0 else { throw fail(n.line, "cluster: limit \(text): a number of cameras, 0 or more") }
            cluster.limit = limit
        }
        if let n = m["prefix"], let text = try scalar(n, "cluster: prefix") {
            guard text.hasPrefix("/"), !text.contains(where: { $0.isWhitespace }) else { throw fail(n.line, "cluster: prefix \(text): a key prefix starting with /") }
            cluster.prefix = text.hasSuffix("/") ? text : text + "/"
        }
        if let n = m["advertise"], let text = try scalar(n, "cluster: advertise") {
            guard text.hasPrefix("http://"), URLComponents(string: text)?.host != nil else {
                throw fail(n.line, "cluster: advertise \(text): the URL the other instances reach this one's API at, http://HOST:PORT")
            }
            cluster.advertise = text
        }
        return cluster
    }

    func source(_ node: YAMLNode, index: Int) throws(ConfigError) -> ServeConfig.Source {
        let what = "sources[\(index)]"
        let m = try mapping(node, what, keys: ["name", "uri", "variables", "stages"])
        guard let nameNode = m["name"], let name = try scalar(nameNode, "\(what): name") else { throw fail(node.line, "\(what) has no name:") }
        let label = "source \(name)"
        guard SourceName.isValid(name) else { throw fail(nameNode.line, "\(label): the name must be 1–64 letters, digits, '-' or '_'") }
        guard let uriNode = m["uri"], let uri = try scalar(uriNode, "\(label): uri") else { throw fail(node.line, "\(label) has no uri:") }
        var source = ServeConfig.Source(name: name, uri: uri, variables: [:], stages: [], line: node.line, uriLine: uriNode.line)
        if let v = m["variables"] { source.variables = try variables(v, "\(label): variables") }
        if let s = m["stages"] {
            guard case .mapping(let elements) = s.value else {
                throw fail(s.line, "\(label): stages is \(s.kind); it should map a stage's name to its properties, e.g. detect: {interval: 3}")
            }
            for element in elements {
                guard case .mapping(let properties) = element.value.value else {
                    throw fail(element.value.line, "\(label): stages: \(element.key) is \(element.value.kind); it should be a mapping of property: value")
                }
                for p in properties {
                    guard let value = try scalar(p.value, "\(label): stages: \(element.key): \(p.key)") else {
                        throw fail(p.keyLine, "\(label): stages: \(element.key): \(p.key) has no value")
                    }
                    source.stages.append(.init(element: element.key, property: p.key, value: value, line: p.keyLine))
                }
            }
        }
        return source
    }
}
