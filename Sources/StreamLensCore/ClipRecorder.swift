/// lensrecord's decisions, without GStreamer: which encoded frames stay in memory (the pre-roll
/// ring), where a clip starts and ends. The stage gives it every frame in stream order with
/// whether something triggered on it; it answers what to write.
///
/// - The ring keeps the newest frames back to the last keyframe at or before `pre` seconds ago
///   (so a clip can start there), and at most `maxRingBytes` (whole groups of pictures dropped
///   from the front, oldest first; a ring that holds only the group being received keeps it).
/// - A trigger starts a clip at the ring's last keyframe at or before `pre` seconds before the
///   triggering frame, or before the previous clip's end if that is later (the ring's first
///   keyframe when it holds no such one: a stream that began less than `pre` ago, or a ring cut
///   by bytes), or at the next keyframe when it holds none.
/// - The clip goes on until `post` seconds after the last trigger (triggers during it extend
///   it), and never past `max` seconds from its first frame; the first frame at or past the end
///   is not in it. Then the next trigger makes a new clip.
public struct ClipRecorder<Unit> {
    public struct Settings: Sendable, Equatable {
        public var preNanoseconds: UInt64
        public var postNanoseconds: UInt64
        public var maxNanoseconds: UInt64
        public var maxRingBytes: Int
        public init(pre: Double, post: Double, max: Double, maxRingBytes: Int) {
            preNanoseconds = UInt64((pre * 1e9).rounded())
            postNanoseconds = UInt64((post * 1e9).rounded())
            maxNanoseconds = UInt64((max * 1e9).rounded())
            self.maxRingBytes = maxRingBytes
        }
    }

    public enum Action {
        /// A clip starts: write these frames (from a keyframe, in order; the triggering one last).
        case start([Unit])
        /// Write this frame into the clip being written.
        case append(Unit)
        /// The clip being written is complete (the frame given is not in it).
        case end(Ending)
    }

    public enum Ending: Sendable, Equatable {
        /// `post` seconds after its last trigger.
        case post
        /// It reached `max` seconds.
        case max
    }

    private struct Entry {
        var time: UInt64
        var keyframe: Bool
        var bytes: Int
        var unit: Unit
    }

    public var settings: Settings
    private var ring: [Entry] = []
    public private(set) var ringBytes = 0
    private enum State {
        case idle
        /// Triggered with no keyframe to start from: the clip starts at the next one.
        case waitingForKeyframe(until: UInt64)
        case recording(start: UInt64, until: UInt64)
    }
    private var state = State.idle
    /// The time of the first frame after the last clip.
    private var lastEnd: UInt64?

    public init(settings: Settings) { self.settings = settings }

    public var isRecording: Bool {
        if case .idle = state { return false }
        return true
    }

    /// Frames and bytes the ring holds now.
    public var ringFrames: Int { ring.count }

    /// The ring's oldest frame: no clip can start before it.
    public var oldestUnit: Unit? { ring.first?.unit }

    /// One frame, its presentation time (ns), whether it is a keyframe, its size, and whether
    /// something triggered a clip on it; what to write, in order.
    public mutating func add(_ unit: Unit, time: UInt64, keyframe: Bool, bytes: Int, triggered: Bool) -> [Action] {
        var actions: [Action] = []
        switch state {
        case .recording(let start, var until):
            if time >= until || time >= start &+ settings.maxNanoseconds {
                actions.append(.end(time >= until ? .post : .max))
                state = .idle
                lastEnd = time
            } else {
                if triggered { until = Swift.max(until, time &+ settings.postNanoseconds) }
                state = .recording(start: start, until: until)
                actions.append(.append(unit))
            }
        case .waitingForKeyframe(var until):
            if triggered { until = Swift.max(until, time &+ settings.postNanoseconds) }
            if keyframe {
                state = .recording(start: time, until: until)
                actions.append(.start([unit]))
            } else {
                state = .waitingForKeyframe(until: until)
            }
        case .idle:
            break
        }
        remember(Entry(time: time, keyframe: keyframe, bytes: bytes, unit: unit))
        // Idle here (before, or a clip just ended on this frame): a trigger starts a clip.
        if case .idle = state, triggered {
            let until = time &+ settings.postNanoseconds
            // Not before the previous clip's end (video already in a clip is not repeated but
            // for the frames since the keyframe before that end); a keyframe within a
            // millisecond after `from` counts as at it (timestamps rounded to nanoseconds).
            let from = Swift.max(time >= settings.preNanoseconds ? time - settings.preNanoseconds : 0, lastEnd ?? 0) &+ 1_000_000
            // The last keyframe at or before `from`, else the ring's first keyframe.
            var startIndex: Int?
            for i in ring.indices.reversed() where ring[i].keyframe {
                startIndex = i
                if ring[i].time <= from { break }
            }
            if let s = startIndex {
                state = .recording(start: ring[s].time, until: until)
                actions.append(.start(ring[s...].map(\.unit)))
            } else {
                state = .waitingForKeyframe(until: until)
            }
        }
        return actions
    }

    /// Adds a frame to the ring and trims it (see the type's comment).
    private mutating func remember(_ entry: Entry) {
        ring.append(entry)
        ringBytes += entry.bytes
        let now = entry.time
        let from = now >= settings.preNanoseconds ? now - settings.preNanoseconds : 0
        // Frames before the first keyframe can start no clip.
        guard let first = ring.firstIndex(where: \.keyframe) else {
            ring.removeAll()
            ringBytes = 0
            return
        }
        // The newest keyframe at or before `from`: everything before it can go.
        var keep = first
        for i in ring.indices.reversed() where ring[i].keyframe && ring[i].time <= from {
            keep = i
            break
        }
        dropFront(to: keep)
        // Bytes: whole groups of pictures from the front while over the bound.
        while ringBytes > settings.maxRingBytes,
              let next = ring.dropFirst().firstIndex(where: \.keyframe) {
            dropFront(to: next)
        }
    }

    private mutating func dropFront(to index: Int) {
        guard index > 0 else { return }
        for i in 0..<index { ringBytes -= ring[i].bytes }
        // Let go of the units (references to buffers) at once.
        ring.removeFirst(index)
    }

    /// The end of the stream: the clip being written, if any, ends there.
    public mutating func finish() -> Bool {
        defer { state = .idle }
        if case .recording = state { return true }
        return false
    }
}
