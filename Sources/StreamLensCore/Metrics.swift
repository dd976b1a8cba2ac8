import Foundation
import Synchronization

/// A measurement for Prometheus (`streamlens run --metrics`): one sample of a metric family, with
/// its labels. Names follow Prometheus' conventions: `streamlens_` first, base units
/// (`_seconds`, `_bytes`), counters end in `_total`, info metrics in `_info` with the value 1.
///
/// Stages give theirs through `Stage.metrics` (read by the host on the stage's own thread,
/// a few times a second); the host adds the per-stage frame figures and the `stage` label,
/// and publishes them all into `MetricsRegistry.shared`, which the metrics server renders.
public struct Metric: Sendable, Equatable {
    public enum Value: Sendable, Equatable {
        case counter(Double)
        case gauge(Double)
        case histogram(Histogram)

        var typeName: String {
            switch self {
            case .counter: "counter"
            case .gauge: "gauge"
            case .histogram: "histogram"
            }
        }
    }

    public var name: String
    public var help: String
    /// In the order written; the host puts `stage` first.
    public var labels: [(name: String, value: String)]
    public var value: Value

    public init(_ name: String, _ help: String, labels: [(name: String, value: String)] = [], _ value: Value) {
        self.name = name
        self.help = help
        self.labels = labels
        self.value = value
    }

    public static func counter(_ name: String, _ help: String, labels: [(name: String, value: String)] = [], _ value: Int) -> Metric {
        Metric(name, help, labels: labels, .counter(Double(value)))
    }
    public static func gauge(_ name: String, _ help: String, labels: [(name: String, value: String)] = [], _ value: Double) -> Metric {
        Metric(name, help, labels: labels, .gauge(value))
    }
    public static func histogram(_ name: String, _ help: String, labels: [(name: String, value: String)] = [], _ value: Histogram) -> Metric {
        Metric(name, help, labels: labels, .histogram(value))
    }

    public static func == (a: Metric, b: Metric) -> Bool {
        a.name == b.name && a.help == b.help && a.value == b.value
            && a.labels.map(\.name) == b.labels.map(\.name) && a.labels.map(\.value) == b.labels.map(\.value)
    }
}

/// A Prometheus histogram of seconds: counts per bucket (upper bounds, each bucket holding what
/// is above the previous bound), their sum and count. A value type the stage keeps and updates
/// on its own thread; the host copies it out with the stage's metrics.
public struct Histogram: Sendable, Equatable {
    public let bounds: [Double]
    /// One per bound, then the overflow (above the last bound).
    public private(set) var counts: [UInt64]
    public private(set) var sum: Double = 0
    public private(set) var count: UInt64 = 0

    /// Inference and per-frame work: 0.5 ms to 5 s.
    public static let latencyBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

    public init(bounds: [Double] = Histogram.latencyBounds) {
        self.bounds = bounds.sorted()
        counts = Array(repeating: 0, count: bounds.count + 1)
    }

    public mutating func observe(_ seconds: Double) {
        guard seconds.isFinite else { return }
        var i = 0
        while i < bounds.count, seconds > bounds[i] { i += 1 }
        counts[i] += 1
        sum += seconds
        count += 1
    }

    /// Cumulative counts for each bound (Prometheus' `le` buckets, without +Inf, which is `count`).
    public var cumulative: [UInt64] {
        var running: UInt64 = 0
        return bounds.indices.map { running += counts[$0]; return running }
    }
}

/// Every metric of the process, by source (one per stage worker, one per collector), rendered
/// in Prometheus' text exposition format (version 0.0.4) when scraped. Publishing replaces a
/// source's samples as a whole, so a scrape never sees half of a stage's update.
public final class MetricsRegistry: Sendable {
    public static let shared = MetricsRegistry()

    private let published = Mutex<[Int: [Metric]]>([:])
    private let collectors = Mutex<[Int: @Sendable () -> [Metric]]>([:])
    private let nextSource = Atomic<Int>(1)

    public init() {}

    /// A key for one publisher (a stage worker): its samples are replaced on each `publish`.
    public func newSource() -> Int { nextSource.add(1, ordering: .relaxed).oldValue }

    public func publish(_ metrics: [Metric], source: Int) {
        published.withLock { $0[source] = metrics }
    }

