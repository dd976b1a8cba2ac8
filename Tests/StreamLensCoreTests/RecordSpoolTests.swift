import Foundation
import Testing
@testable import StreamLensCore

/// The at-least-once spool under the bus sinks: sequence numbers without gaps across restarts,
/// records handed out oldest first and again after a lost connection, bounds that drop the
/// oldest and count them, and a spool torn by a crash read back up to its last whole record.
@Suite struct RecordSpoolTests {
    static func folder() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-spool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }
    static func body(_ n: Int) -> Data { Data(#"{"frame":\#(n)}"#.utf8) }

    @Test func memoryOnlyKeepsTheNewestAndCountsTheRest() throws {
        let spool = try RecordSpool(directory: nil, maxQueued: 3, spoolBytes: 0)
        for n in 1...5 { spool.append(Self.body(n)) }
        #expect(spool.counts.dropped == 2)
        let out = spool.take(max: 10)
        #expect(out.map(\.seq) == [3, 4, 5])
        for r in out { spool.acknowledge(r.seq) }
        #expect(spool.unacknowledged == 0 && spool.counts.acknowledged == 3)
    }

    @Test func aLostConnectionHandsTheUnacknowledgedOutAgainInOrder() throws {
        let spool = try RecordSpool(directory: nil, maxQueued: 100, spoolBytes: 0)
        for n in 1...6 { spool.append(Self.body(n)) }
        let first = spool.take(max: 4)
        spool.acknowledge(2); spool.acknowledge(4)
        spool.giveBack()
        #expect(spool.take(max: 10).map(\.seq) == [1, 3, 5, 6])
        #expect(first.map(\.seq) == [1, 2, 3, 4])
    }

    @Test func whatWasNotAcknowledgedIsThereAfterARestartAndSeqGoesOn() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        var spool = try RecordSpool(directory: dir, maxQueued: 4, spoolBytes: 1 << 20)
        for n in 1...10 { spool.append(Self.body(n)) }
        let sent = spool.take(max: 3)
        for r in sent { spool.acknowledge(r.seq) }
        #expect(spool.unacknowledged == 7)
        spool.close()
        spool = try RecordSpool(directory: dir, maxQueued: 4, spoolBytes: 1 << 20)
        #expect(spool.counts.recovered == 7)
        #expect(spool.nextSeq == 11)
        var got: [RecordSpool.Record] = []
        while true {
            let batch = spool.take(max: 2)
            if batch.isEmpty { break }
            got += batch
            for r in batch { spool.acknowledge(r.seq) }
        }
        #expect(got.map(\.seq) == Array(4...10))
        #expect(got.map(\.body) == (4...10).map(Self.body))
        #expect(spool.append(Self.body(11)) == 11)
        spool.close()
        // 11 never acknowledged: the next run sends it first and goes on at 12.
        spool = try RecordSpool(directory: dir, maxQueued: 4, spoolBytes: 1 << 20)
        #expect(spool.nextSeq == 12)
        #expect(spool.take(max: 5).map(\.seq) == [11])
    }

    @Test func aFullSpoolDropsItsOldestAndCountsThem() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let spool = try RecordSpool(directory: dir, maxQueued: 10, spoolBytes: 64 * 1024)
        let big = Data(repeating: 0x41, count: 1000)
        for _ in 1...200 { spool.append(big) }
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".spool") }
            .map { try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent($0).path)[.size] as? Int ?? 0 }.reduce(0, +)
        #expect(onDisk <= 64 * 1024 + 8 * 1024, "\(onDisk) bytes on disk")
        #expect(spool.counts.dropped > 100)
        // What is left comes out oldest first, without gaps, ending at the newest.
        var seqs: [UInt64] = []
        while true {
            let batch = spool.take(max: 7)
            if batch.isEmpty { break }
            seqs += batch.map(\.seq)
            for r in batch { spool.acknowledge(r.seq) }
        }
        #expect(seqs.last == 200)
        #expect(seqs == Array(seqs.first!...200))
        #expect(spool.counts.dropped + seqs.count == 200)
    }

    @Test func aSpoolTornByACrashIsReadUpToItsLastWholeRecord() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let spool = try RecordSpool(directory: dir, maxQueued: 10, spoolBytes: 1 << 20)
        for n in 1...3 { spool.append(Self.body(n)) }
        spool.close()
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: dir.path).first { $0.hasSuffix(".spool") })
        let handle = try FileHandle(forWritingTo: dir.appendingPathComponent(segment))
        handle.seekToEndOfFile()
        handle.write(Data("4 50\n{\"frame\":4".utf8)) // cut mid-record
        try handle.close()
        let again = try RecordSpool(directory: dir, maxQueued: 10, spoolBytes: 1 << 20)
        #expect(again.take(max: 10).map(\.seq) == [1, 2, 3])
        #expect(again.nextSeq == 4)
        // A state file that is not ours is refused with the folder named.
        try Data("garbage".utf8).write(to: dir.appendingPathComponent("state.json"))
        #expect(throws: StageError.self) { _ = try RecordSpool(directory: dir, maxQueued: 10, spoolBytes: 1 << 20) }
    }
}

