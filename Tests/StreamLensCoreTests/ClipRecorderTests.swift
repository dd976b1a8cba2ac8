import StreamLensCore
import Testing

/// lensrecord's decisions on made-up streams: 25 fps (40 ms frames, exact in nanoseconds), a
/// keyframe every `gop` frames.
struct ClipRecorderTests {
    static let frame: UInt64 = 40_000_000

    /// Feeds frames 0..<count (triggers on the given ones); the clips as (first, last) frame numbers.
    static func clips(count: Int, gop: Int, triggers: Set<Int>, pre: Double, post: Double, max: Double = 300, ringBytes: Int = 1 << 30,
                      bytes: (Int) -> Int = { _ in 1000 }) -> (clips: [[Int]], endings: [ClipRecorder<Int>.Ending], maxRing: Int) {
        var r = ClipRecorder<Int>(settings: .init(pre: pre, post: post, max: max, maxRingBytes: ringBytes))
        var clips: [[Int]] = [], endings: [ClipRecorder<Int>.Ending] = [], current: [Int]?
        var maxRing = 0
        for i in 0..<count {
            for action in r.add(i, time: UInt64(i) * frame, keyframe: i % gop == 0, bytes: bytes(i), triggered: triggers.contains(i)) {
                switch action {
                case .start(let units): current = units
                case .append(let u): current?.append(u)
                case .end(let e): clips.append(current ?? []); endings.append(e); current = nil
                }
            }
            maxRing = Swift.max(maxRing, r.ringBytes)
        }
        if let current, r.finish() { clips.append(current) }
        return (clips, endings, maxRing)
    }

    @Test func aClipStartsAtTheKeyframeBeforePreAndEndsAtPost() {
        // Trigger at frame 50 (2 s), pre 1 s → from 1 s = frame 25, a keyframe; post 1 s → until frame 75.
        let c = Self.clips(count: 150, gop: 25, triggers: [50], pre: 1, post: 1)
        #expect(c.clips.count == 1 && c.clips[0] == Array(25...74), "\(c.clips.map { ($0.first, $0.last) })")
        #expect(c.endings == [.post])
        // 1 s is between keyframes (gop 20: 0, 20, 40): the keyframe before it, frame 20.
        let d = Self.clips(count: 150, gop: 20, triggers: [50], pre: 1, post: 1)
        #expect(d.clips.first?.first == 20 && d.clips.first?.last == 74, "\(d.clips.map { ($0.first, $0.last) })")
    }

    @Test func triggersDuringAClipExtendItUpToMax() {
        let c = Self.clips(count: 300, gop: 25, triggers: [50, 60, 80], pre: 1, post: 1)
        #expect(c.clips.count == 1 && c.clips.first?.first == 25 && c.clips.first?.last == 104, "\(c.clips.map { ($0.first, $0.last) })")
        // max 2 s from its first frame (25): frames 25…74. The trigger at 80 makes a new clip that
        // starts at the keyframe before the first one's end (75), not pre before it (55).
        let m = Self.clips(count: 300, gop: 25, triggers: [50, 60, 80, 200], pre: 1, post: 1, max: 2)
        #expect(m.clips.map { [$0.first ?? -1, $0.last ?? -1] } == [[25, 74], [75, 104], [175, 224]] && m.endings == [.max, .post, .post],
                "\(m.clips.map { ($0.first, $0.last) }) \(m.endings)")
    }

    @Test func theRingHoldsPreSecondsAndAtMostItsBytes() {
        // pre 1 s (25 frames) at 1000 bytes a frame: the ring never holds more than a second and a GOP.
        let c = Self.clips(count: 600, gop: 15, triggers: [], pre: 1, post: 1)
        #expect(c.clips.isEmpty && c.maxRing <= (25 + 15 + 1) * 1000, "\(c.maxRing)")
        // A byte bound of 20 kB: whole GOPs go from the front; the clip then starts later than pre.
        let b = Self.clips(count: 600, gop: 15, triggers: [300], pre: 5, post: 1, ringBytes: 20_000)
        #expect(b.maxRing <= 20_000 + 15_000, "\(b.maxRing)")
        #expect(b.clips.count == 1 && b.clips.first?.first == 285, "\(b.clips.map { $0.first })")
    }

    @Test func withoutAKeyframeTheClipWaitsForTheNext() {
        // A stream whose first keyframe comes at frame 40 (frames before it: not keyframes).
        var r = ClipRecorder<Int>(settings: .init(pre: 1, post: 1, max: 300, maxRingBytes: 1 << 20))
        var started: Int?
        for i in 0..<100 {
            for case .start(let units) in r.add(i, time: UInt64(i) * Self.frame, keyframe: i == 40 || i == 80, bytes: 10, triggered: i == 10) {
                started = units.first
            }
        }
        #expect(started == 40)
        #expect(r.isRecording == false)
    }

    @Test func theClipBeingRecordedEndsWithTheStream() {
        let c = Self.clips(count: 60, gop: 15, triggers: [45], pre: 1, post: 5)
        #expect(c.clips.count == 1 && c.clips[0].first == 15 && c.clips[0].last == 59 && c.endings.isEmpty)
    }
}
