import Foundation
import StreamLensCore
import StreamLensGst
import Synchronization

/// One `serve` instance of a cluster (docs/scaling.md): it keeps a lease in etcd alive, claims
/// cameras under it by `ClaimPlan`'s rule, runs what it holds in its `SourceSet`, and gives a
/// camera up — its pipeline ended first, then the claim deleted — when the rule says so, when the
/// camera is removed, or when the claim is no longer its own.
///
/// Never one camera on two instances: a claim is created only if absent, under this instance's
/// lease; etcd deletes it when the lease expires (the instance died, froze or lost etcd for the
/// lease's time to live), and only then can another instance claim it. So an instance that cannot
/// renew must have stopped its pipelines before that: `fenceAfter` seconds after the last renewal
/// that succeeded, measured from when that renewal was *sent* (etcd counts the time to live from
/// when it received it, later), every pipeline here is ended, whatever the lease's fate. A frozen
/// process (SIGSTOP) that wakes finds its deadline long past and ends them at once, before its
/// first renewal comes back refused.
///
/// Two threads: the loop (renew, read the view, act; every `interval`) and the fence (checks the
/// deadline every 100 ms, so a loop stuck in a request does not delay it).
public final class ClusterMember: Sendable {
    public struct Settings: Sendable {
        public var instance: String
        public var prefix: String
        public var leaseTTL: Int
        public var limit: Int?
        /// This instance's HTTP API, advertised to the others.
        public var http: String?
        public init(instance: String, prefix: String, leaseTTL: Int, limit: Int?, http: String?) {
            (self.instance, self.prefix, self.leaseTTL, self.limit, self.http) = (instance, prefix, leaseTTL, limit, http)
        }
        /// Seconds between two rounds: a fifth of the time to live (1 s for the default 5 s).
        public var interval: Double { max(0.5, Double(leaseTTL) / 5) }
        /// Seconds without a renewal after which this instance ends its pipelines: a second and
        /// a half before the lease can have expired (3.5 s of 5).
        public var fenceAfter: Double { Double(leaseTTL) - 1.5 }
        /// Seconds an arriving instance waits before the others give it cameras they hold.
        public var settleTime: Double { Double(leaseTTL) * 2 }
    }

    private struct State {
        var lease: Int64 = 0
        /// A lease given up by the fence: revoked as soon as etcd answers, so its claims go at once.
        var abandoned: [Int64] = []
        /// Monotonic seconds when the last successful renewal (or grant) was sent.
        var renewed: Double = 0
        var view = ClusterView()
        /// Cameras run here: name → the claim's revision.
        var running: [String: Int64] = [:]
        /// Cameras being started or ended now (one action at a time each).
        var busy: Set<String> = []
        /// What was last published in status/NAME.
        var published: [String: ClusterView.Status] = [:]
        var leaving = false
        var lastProblem: String?
        /// When each instance's current lease was first seen (monotonic seconds).
        var arrivals: [String: (lease: Int64, at: Double)] = [:]
    }

    public let settings: Settings
    public let etcd: EtcdClient
    private let set: SourceSet
    private let state = Mutex(State())
    private let log: @Sendable (String) -> Void
    private let done = DispatchSemaphore(value: 0)
    private let fenceDone = DispatchSemaphore(value: 0)

    public init(settings: Settings, etcd: EtcdClient, set: SourceSet, log: @escaping @Sendable (String) -> Void) {
        self.settings = settings
        self.etcd = etcd
        self.set = set
        self.log = log
    }

    private func key(_ kind: String, _ name: String) -> String { "\(settings.prefix)\(kind)/\(name)" }

    private static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    // MARK: What others read

    /// The last view read from etcd (the API lists the cluster from it).
    public var view: ClusterView { state.withLock { $0.view } }

    /// The claim revision of a camera this instance holds (${CLAIM} in its pipeline).
    public func claimRevision(of name: String) -> Int64? { state.withLock { $0.running[name] } }

    /// A change the API made, seen before the next round reads it back.
    public func noteSource(_ name: String, _ source: ClusterView.Source?) {
        state.withLock { $0.view.sources[name] = source }
    }

    // MARK: Life