    public func remove(source: Int) {
        _ = published.withLock { $0.removeValue(forKey: source) }
        _ = collectors.withLock { $0.removeValue(forKey: source) }
    }

    /// A function asked at every scrape (process memory and CPU: read when asked).
    public func addCollector(_ collect: @escaping @Sendable () -> [Metric]) -> Int {
        let source = newSource()
        collectors.withLock { $0[source] = collect }
        return source
    }

    public var metrics: [Metric] {
        let fixed = published.withLock { p in p.keys.sorted().flatMap { p[$0]! } }
        let asked = collectors.withLock { c in c.keys.sorted().map { c[$0]! } }
        return fixed + asked.flatMap { $0() }
    }

    /// The text exposition format: per family (sorted by name) its HELP and TYPE, then its
    /// samples in the order published. A family whose name is used with two types keeps the
    /// first (a sample of the other type is left out rather than making the page invalid);
    /// a sample whose labels repeat another's is left out too.
    public func exposition() -> String {
        Self.exposition(metrics)
    }

    public static func exposition(_ metrics: [Metric]) -> String {
        var order: [String] = []
        var families: [String: (help: String, type: String, samples: [Metric])] = [:]
        var seen: Set<String> = []
        for m in metrics where Self.isValidName(m.name) && m.labels.allSatisfy({ Self.isValidLabelName($0.name) }) {
            let key = m.name + "\u{0}" + m.labels.map { "\($0.name)=\($0.value)" }.joined(separator: "\u{0}")
            guard seen.insert(key).inserted else { continue }
            if var family = families[m.name] {
                guard family.type == m.value.typeName else { continue }
                family.samples.append(m)
                families[m.name] = family
            } else {
                order.append(m.name)
                families[m.name] = (m.help, m.value.typeName, [m])
            }
        }
        var text = ""
        for name in order.sorted() {
            let family = families[name]!
            text += "# HELP \(name) \(escapeHelp(family.help))\n# TYPE \(name) \(family.type)\n"
            for m in family.samples {
                switch m.value {
                case .counter(let v), .gauge(let v):
                    text += "\(name)\(labelText(m.labels)) \(number(v))\n"
                case .histogram(let h):
                    for (bound, count) in zip(h.bounds, h.cumulative) {
                        text += "\(name)_bucket\(labelText(m.labels + [("le", number(bound))])) \(count)\n"
                    }
                    text += "\(name)_bucket\(labelText(m.labels + [("le", "+Inf")])) \(h.count)\n"
                    text += "\(name)_sum\(labelText(m.labels)) \(number(h.sum))\n"
                    text += "\(name)_count\(labelText(m.labels)) \(h.count)\n"
                }
            }
        }
        return text
    }

    static func labelText(_ labels: [(name: String, value: String)]) -> String {
        guard !labels.isEmpty else { return "" }
        return "{" + labels.map { "\($0.name)=\"\(escapeLabel($0.value))\"" }.joined(separator: ",") + "}"
    }

    /// Integers without a fraction, others in Swift's shortest round-trip form; NaN and the
    /// infinities as Prometheus spells them.
    static func number(_ v: Double) -> String {
        if v.isNaN { return "NaN" }
        if v.isInfinite { return v > 0 ? "+Inf" : "-Inf" }
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return "\(v)"
    }

    static func escapeLabel(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
    static func escapeHelp(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    /// [a-zA-Z_:][a-zA-Z0-9_:]*
    public static func isValidName(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, first.isASCIILetterOrUnderscore || first == ":" else { return false }
        return s.unicodeScalars.allSatisfy { $0.isASCIILetterOrUnderscore || $0 == ":" || ("0"..."9").contains($0) }
    }
    /// [a-zA-Z_][a-zA-Z0-9_]*, not starting with __ (reserved).
    static func isValidLabelName(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, first.isASCIILetterOrUnderscore, !s.hasPrefix("__") else { return false }
        return s.unicodeScalars.allSatisfy { $0.isASCIILetterOrUnderscore || ("0"..."9").contains($0) }
    }
}

private extension Unicode.Scalar {
    var isASCIILetterOrUnderscore: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) || self == "_" }
}
