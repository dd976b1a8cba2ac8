import Foundation

/// What the cluster holds in etcd under its prefix, read in one request:
///
///     PREFIX sources/NAME     {"uri": …, "stages": {stage: {property: value}}}   the camera list (no lease)
///     PREFIX instances/NAME   {"http": URL, "limit": n}                          an instance (its lease)
///     PREFIX claims/NAME      {"instance": …}                                    who runs a camera (the holder's lease)
///     PREFIX status/NAME      {"instance": …, "state": …, "error": …}            its state there (the holder's lease)
///
/// A claim lives under its holder's lease: when the holder dies, is frozen or cut off past the
/// lease's time to live, etcd deletes its claims and its instance key, and the cameras are free.
public struct ClusterView: Sendable, Equatable {
    public struct Source: Codable, Sendable, Equatable {
        public var uri: String
        /// Properties set on its stages (stage → property → value), as serve --config's state keeps them.
        public var stages: [String: [String: String]]?
        public init(uri: String, stages: [String: [String: String]]? = nil) { (self.uri, self.stages) = (uri, stages) }
    }
    public struct Instance: Codable, Sendable, Equatable {
        /// Its HTTP API (nil: it serves none).
        public var http: String?
        public var limit: Int?
        public init(http: String?, limit: Int?) { (self.http, self.limit) = (http, limit) }
    }
    public struct Claim: Sendable, Equatable {
        public var instance: String
        /// The revision the claim was written at: unique over the cluster's life, rising.
        public var revision: Int64
        public var lease: Int64
    }
    public struct Status: Codable, Sendable, Equatable {
        public var instance: String
        public var state: String
        public var error: String?
    }

    public var revision: Int64 = 0
    public var sources: [String: Source] = [:]
    public var instances: [String: Instance] = [:]
    /// Each instance's lease: a new one is a new arrival (`ClaimPlan`'s newcomers).
    public var instanceLeases: [String: Int64] = [:]
    public var claims: [String: Claim] = [:]
    public var statuses: [String: Status] = [:]

    public init() {}

    /// The view in `values` (keys under `prefix`); keys that are not the cluster's are ignored.
    public init(prefix: String, revision: Int64, values: [EtcdClient.KeyValue]) {
        self.revision = revision
        let decoder = JSONDecoder()
        for kv in values where kv.key.hasPrefix(prefix) {
            let parts = kv.key.dropFirst(prefix.count).split(separator: "/", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { continue }
            let name = parts[1]
            switch parts[0] {
            case "sources": if let s = try? decoder.decode(Source.self, from: kv.value) { sources[name] = s }
            case "instances":
                if let i = try? decoder.decode(Instance.self, from: kv.value) { instances[name] = i; instanceLeases[name] = kv.lease }
            case "claims":
                if let c = try? decoder.decode([String: String].self, from: kv.value), let instance = c["instance"] {
                    claims[name] = Claim(instance: instance, revision: kv.createRevision, lease: kv.lease)
                }
            case "status": if let s = try? decoder.decode(Status.self, from: kv.value) { statuses[name] = s }
            default: continue
            }
        }
    }

    /// Cameras each instance holds (of those listed).
    public func held(by instance: String) -> [String] {
        claims.filter { $0.value.instance == instance && sources[$0.key] != nil }.map(\.key).sorted()
    }
}

/// What one instance does with a view: which cameras to give up, which to try to claim.
///
/// The rule (the same on every instance, so they agree without talking): with S cameras and N
/// live instances, each instance's share is ⌈S/N⌉ (at most its `limit`). An instance claims
/// unclaimed cameras while it holds fewer than its share; it gives up what it holds beyond its
/// share, and one camera more when it holds more than ⌊S/N⌋ while another instance holds fewer
/// (so 3,3 becomes 2,2,2 when a third joins, and 3,3,1 becomes 3,2,2). Nothing moves while
/// every instance holds its share: no churn when things are steady. Claims are transactions
/// (created only if absent), so two instances that both try get one winner.
///
/// An instance that comes back (a new lease under a name seen before: restarted, or woken from a
/// pause) takes only unclaimed cameras at first: the others count it in their shares, and so
/// give cameras up to it, only once it has stayed (`newcomers`, for twice the lease's time to
/// live). A camera moves when it must (its holder is gone), not because a flapping instance came
/// back for a moment.
public enum ClaimPlan {
    public struct Decision: Sendable, Equatable {
        public var release: [String] = []
        public var claim: [String] = []
    }

    public static func decide(_ view: ClusterView, me: String, limit: Int?, newcomers: Set<String> = []) -> Decision {
        var decision = Decision()
        let live = Set(view.instances.keys).subtracting(newcomers).union([me])
        let total = view.sources.count
        let fair = total == 0 ? 0 : (total + live.count - 1) / live.count
        let floor = total / live.count
        let share = min(fair, limit ?? Int.max)
        // Claims of cameras no longer listed are given up first (the camera was removed).
        let gone = view.claims.filter { $0.value.instance == me && view.sources[$0.key] == nil }.map(\.key).sorted()
        decision.release += gone
        // The most recent claims go first: the longest-running cameras stay where they are.
        let held = view.claims.filter { $0.value.instance == me && view.sources[$0.key] != nil }
            .sorted { $0.value.revision > $1.value.revision }.map(\.key)
        var excess = max(0, held.count - share)
        if excess == 0, held.count > floor, live.count > 1,
           live.contains(where: { $0 != me && view.held(by: $0).count < floor && (view.instances[$0]?.limit ?? Int.max) > view.held(by: $0).count }) {
            excess = 1
        }
        decision.release += held.prefix(excess)
        let keeping = held.count - excess
        if keeping < share {
            let unclaimed = view.sources.keys.filter { view.claims[$0] == nil }.sorted()
            decision.claim = Array(unclaimed.prefix(share - keeping))
        }
        return decision
    }
}
