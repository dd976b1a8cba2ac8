/// The recent durations of one kind of work (milliseconds, say), for a summary's median and
/// percentiles, beside the `Histogram` that Prometheus gets. Bounded: past `capacity` values the
/// oldest `dropping` go at once, so a long run costs neither memory nor a shift per value (4096
/// and 2048 by default: the figures describe the last few minutes of a 30 fps stream).
public struct TimingWindow: Sendable, Equatable {
    public private(set) var values: [Double] = []
    public let capacity: Int
    public let dropping: Int

    /// `dropping` defaults to half the capacity; 1 keeps exactly the last `capacity` values.
    public init(capacity: Int = 4096, dropping: Int? = nil) {
        precondition(capacity > 0, "a window holds at least one value")
        self.capacity = capacity
        self.dropping = min(capacity, max(1, dropping ?? capacity / 2))
    }

    public mutating func record(_ value: Double) {
        values.append(value)
        if values.count > capacity { values.removeFirst(dropping) }
    }

    public var isEmpty: Bool { values.isEmpty }
    public var count: Int { values.count }
    public var last: Double? { values.last }

    /// The value a share `percent` of the window lies below: the sorted values' element at
    /// count × percent / 100 (the last for 100); nil when the window is empty.
    public func percentile(_ percent: Int) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, sorted.count * percent / 100)]
    }

    /// The upper median (the sorted values' element at count / 2); nil when empty.
    public var median: Double? { percentile(50) }
}
