import Foundation
@testable import StreamLensCluster
import Testing

/// The claim rule every instance applies to the same view (ClaimPlan): who claims and who gives
/// up what, one round at a time, with claims granted as etcd would (first come, first served).
@Suite struct ClaimPlanTests {
    /// A cluster simulated over views: `rounds` rounds in which every instance decides on the
    /// same view and its releases and claims are applied in turn (a claim only if still free).
    static func run(_ view: inout ClusterView, instances: [String], limits: [String: Int] = [:], newcomers: Set<String> = [], rounds: Int = 6) -> Int {
        var moves = 0
        var next: Int64 = view.claims.values.map(\.revision).max() ?? 100
        for _ in 0..<rounds {
            let snapshot = view
            for me in instances {
                let d = ClaimPlan.decide(snapshot, me: me, limit: limits[me], newcomers: newcomers.subtracting([me]))
                for name in d.release where view.claims[name]?.instance == me { view.claims[name] = nil; moves += 1 }
                for name in d.claim where view.claims[name] == nil {
                    next += 1
                    view.claims[name] = .init(instance: me, revision: next, lease: 1)
                }
            }
        }
        return moves
    }

    static func view(cameras: Int, instances: [String], claims: [String: String] = [:]) -> ClusterView {
        var v = ClusterView()
        for i in 1...cameras { v.sources["cam\(i)"] = .init(uri: "file:///cam\(i).mp4") }
        for i in instances { v.instances[i] = .init(http: nil, limit: nil); v.instanceLeases[i] = 1 }
        var r: Int64 = 0
        for (camera, instance) in claims.sorted(by: { $0.key < $1.key }) { r += 1; v.claims[camera] = .init(instance: instance, revision: r, lease: 1) }
        return v
    }

    static func counts(_ v: ClusterView, _ instances: [String]) -> [Int] { instances.map { v.held(by: $0).count } }

    @Test func sixCamerasOverThreeInstancesAreTwoEachAndStayThere() {
        let abc = ["a", "b", "c"]
        var v = Self.view(cameras: 6, instances: abc)
        _ = Self.run(&v, instances: abc)
        #expect(Self.counts(v, abc) == [2, 2, 2])
        #expect(v.claims.count == 6)
        let before = v.claims
        #expect(Self.run(&v, instances: abc, rounds: 10) == 0, "steady: nothing moves")
        #expect(v.claims == before)
    }

    @Test func aLostInstancesCamerasGoToTheOthersAndComeBackWhenItReturns() {
        let abc = ["a", "b", "c"]
        var v = Self.view(cameras: 6, instances: abc, claims: ["cam1": "a", "cam2": "a", "cam3": "b", "cam4": "b", "cam5": "c", "cam6": "c"])
        // c's lease expired: its instance key and claims are gone.
        v.instances["c"] = nil; v.instanceLeases["c"] = nil
        v.claims = v.claims.filter { $0.value.instance != "c" }
        _ = Self.run(&v, instances: ["a", "b"])
        #expect(Self.counts(v, ["a", "b"]) == [3, 3])
        // c back (a new lease): while it is new it takes only what is free (nothing).
        v.instances["c"] = .init(http: nil, limit: nil); v.instanceLeases["c"] = 2
        #expect(Self.run(&v, instances: abc, newcomers: ["c"]) == 0)
        #expect(Self.counts(v, abc) == [3, 3, 0])
        // Once it has stayed, a and b each give one up and c takes them.
        _ = Self.run(&v, instances: abc)
        #expect(Self.counts(v, abc) == [2, 2, 2])
    }

    @Test func sevenOverThreeEndsWithNoInstanceBelowTheFloor() {
        let abc = ["a", "b", "c"]
        var v = Self.view(cameras: 7, instances: abc, claims: ["cam1": "a", "cam2": "a", "cam3": "a", "cam4": "b", "cam5": "b", "cam6": "b", "cam7": "c"])
        _ = Self.run(&v, instances: abc)
        let c = Self.counts(v, abc)
        #expect(c.reduce(0, +) == 7)
        #expect(c.allSatisfy { $0 >= 2 && $0 <= 3 }, "\(c)")
    }

    @Test func aLimitIsKeptAndTheRestWaitsUnclaimed() {
        let ab = ["a", "b"]
        var v = Self.view(cameras: 6, instances: ab)
        v.instances["a"]?.limit = 1; v.instances["b"]?.limit = 2
        _ = Self.run(&v, instances: ab, limits: ["a": 1, "b": 2])
        #expect(Self.counts(v, ab) == [1, 2])
        #expect(v.sources.keys.filter { v.claims[$0] == nil }.count == 3)
    }

    @Test func aRemovedCameraIsGivenUpByItsHolder() {
        var v = Self.view(cameras: 2, instances: ["a"], claims: ["cam1": "a", "cam2": "a"])
        v.sources["cam2"] = nil
        let d = ClaimPlan.decide(v, me: "a", limit: nil)
        #expect(d.release == ["cam2"])
        #expect(d.claim.isEmpty)
    }

    @Test func theViewIsReadFromEtcdsKeysAndIgnoresOthers() {
        func kv(_ key: String, _ json: String, lease: Int64 = 0, create: Int64 = 5) -> EtcdClient.KeyValue {
            .init(key: key, value: Data(json.utf8), createRevision: create, modRevision: create, lease: lease)
        }
        let v = ClusterView(prefix: "/sl/", revision: 9, values: [
            kv("/sl/sources/door", #"{"uri":"rtsp://door/1","stages":{"detect":{"interval":"3"}}}"#),
            kv("/sl/instances/a", #"{"http":"http://a:8080","limit":4}"#, lease: 77),
            kv("/sl/claims/door", #"{"instance":"a"}"#, lease: 77, create: 8),
            kv("/sl/status/door", #"{"instance":"a","state":"playing"}"#, lease: 77),
            kv("/sl/sources/bad", "not json"),
            kv("/other/sources/x", #"{"uri":"file:///x"}"#),
        ])
        #expect(v.revision == 9)
        #expect(v.sources == ["door": .init(uri: "rtsp://door/1", stages: ["detect": ["interval": "3"]])])
        #expect(v.instances["a"] == .init(http: "http://a:8080", limit: 4))
        #expect(v.instanceLeases["a"] == 77)
        #expect(v.claims["door"] == .init(instance: "a", revision: 8, lease: 77))
        #expect(v.statuses["door"]?.state == "playing")
        #expect(v.held(by: "a") == ["door"])
    }
}
