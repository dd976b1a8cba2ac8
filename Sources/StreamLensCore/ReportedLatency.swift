/// What a stage adds to the pipeline's latency, answered to latency queries so clock-synced
/// sinks (a preview window, an RTSP client's jitter buffer) wait for its frames instead of
/// dropping them as late: the slowest (95th percentile) of the last 32 frames' processing times,
/// in 10 ms steps, never lowered — a latency that moves back and forth makes sinks stutter.
public struct ReportedLatency: Sendable {
    private var recent = TimingWindow(capacity: 32, dropping: 1)
    public private(set) var nanoseconds: UInt64 = 0

    public init() {}

    public mutating func add(milliseconds: Double) {
        recent.record(milliseconds)
        guard recent.count >= 3, let slow = recent.percentile(95) else { return }
        let stepped = UInt64((slow / 10).rounded(.up) * 10) * 1_000_000
        if stepped > nanoseconds { nanoseconds = stepped }
    }
}
