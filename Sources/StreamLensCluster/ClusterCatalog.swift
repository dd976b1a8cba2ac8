import Foundation
import StreamLensCore
import StreamLensGst

/// The sources of a cluster as an instance's HTTP API sees them: every camera in etcd, each with
/// the instance that runs it (`instance`) and its state there. Adding and removing go to etcd
/// (any instance can be asked); the camera's holder starts or ends it. A camera's stages and
/// figures are read where it runs (this instance's own: its `SourceSet`).
public final class ClusterCatalog: SourceCatalog, Sendable {
    private let member: ClusterMember
    private let set: SourceSet
    /// Whether a camera's pipeline can be made from the template (it is not started).
    private let check: @Sendable (_ name: String, _ uri: String) throws -> Void

    public init(member: ClusterMember, set: SourceSet, check: @escaping @Sendable (_ name: String, _ uri: String) throws -> Void) {
        self.member = member
        self.set = set
        self.check = check
    }

    private var prefix: String { member.settings.prefix }

    public var acceptsNewSources: Bool { true }

    public func statuses() -> [SourceSet.Status] {
        let view = member.view
        let local = Dictionary(set.statuses().map { ($0.name, $0) }, uniquingKeysWith: { $1 })
        return view.sources.keys.sorted().map { name in
            let claim = view.claims[name]
            if var status = local[name], claim?.instance == member.settings.instance {
                status.instance = member.settings.instance
                return status
            }
            let remote = view.statuses[name].flatMap { $0.instance == claim?.instance ? $0 : nil }
            return SourceSet.Status(name: name, uri: view.sources[name]?.uri ?? "", state: remote?.state ?? (claim == nil ? "unclaimed" : "starting"),
                                    fps: 0, frames: 0, drops: 0, restarts: 0, seconds: 0, error: remote?.error, latencyMs: nil, instance: claim?.instance)
        }
    }

    /// Puts the camera in etcd (refused if the name is taken); an instance with room claims it on
    /// its next round and starts it.
    public func add(name: String, uri: String) -> SourceRefusal? {
        guard SourceSet.isValidName(name) else { return SourceRefusal(.invalid, "source name '\(name)' must be 1–64 letters, digits, '-' or '_'") }
        if let problem = SourceSet.uriProblem(uri) { return SourceRefusal(.invalid, problem) }
        do { try check(name, uri) } catch {
            return SourceRefusal(.invalid, "\(name): \((error as? HostError)?.message ?? "\(error)")")
        }
        let source = ClusterView.Source(uri: uri)
        do {
            guard try member.etcd.create("\(prefix)sources/\(name)", ClusterMember.encode(source)) != nil else {
                return SourceRefusal(.taken, "a source named \(name) exists already in the cluster (remove it first, or choose another name)")
            }
            try member.etcd.delete("\(prefix)removed/\(name)")
        } catch {
            return SourceRefusal(.notHere, "the cluster's camera list cannot be changed now: \(error)")
        }
        member.noteSource(name, source)
        EventLog.shared.append(source: name, type: "source-added", fields: ["uri": uri])
        return nil
    }

    /// Takes the camera out of etcd, then waits (at most the lease's time to live and a few
    /// seconds) until its holder has ended it and let its claim go.
    public func remove(name: String) -> SourceRefusal? {
        guard member.view.sources[name] != nil else { return SourceRefusal.unknown(name, among: member.view.sources.keys.sorted()) }
        do {
            try member.etcd.put("\(prefix)removed/\(name)", Data("{}".utf8))
            guard try member.etcd.delete("\(prefix)sources/\(name)") else {
                return SourceRefusal.unknown(name, among: member.view.sources.keys.sorted())
            }
        } catch {
            return SourceRefusal(.notHere, "the cluster's camera list cannot be changed now: \(error)")
        }
        member.noteSource(name, nil)
        let deadline = Date().addingTimeInterval(Double(member.settings.leaseTTL) + 5)
        while Date() < deadline {
            let claimed = (try? member.etcd.exists("\(prefix)claims/\(name)")) ?? false
            if !claimed { break }
            usleep(100_000)
        }
        EventLog.shared.append(source: name, type: "source-removed")
        return nil
    }

    public func commands(of name: String) -> PipelineCommands? { set.commands(of: name) }

    public func holder(of name: String) -> String? {
        let view = member.view
        guard let claim = view.claims[name], claim.instance != member.settings.instance else { return nil }
        return view.instances[claim.instance]?.http
    }

    public func stageSummaries(of name: String) -> [StageSummary] { set.stageSummaries(of: name) }
}
