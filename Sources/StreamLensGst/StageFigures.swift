import Synchronization

/// One stage's frame figures as values, published by its worker with its metrics: what
/// `streamlens serve` lists for each source (`SourceSet.figures`) reads these, not the metrics
/// page's names and labels back.
struct StageFigures: Sendable, Equatable {
    /// The source the stage's pipeline runs for (`streamlens serve`); nil in other hosts.
    var source: String?
    /// The stage element's name.
    var stage: String
    /// Frames that reached the stage's element (those lost in its queue too).
    var framesReceived = 0
    /// Frames received per second over the last 5 s.
    var framesPerSecond = 0.0
    /// Frames dropped for any reason: in the queue, for errors, on purpose.
    var framesDropped = 0
    /// Restarts of the source by this stage (a watchdog); 0 for other stages.
    var restarts = 0
    /// Median age of the recent frames leaving the stage, ms (live pipelines; nil before one).
    var latencyMs: Double?

    /// Each running worker's latest figures, by its metrics registry key.
    private static let published = Mutex<[Int: StageFigures]>([:])

    static func publish(_ figures: StageFigures, key: Int) { published.withLock { $0[key] = figures } }
    static func remove(key: Int) { _ = published.withLock { $0.removeValue(forKey: key) } }

    /// The figures of every stage running for `source`, in the order their workers started.
    static func of(source: String?) -> [StageFigures] {
        published.withLock { p in p.keys.sorted().compactMap { key in p[key].flatMap { $0.source == source ? $0 : nil } } }
    }
}
