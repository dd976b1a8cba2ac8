/// Counts and frame ages of one stage, summarised as the CLI prints them.
/// Frame age: pipeline running time when the frame leaves the stage minus the frame's own
/// running time (its capture time for live sources).
public struct FrameStatistics: Sendable {
    public private(set) var framesIn = 0
    public private(set) var framesOut = 0
    public private(set) var dropped = 0
    /// Recent frame ages in nanoseconds (a bounded window, so a long run stays flat in memory).
    private var ages: [UInt64] = []
    private var nextAge = 0
    public private(set) var maxAge: UInt64 = 0
    /// Every frame age since the start, for Prometheus.
    public private(set) var ageHistogram = Histogram()
    public static let window = 1024

    public init() {}

    /// Monotonic nanoseconds of the first and the latest frame received.
    private var firstTime: UInt64?
    private var lastTime: UInt64 = 0

    public mutating func received(at now: UInt64? = nil) {
        framesIn += 1
        if let now {
            if firstTime == nil { firstTime = now }
            lastTime = now
        }
    }

    /// Frames per second between the first and the latest frame received.
    public var framesPerSecond: Double? {
        guard let firstTime, lastTime > firstTime, framesIn > 1 else { return nil }
        return Double(framesIn - 1) / (Double(lastTime - firstTime) / 1e9)
    }
    public mutating func forwarded(age: UInt64?) {
        framesOut += 1
        guard let age else { return }
        maxAge = max(maxAge, age)
        ageHistogram.observe(Double(age) / 1e9)
        if ages.count < Self.window { ages.append(age) } else { ages[nextAge] = age }
        nextAge = (nextAge + 1) % Self.window
    }
    /// Frames dropped before reaching the stage (live mode) or by the stage.
    public mutating func addDropped(_ n: Int) { dropped += n }
    /// Frames whose pixels the stage had to copy before writing into them (another element held
    /// them: a tee's other branch).
    public private(set) var copies = 0
    public mutating func copied() { copies += 1 }

    /// The q-quantile (0…1) of the recent ages, nanoseconds.
    public func ageQuantile(_ q: Double) -> UInt64? {
        guard !ages.isEmpty else { return nil }
        let sorted = ages.sorted()
        let i = min(sorted.count - 1, max(0, Int((q * Double(sorted.count - 1)).rounded())))
        return sorted[i]
    }

    public var summary: String {
        var s = "\(framesIn) frames in, \(framesOut) out, \(dropped) dropped, \(copies) cop\(copies == 1 ? "y" : "ies")"
        if let fps = framesPerSecond { s += ", \(String(format1: fps)) fps" }
        if let p50 = ageQuantile(0.5), let p95 = ageQuantile(0.95) {
            s += ", frame age p50 \(Self.ms(p50)) p95 \(Self.ms(p95)) max \(Self.ms(maxAge))"
        }
        return s
    }

    static func ms(_ ns: UInt64) -> String {
        let v = Double(ns) / 1e6
        return v < 10 ? String(format1: v) + " ms" : "\(Int(v.rounded())) ms"
    }
}

extension String {
    init(format1 v: Double) {
        let tenths = Int((v * 10).rounded())
        self = "\(tenths / 10).\(tenths % 10)"
    }
}
