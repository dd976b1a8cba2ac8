import Foundation
import Synchronization
import Testing
@testable import StreamLensCore

/// The writers' queue: a destination that stalls costs records, never the caller's time, and the
/// end gives up after its deadline. Real threads and real pipes; waits are bounded, never timed.
struct OutputQueueTests {
    /// A job that stalls until the queue gives up: the queue fills, further records are dropped
    /// (the first said as such), and `finish` returns with the rest counted as left at the end.
    @Test func aStalledDestinationDropsRecordsAndTheEndGivesUp() {
        let queue = OutputQueue(name: "test", capacity: 3)
        let started = DispatchSemaphore(value: 0)
        #expect(queue.submit { q in
            started.signal()
            while !q.givingUp { usleep(1_000) }
        } == .queued)
        #expect(started.wait(timeout: .now() + 30) == .success)
        #expect(queue.submit { _ in } == .queued)
        #expect(queue.submit { _ in } == .queued)
        #expect(queue.submit { _ in } == .dropped(first: true))
        #expect(queue.submit { _ in } == .dropped(first: false))
        let counts = queue.finish(quiet: 0.2, atMost: 30)
        #expect(counts.dropped == 2 && counts.leftAtEnd == 3 && counts.written == 0, "\(counts)")
    }

    /// A normal end drains the queue: every record is written before `finish` returns.
    @Test func theEndWritesEverythingQueued() {
        let queue = OutputQueue(name: "test", capacity: 100)
        let written = Atomic<Int>(0)
        for _ in 0..<50 { queue.submit { _ in usleep(100); written.add(1, ordering: .relaxed) } }
        let counts = queue.finish(quiet: 30, atMost: 60)
        #expect(counts.written == 50 && counts.dropped == 0 && counts.leftAtEnd == 0 && written.load(ordering: .relaxed) == 50, "\(counts)")
    }

    /// A FileWriter into a pipe nobody reads: `write` returns at once whatever the pipe does; the
    /// records it could not place are dropped, and `finish` gives up instead of waiting.
    @Test func aFileWriterIntoAPipeNobodyReadsNeverWaits() throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let path = "/proc/self/fd/\(fds[1])"
        let writer = try FileWriter.create(path, what: "pipe").get()
        close(fds[1])
        let record = Data(repeating: UInt8(ascii: "x"), count: 1000)
        var dropped = 0
        for _ in 0..<1000 where writer.write(record) != .queued { dropped += 1 }
        #expect(dropped > 0)
        let counts = writer.finish()
        #expect(counts.dropped == dropped && counts.leftAtEnd > 0 && counts.written < 1000, "\(counts)")
    }
}
