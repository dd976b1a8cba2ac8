import Foundation
import StreamLensCluster
import StreamLensTesting
import Testing

/// The etcd client against a real etcd (Debian's, on loopback, data in a temporary folder): what
/// the cluster's safety rests on — a claim is created only if absent, keys under a lease go when
/// it expires or is revoked, a renewal of a lease that is gone says so — and hostile or missing
/// servers cost a bounded wait and a clear message.
@Suite(.serialized, .enabled(if: EtcdServer.available, "etcd-server is not installed (make setup installs it)"))
struct EtcdClientTests {
    static func started() throws -> EtcdServer {
        let etcd = try EtcdServer()
        try #require(try etcd.start(), "etcd did not start: \(etcd.log.suffix(500))")
        return etcd
    }

    @Test func aKeyIsCreatedOnceAndLivesUnderItsLease() throws {
        let etcd = try Self.started()
        let client = EtcdClient(endpoints: [etcd.endpoint], timeout: 3)
        let lease = try client.grant(ttl: 2)
        let first = try client.create("/t/claims/cam1", Data(#"{"instance":"a"}"#.utf8), lease: lease)
        #expect(first != nil)
        #expect(try client.create("/t/claims/cam1", Data(#"{"instance":"b"}"#.utf8), lease: lease) == nil, "a second claim loses")
        try client.put("/t/sources/cam1", Data(#"{"uri":"file:///x"}"#.utf8))
        try client.put("/tx/sources/neighbour", Data("{}".utf8))
        var read = try client.range(prefix: "/t/")
        #expect(read.values.map(\.key).sorted() == ["/t/claims/cam1", "/t/sources/cam1"])
        #expect(read.values.first { $0.key == "/t/claims/cam1" }?.lease == lease)
        #expect(read.values.first { $0.key == "/t/claims/cam1" }?.createRevision == first)
        #expect(try client.keepAlive(lease) > 0)
        // Not renewed: the claim goes with the lease, the camera stays.
        let deadline = Date().addingTimeInterval(10)
        repeat { usleep(200_000); read = try client.range(prefix: "/t/") } while read.values.count == 2 && Date() < deadline
        #expect(read.values.map(\.key) == ["/t/sources/cam1"])
        #expect(try client.keepAlive(lease) == 0, "a lease that expired cannot be renewed")
    }

    @Test func revokingALeaseDeletesItsKeysAtOnceAndAConditionalDeleteChecksTheLease() throws {
        let etcd = try Self.started()
        let client = EtcdClient(endpoints: [etcd.endpoint], timeout: 3)
        let mine = try client.grant(ttl: 30), theirs = try client.grant(ttl: 30)
        #expect(try client.create("/r/claims/a", Data("{}".utf8), lease: mine) != nil)
        #expect(try client.create("/r/claims/b", Data("{}".utf8), lease: theirs) != nil)
        #expect(try client.delete("/r/claims/b", ifLease: mine) == false, "not mine: kept")
        #expect(try client.range(prefix: "/r/").values.count == 2)
        try client.revoke(mine)
        #expect(try client.range(prefix: "/r/").values.map(\.key) == ["/r/claims/b"])
        #expect(try client.delete("/r/claims/b", ifLease: theirs))
        #expect(try client.range(prefix: "/r/").values.isEmpty)
    }

    @Test func aDeadFirstEndpointIsPassedOverAndARestartKeepsTheKeys() throws {
        let etcd = try Self.started()
        let dead = "http://127.0.0.1:\(freeLoopbackPort())"
        let client = EtcdClient(endpoints: [dead, etcd.endpoint], timeout: 3)
        try client.put("/k/sources/x", Data(#"{"uri":"file:///x"}"#.utf8))
        etcd.stop()
        let down = Date()
        #expect(throws: EtcdError.self) { _ = try client.range(prefix: "/k/") }
        #expect(Date().timeIntervalSince(down) < 8, "etcd down costs a bounded wait")
        do { _ = try client.range(prefix: "/k/") } catch { #expect("\(error)".contains("cannot be reached")) }
        try #require(try etcd.start(), "etcd did not start again: \(etcd.log.suffix(500))")
        #expect(try client.range(prefix: "/k/").values.map(\.key) == ["/k/sources/x"])
    }

    @Test func aServerThatNeverAnswersCostsTheTimeoutAndOneThatIsNotEtcdSaysSo() throws {
        // Listens and never answers.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && listen(fd, 8) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        try #require(bound)
        let silent = EtcdClient(endpoints: ["http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))"], timeout: 1)
        let t0 = Date()
        #expect(throws: EtcdError.self) { _ = try silent.grant(ttl: 5) }
        #expect(Date().timeIntervalSince(t0) < 5)
        // An etcd that is not there at all.
        let none = EtcdClient(endpoints: ["http://127.0.0.1:\(freeLoopbackPort())"], timeout: 1)
        do { _ = try none.grant(ttl: 5); Issue.record("granted by nobody") } catch { #expect(error.message.contains("connection refused"), "\(error)") }
    }
}