/// The spool's edges the bus sinks lean on: one run per spool, memory bounded by what is in
/// flight too, a single failed delivery handed out again in order, a disk that refuses.
@Suite struct RecordSpoolEdgeTests {
    @Test func aSpoolInUseIsRefusedUntilItsRunCloses() throws {
        let dir = try RecordSpoolTests.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = try RecordSpool(directory: dir, maxQueued: 4, spoolBytes: 1 << 20)
        #expect(throws: StageError.self) { _ = try RecordSpool(directory: dir, maxQueued: 4, spoolBytes: 1 << 20) }
        let origin = first.origin
        first.close()
        let second = try RecordSpool(directory: dir, maxQueued: 4, spoolBytes: 1 << 20)
        #expect(second.origin == origin, "the origin is the spool's, kept across runs")
        #expect(try RecordSpool(directory: nil, maxQueued: 4, spoolBytes: 0).origin != origin)
    }

    /// A state older than the records on disk means the last run did not end cleanly (a crash,
    /// a disk too full to write the state): numbering goes on after the disk's last record, under
    /// a new origin, so message ids of records it may have sent unspooled are never reused.
    @Test func anUncleanEndGivesANewOriginAndNumbersOnFromTheDisk() throws {
        let dir = try RecordSpoolTests.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = try RecordSpool(directory: dir, maxQueued: 4, spoolBytes: 1 << 20)
        for n in 1...3 { first.append(RecordSpoolTests.body(n)) }
        let origin = first.origin
        first.close()
        let state = dir.appendingPathComponent("state.json")
        let stale = String(decoding: try Data(contentsOf: state), as: UTF8.self).replacingOccurrences(of: "\"next\":4", with: "\"next\":2")
        try stale.write(to: state, atomically: true, encoding: .utf8)
        let second = try RecordSpool(directory: dir, maxQueued: 4, spoolBytes: 1 << 20)
        #expect(second.nextSeq == 4 && second.origin != origin)
        #expect(second.take(max: 10).map(\.seq) == [1, 2, 3])
    }

    @Test func recordsInFlightCountAgainstMaxQueued() throws {
        let dir = try RecordSpoolTests.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let spool = try RecordSpool(directory: dir, maxQueued: 4, spoolBytes: 1 << 20)
        for n in 1...3 { spool.append(RecordSpoolTests.body(n)) }
        #expect(spool.take(max: 10).map(\.seq) == [1, 2, 3])
        for n in 4...9 { spool.append(RecordSpoolTests.body(n)) }
        #expect(spool.inMemory == 4, "3 in flight and 1 waiting; the rest on disk")
        #expect(spool.take(max: 10).map(\.seq) == [4])
        spool.acknowledge(1); spool.acknowledge(2)
        #expect(spool.take(max: 10).map(\.seq) == [5, 6])
        #expect(spool.counts.dropped == 0 && spool.unacknowledged == 7)
    }

    /// A replay through a small window over many segments hands every record out once, in
    /// order (the reading goes on from where the last top-up stopped).
    @Test func aLongReplayThroughASmallWindowGivesEachRecordOnceInOrder() throws {
        let dir = try RecordSpoolTests.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        // ~66 KB of records in segments of 10 KB, under the 80 KB bound: nothing dropped.
        let spool = try RecordSpool(directory: dir, maxQueued: 4, spoolBytes: 80_000)
        for n in 1...3000 { spool.append(RecordSpoolTests.body(n)) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".spool") }.count >= 5)
        var seen: [UInt64] = []
        while true {
            let out = spool.take(max: 3)
            if out.isEmpty { break }
            for r in out {
                #expect(r.body == RecordSpoolTests.body(Int(r.seq)))
                seen.append(r.seq)
                spool.acknowledge(r.seq)
            }
        }
        #expect(seen == Array(1...3000) && spool.unacknowledged == 0)
    }

    @Test func oneFailedDeliveryIsHandedOutAgainBeforeLaterOnes() throws {
        let spool = try RecordSpool(directory: nil, maxQueued: 100, spoolBytes: 0)
        for n in 1...5 { spool.append(RecordSpoolTests.body(n)) }
        _ = spool.take(max: 3)
        spool.acknowledge(1); spool.acknowledge(3)
        spool.giveBack([2])
        #expect(spool.take(max: 10).map(\.seq) == [2, 4, 5])
    }

    @Test func theRecordCarriesItsOwnSequenceNumber() throws {
        let spool = try RecordSpool(directory: nil, maxQueued: 10, spoolBytes: 0)
        spool.append { Data("{\"seq\":\($0)}".utf8) }
        spool.append { Data("{\"seq\":\($0)}".utf8) }
        #expect(spool.take(max: 2).map { String(decoding: $0.body, as: UTF8.self) } == ["{\"seq\":1}", "{\"seq\":2}"])
    }
}
