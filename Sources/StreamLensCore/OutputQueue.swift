import Foundation
import Synchronization

/// A writer's own bounded queue and thread. What a stage sends elsewhere — metadata records to a
/// file, a pipe or standard output, snapshots, MQTT messages — is written from here, never on the
/// frame's thread: a destination slower than the frames (a reader that stalls, a disk that hangs)
/// fills the queue, and then records are dropped and counted, never frames.
///
/// The end waits for the queue to drain, with a deadline: `quiet` seconds without a record
/// written, `atMost` seconds in all. A job still stalled then is told to give up (`givingUp`);
/// what is left is dropped and counted.
public final class OutputQueue: Sendable {
    /// One record's writing, on the queue's thread. A job that waits on its destination checks
    /// `givingUp` now and then and returns when it turns true.
    public typealias Job = @Sendable (_ queue: OutputQueue.Handle) -> Void

    /// What a job sees of its queue.
    public struct Handle: Sendable {
        fileprivate let core: Core
        /// True once the end's deadline passed: stop waiting on the destination.
        public var givingUp: Bool { core.givingUp.load(ordering: .relaxed) }
    }

    public enum Submission: Sendable, Equatable {
        case queued
        /// The queue was full: the record is dropped and counted. `first`: the first drop of
        /// this queue (the one to say; the summary counts the rest).
        case dropped(first: Bool)
    }

    public struct Counts: Sendable, Equatable {
        /// Jobs run to their end.
        public var written = 0
        /// Dropped because the queue was full.
        public var dropped = 0
        /// Still queued (or stalled) when the end's deadline passed.
        public var leftAtEnd = 0
        public var pending = 0
        public var pendingBytes = 0
        public init() {}
    }

    /// The queue's size, in records: 100 is a few seconds of a 30 fps stream's records, more than
    /// a reader that merely hiccups needs, little memory.
    public static let defaultCapacity = 100

    public let capacity: Int
    private let core: Core

    /// `name` names the writer's thread (for a debugger).
    public init(name: String, capacity: Int = OutputQueue.defaultCapacity) {
        self.capacity = capacity
        core = Core()
        let core = self.core
        let thread = Thread {
            // A reader that went away is EPIPE on this thread, never SIGPIPE: the signal write(2)
            // raises is directed at the writing thread, and blocked here it stays pending and is
            // discarded with the thread. The process's own disposition is left as its host set
            // it (the CLI ignores SIGPIPE; a program embedding the library may not).
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            core.run()
        }
        thread.name = name
        thread.start()
    }

    /// Without `finish` (a stage that never started) the thread writes what is queued and ends.
    deinit { core.close() }

    public var counts: Counts { core.state.withLock { $0.counts } }

    /// Queues `job`; never waits. Room is `capacity` jobs, or, with `overflowBytes` above 0,
    /// more while the queued jobs' `bytes` stay within it (a file's snapshots, whose frames
    /// would otherwise be skipped on a slow machine and not on a fast one).
    @discardableResult
    public func submit(bytes: Int = 0, overflowBytes: Int = 0, _ job: @escaping Job) -> Submission {
        let result = core.state.withLock { s -> Submission in
            let room = s.counts.pending < capacity || (overflowBytes > 0 && s.counts.pendingBytes + bytes <= overflowBytes)
            guard room, !s.closed else {
                s.counts.dropped += 1
                return .dropped(first: s.counts.dropped == 1)
            }
            s.jobs.append((job, bytes))
            s.counts.pending += 1
            s.counts.pendingBytes += bytes
            return .queued
        }
        if result == .queued { core.wake.signal() }
        return result
    }

    /// End: no more jobs; waits until what is queued is written, or `quiet` seconds pass without
    /// a job finishing, or `atMost` seconds in all. Then what is left is given up, counted in
    /// `leftAtEnd`. Returns the final counts.
    @discardableResult
    public func finish(quiet: Double = 2, atMost: Double = 10) -> Counts {
        core.close()
        let start = DispatchTime.now().uptimeNanoseconds
        var lastProgress = start, lastWritten = -1
        while true {
            let (pending, written) = core.state.withLock { ($0.counts.pending, $0.counts.written) }
            if pending == 0 { break }
            let now = DispatchTime.now().uptimeNanoseconds
            if written != lastWritten { lastWritten = written; lastProgress = now }
            if Double(now - lastProgress) / 1e9 >= quiet || Double(now - start) / 1e9 >= atMost {
                core.giveUp()
                break
            }
            usleep(10_000)
        }
        return counts
    }

    /// The state the thread shares with the queue's owner (the thread keeps it, not the queue,
    /// so that the queue's deinit can end the thread).
    fileprivate final class Core: Sendable {
        struct State {
            var jobs: [(Job, Int)?] = []
            var next = 0
            var closed = false
            var counts = Counts()
        }
        let state = Mutex(State())
        let wake = DispatchSemaphore(value: 0)
        let givingUp = Atomic<Bool>(false)

        func close() {
            let first = state.withLock { s in defer { s.closed = true }; return !s.closed }
            if first { wake.signal() }
        }

        /// Everything still queued or running is counted as left at the end; the thread drops
        /// the jobs it has not started.
        func giveUp() {
            state.withLock { s in
                guard !givingUp.load(ordering: .relaxed) else { return }
                givingUp.store(true, ordering: .relaxed)
                s.counts.leftAtEnd += s.counts.pending
            }
        }

        func run() {
            let handle = Handle(core: self)
            while true {
                wake.wait()
                guard let (job, bytes) = state.withLock({ s -> (Job, Int)? in
                    guard s.next < s.jobs.count else { return nil }
                    // Taken out, not kept: a job may hold its writer (and its file) open.
                    defer {
                        s.jobs[s.next] = nil
                        s.next += 1
                        if s.next > 256, s.next * 2 > s.jobs.count { s.jobs.removeFirst(s.next); s.next = 0 }
                    }
                    return s.jobs[s.next]
                }) else {
                    // Woken with nothing queued: closed, and all written.
                    return
                }
                if !givingUp.load(ordering: .relaxed) { job(handle) }
                state.withLock { s in
                    s.counts.pending -= 1
                    s.counts.pendingBytes -= bytes
                    if !givingUp.load(ordering: .relaxed) { s.counts.written += 1 }
                }
            }
        }
    }
}
