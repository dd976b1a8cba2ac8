import Foundation
import Synchronization

/// What the HTTP API and the control socket changed over the config — sources added and
/// removed, stage properties set — kept in a JSON file beside it (`state:` names another), so a
/// restart comes back as it was left. The config itself is never rewritten: the user's comments
/// and order stay, and a config mounted read-only (a Kubernetes ConfigMap) works; deleting the
/// state file goes back to the config as written.
public struct ServeState: Codable, Sendable, Equatable {
    public struct Added: Codable, Sendable, Equatable {
        public var name: String
        public var uri: String
    }
    /// Sources added, in the order they came (one of the config's names here replaces it).
    public var added: [Added] = []
    /// The config's sources removed.
    public var removed: [String] = []
    /// Properties set: source → stage → property → value.
    public var stages: [String: [String: [String: String]]] = [:]

    public init() {}

    public mutating func sourceAdded(name: String, uri: String) {
        added.removeAll { $0.name == name }
        added.append(Added(name: name, uri: uri))
        removed.removeAll { $0 == name }
        stages[name] = nil
    }

    public mutating func sourceRemoved(name: String, inConfig: Bool) {
        let wasAdded = added.contains { $0.name == name }
        added.removeAll { $0.name == name }
        if inConfig && !removed.contains(name) { removed.append(name) }
        if !wasAdded && !inConfig { return }
        stages[name] = nil
    }

    public mutating func propertiesSet(source: String, stage: String, _ assignments: [(name: String, value: String)]) {
        for (property, value) in assignments { stages[source, default: [:]][stage, default: [:]][property] = value }
    }

    /// The sources to run: the config's, less those removed, then those added; each with the
    /// config's stage values and the kept ones after them (the later wins).
    public func sources(over config: ServeConfig) -> [ServeConfig.Source] {
        let addedNames = Set(added.map(\.name))
        var out = config.sources.filter { !removed.contains($0.name) && !addedNames.contains($0.name) }
        out += added.map { ServeConfig.Source(name: $0.name, uri: $0.uri, variables: [:], stages: [], line: 0, uriLine: 0) }
        for i in out.indices {
            for (stage, values) in (stages[out[i].name] ?? [:]).sorted(by: { $0.key < $1.key }) {
                for (property, value) in values.sorted(by: { $0.key < $1.key }) {
                    out[i].stages.append(.init(element: stage, property: property, value: value, line: 0))
                }
            }
        }
        return out
    }

    /// The state in `path`; empty when there is no such file.
    public static func load(path: String) throws(ConfigError) -> ServeState {
        guard FileManager.default.fileExists(atPath: path) else { return ServeState() }
        guard let data = FileManager.default.contents(atPath: path) else { throw ConfigError(file: path, line: 1, "the kept state cannot be read (permission denied?)") }
        do { return try JSONDecoder().decode(ServeState.self, from: data) } catch {
            throw ConfigError(file: path, line: 1, "the kept state is not what serve writes (\(error)); move it away to start from the config alone")
        }
    }

    /// Writes the state to `path` whole or not at all: a temporary file beside it, flushed to the
    /// disk, renamed over it (and the folder flushed), so a crash or a full disk leaves the old
    /// state or the new one, never half of one. The reason when it could not.
    public func save(path: String) -> String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self) else { return "the state could not be encoded" }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let temporary = "\(path).\(getpid()).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return "cannot write \(temporary): \(String(cString: strerror(errno)))" }
        var problem: String?
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 { if errno == EINTR { continue }; problem = "cannot write \(temporary): \(String(cString: strerror(errno)))"; return }
                offset += n
            }
        }
        if problem == nil, fsync(fd) != 0 { problem = "cannot flush \(temporary): \(String(cString: strerror(errno)))" }
        close(fd)
        if problem == nil, rename(temporary, path) != 0 { problem = "cannot rename \(temporary) to \(path): \(String(cString: strerror(errno)))" }
        if let problem {
            unlink(temporary)
            return problem
        }
        let dir = open(folder.isEmpty ? "." : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 { _ = fsync(dir); close(dir) }
        return nil
    }
}

/// The state of a running serve: each change recorded and written at once, one writer at a
/// time. A write that fails is said once (and once more when writing works again); the change
/// runs regardless, and `problem` tells the API to say it is not kept.
public final class ServeStateKeeper: Sendable {
    private struct Inner {
        var state: ServeState
        var problem: String?
    }
    public let path: String
    private let configNames: Set<String>
    private let inner: Mutex<Inner>
    private let log: @Sendable (String) -> Void

    public init(path: String, state: ServeState, config: ServeConfig, log: @escaping @Sendable (String) -> Void) {
        self.path = path
        configNames = Set(config.sources.map(\.name))
        inner = Mutex(Inner(state: state))
        self.log = log
    }

    /// Why the last change could not be kept (nil: it was).
    public var problem: String? { inner.withLock { $0.problem } }
    public var state: ServeState { inner.withLock { $0.state } }

    public func sourceAdded(name: String, uri: String) { change { $0.sourceAdded(name: name, uri: uri) } }

    public func sourceRemoved(name: String) { change { [configNames] in $0.sourceRemoved(name: name, inConfig: configNames.contains(name)) } }

    /// Kept only for a source that is listed (a set that raced with the source's removal is not).
    public func propertiesSet(source: String, stage: String, _ assignments: [(name: String, value: String)]) {
        change { [configNames] state in
            let listed = state.added.contains { $0.name == source } || (configNames.contains(source) && !state.removed.contains(source))
            if listed { state.propertiesSet(source: source, stage: stage, assignments) }
        }
    }

    private func change(_ body: (inout ServeState) -> Void) {
        inner.withLock { inner in
            body(&inner.state)
            let problem = inner.state.save(path: path)
            if let problem, inner.problem == nil { log("warning: what the API changes is not kept across a restart: \(problem)") }
            if problem == nil, inner.problem != nil { log("the state is kept again in \(path)") }
            inner.problem = problem
        }
    }
}