    /// Starts the loop and the fence. The loop first seeds the camera list with `initial` (each
    /// only if etcd has no camera of that name and it was not removed through the API; again each
    /// round until etcd answers).
    public func start(initial: [(name: String, source: ClusterView.Source)]) {
        let pending = initial
        Thread.detachNewThread { [self] in
            var seeded = pending.isEmpty
            while !state.withLock({ $0.leaving }) {
                if !seeded { seeded = seed(pending) }
                round()
                sleepUntilNextRound()
            }
            done.signal()
        }
        Thread.detachNewThread { [self] in
            while !state.withLock({ $0.leaving }) {
                usleep(100_000)
                fenceIfLate()
            }
            fenceDone.signal()
        }
    }

    private func seed(_ initial: [(name: String, source: ClusterView.Source)]) -> Bool {
        do {
            for (name, source) in initial {
                if try etcd.exists(key("removed", name)) { continue }
                _ = try etcd.create(key("sources", name), Self.encode(source))
            }
            return true
        } catch { return false }
    }

    private func sleepUntilNextRound() {
        let until = Self.now() + settings.interval
        while Self.now() < until, !state.withLock({ $0.leaving }) { usleep(50_000) }
    }

    /// SIGTERM: no more claims; every pipeline here ended (outputs finalized), then the lease
    /// revoked, so every claim and the instance key go at once and the others take the cameras
    /// on their next round.
    public func leave() {
        state.withLock { $0.leaving = true }
        done.wait()
        fenceDone.wait()
        _ = set.endAll()
        let (lease, abandoned) = state.withLock { ($0.lease, $0.abandoned) }
        for id in abandoned + [lease] where id != 0 { try? etcd.revoke(id) }
        log("cluster: \(settings.instance) left (its cameras are free for the others)")
    }

    // MARK: A round

    private func round() {
        if Pipeline.interruptsSeen > 0 { return }
        // The lease: granted (with this instance's key) or renewed.
        var (lease, abandoned) = state.withLock { ($0.lease, $0.abandoned) }
        for id in abandoned {
            if (try? etcd.revoke(id)) != nil { state.withLock { $0.abandoned.removeAll { $0 == id } } }
        }
        let sent = Self.now()
        do {
            if lease == 0 {
                lease = try etcd.grant(ttl: settings.leaseTTL)
                try etcd.put(key("instances", settings.instance), Self.encode(ClusterView.Instance(http: settings.http, limit: settings.limit)), lease: lease)
                state.withLock { $0.lease = lease; $0.renewed = sent; $0.published = [:] }
                log("cluster: \(settings.instance) joined (lease \(String(lease, radix: 16)), \(settings.leaseTTL) s)")
            } else if try etcd.keepAlive(lease) > 0 {
                state.withLock { if $0.lease == lease { $0.renewed = sent } }
            } else {
                log("cluster: the lease expired (etcd out of reach, or this process paused, for \(settings.leaseTTL) s or more): ending the cameras here")
                fence(reason: nil)
                return
            }
            let read = try etcd.range(prefix: settings.prefix)
            let view = ClusterView(prefix: settings.prefix, revision: read.revision, values: read.values)
            state.withLock { $0.view = view }
            try act(on: view, lease: lease)
            if state.withLock({ $0.lastProblem != nil }) { log("cluster: etcd answers again") }
            state.withLock { $0.lastProblem = nil }
        } catch {
            let first = state.withLock { s -> Bool in defer { s.lastProblem = "\(error)" }; return s.lastProblem == nil }
            if first { log("cluster: \(error) (the cameras here keep running until \(String(format: "%.1f", settings.fenceAfter)) s after the last renewal)") }
        }
    }

