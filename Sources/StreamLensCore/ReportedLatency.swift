/// What a stage adds to the pipeline's latency, answered to latency queries so clock-synced
/// sinks (a preview window, an RTSP client's jitter buffer) wait for its frames instead of
/// dropping them as late: the slowest (95th percentile) of the last 32 frames' processing times,
/// in 10 ms steps, never lowered — a latency that moves back and forth makes sinks stutter.
public struct ReportedLatency: Sendable {
    private var recent: [Double] = []
    public private(set) var nanoseconds: UInt64 = 0

    public init() {}

    public mutating func add(milliseconds: Double) {
        recent.append(milliseconds)
        if recent.count > 32 { recent.removeFirst(recent.count - 32) }
        guard recent.count >= 3 else { return }
        let sorted = recent.sorted()
        let slow = sorted[min(sorted.count - 1, sorted.count * 95 / 100)]
        let stepped = UInt64((slow / 10).rounded(.up) * 10) * 1_000_000
        if stepped > nanoseconds { nanoseconds = stepped }
    }
}
