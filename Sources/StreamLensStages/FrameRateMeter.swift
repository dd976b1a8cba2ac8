import Foundation

/// The frame rate over the last 30 frames and the text of the corner overlay.
struct FrameRateMeter {
    private var times: [UInt64] = []

    mutating func frameArrived(at now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
        times.append(now)
        if times.count > 30 { times.removeFirst(times.count - 30) }
    }

    var framesPerSecond: Double? {
        guard times.count > 1, let first = times.first, let last = times.last, last > first else { return nil }
        return Double(times.count - 1) / (Double(last - first) / 1e9)
    }

    /// "29.9 fps  latency 41 ms" (latency for live sources only), with `extra` between them.
    func cornerText(age: UInt64?, extra: String? = nil) -> String {
        var parts: [String] = []
        if let fps = framesPerSecond { parts.append(String(format: "%.1f fps", fps)) }
        if let extra { parts.append(extra) }
        if let age { parts.append(String(format: "latency %.0f ms", Double(age) / 1e6)) }
        return parts.joined(separator: "  ")
    }
}