    private func act(on view: ClusterView, lease: Int64) throws {
        let (running, busy) = state.withLock { ($0.running, $0.busy) }
        // Cameras whose claim is no longer this lease's (expired, or taken over): ended, not released.
        for name in running.keys where !busy.contains(name) && view.claims[name]?.lease != lease {
            end(name, release: nil)
        }
        let now = Self.now()
        let newcomers: Set<String> = state.withLock { s in
            // An instance seen for the first time counts at once (they all start together); one
            // back with a new lease (restarted, or woken from a pause) waits.
            for (name, lease) in view.instanceLeases where s.arrivals[name]?.lease != lease {
                s.arrivals[name] = (lease, s.arrivals[name] == nil ? -.infinity : now)
            }
            return Set(s.arrivals.filter { view.instanceLeases[$0.key] != nil && now - $0.value.at < settings.settleTime }.keys)
        }
        let decision = ClaimPlan.decide(view, me: settings.instance, limit: settings.limit, newcomers: newcomers.subtracting([settings.instance]))
        for name in decision.release where !busy.contains(name) { end(name, release: lease) }
        for name in decision.claim where !busy.contains(name) {
            // The fence may have let this lease go while the round was under way: no claim on it.
            guard state.withLock({ $0.lease }) == lease else { return }
            guard let source = view.sources[name],
                  let revision = try etcd.create(key("claims", name), Self.encode(["instance": settings.instance]), lease: lease) else { continue }
            begin(name, source, revision: revision, lease: lease)
        }
        // A pipeline here that no claim of this instance accounts for (its start finished after
        // the fence let the claims go): ended.
        let statuses = set.statuses()
        let (runningNow, busyNow) = state.withLock { ($0.running, $0.busy) }
        for s in statuses where runningNow[s.name] == nil && !busyNow.contains(s.name)
            && (s.state == SourceSet.State.playing.rawValue || s.state == SourceSet.State.starting.rawValue) {
            end(s.name, release: nil)
        }
        // States published for the others (the API lists them), when they change.
        for s in statuses {
            guard let revision = state.withLock({ $0.running[s.name] }), view.claims[s.name]?.revision == revision else { continue }
            let status = ClusterView.Status(instance: settings.instance, state: s.state, error: s.error.map { String($0.split(separator: "\n").first ?? "") })
            if state.withLock({ $0.published[s.name] }) != status {
                try etcd.put(key("status", s.name), Self.encode(status), lease: lease)
                state.withLock { $0.published[s.name] = status }
            }
        }
    }

    /// Starts a claimed camera on a thread of its own (a start can take seconds; the loop goes on).
    private func begin(_ name: String, _ source: ClusterView.Source, revision: Int64, lease: Int64) {
        state.withLock { $0.running[name] = revision; $0.busy.insert(name) }
        log("cluster: \(settings.instance) runs \(name) (claim \(revision))")
        let stages = (source.stages ?? [:]).sorted { $0.key < $1.key }.flatMap { stage, values in
            values.sorted { $0.key < $1.key }.map { (element: stage, property: $0.key, value: $0.value) }
        }
        Thread.detachNewThread { [self] in
            if let refusal = set.add(name: name, uri: source.uri, stages: stages) {
                log("cluster: \(name) did not start here: \(refusal.message)")
                let status = ClusterView.Status(instance: settings.instance, state: SourceSet.State.failed.rawValue,
                                                error: String(refusal.message.split(separator: "\n").first ?? ""))
                _ = try? etcd.put(key("status", name), Self.encode(status), lease: lease)
                state.withLock { $0.published[name] = status }
            }
            state.withLock { _ = $0.busy.remove(name) }
        }
    }

    /// Ends a camera here (its outputs finalized), then, with `release`, deletes its claim if it
    /// is still under that lease.
    private func end(_ name: String, release: Int64?) {
        state.withLock { _ = $0.busy.insert(name) }
        Thread.detachNewThread { [self] in
            _ = set.remove(name: name)
            if let release {
                _ = try? etcd.delete(key("status", name), ifLease: release)
                _ = try? etcd.delete(key("claims", name), ifLease: release)
                log("cluster: \(settings.instance) gave \(name) up")
            }
            state.withLock { $0.running[name] = nil; _ = $0.busy.remove(name); $0.published[name] = nil }
        }
    }

    // MARK: The fence

    private func fenceIfLate() {
        let (lease, renewed, any) = state.withLock { ($0.lease, $0.renewed, !$0.running.isEmpty) }
        guard lease != 0, any else { return }
        let since = Self.now() - renewed
        if since > settings.fenceAfter {
            fence(reason: String(format: "no renewal for %.1f s (the lease lives %d s)", since, settings.leaseTTL))
        }
    }

    /// Ends every camera here at once and gives the lease up (a new one is asked for when etcd
    /// answers; the old one is revoked then, so its claims go at once).
    private func fence(reason: String?) {
        let (names, lease) = state.withLock { s -> ([String], Int64) in
            let names = Array(s.running.keys)
            let lease = s.lease
            if lease != 0 { s.abandoned.append(lease) }
            s.lease = 0
            s.running = [:]
            s.published = [:]
            return (names, lease)
        }
        guard lease != 0 || !names.isEmpty else { return }
        if let reason { log("cluster: \(reason): ending \(names.count) camera(s) here before the lease can expire for the others") }
        let group = DispatchGroup()
        for name in names {
            group.enter()
            Thread.detachNewThread { [set] in
                _ = set.remove(name: name)
                group.leave()
            }
        }
        group.wait()
    }

    static func encode<T: Encodable>(_ value: T) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)) ?? Data("{}".utf8)
    }
}
