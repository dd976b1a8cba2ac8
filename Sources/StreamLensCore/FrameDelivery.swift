/// The order frames leave a stage in: the rule every host of stages follows (the GStreamer
/// bridge's worker and the in-memory `StageDriver` of StreamLensTesting), kept in one place.
///
/// A frame whose outcome the stage gave at once leaves at once — unless frames before it are
/// still pending (a request in flight), then it waits behind them. Pending frames take their
/// outcomes from `Stage.finishOldest`, oldest first; no frame overtakes another.
public struct FrameDelivery<Item> {
    private var held: [(item: Item, outcome: FrameOutcome?)] = []

    public init() {}

    /// Frames held: pending, or behind one that is.
    public var count: Int { held.count }
    public var isEmpty: Bool { held.isEmpty }

    /// One frame and what the stage answered for it. Returns the frames that may leave now, in
    /// order (this one, when nothing is held and it is not pending).
    public mutating func add(_ item: Item, outcome: FrameOutcome) -> [(Item, FrameOutcome)] {
        if case .pending = outcome {
            held.append((item, nil))
            return []
        }
        if held.isEmpty { return [(item, outcome)] }
        held.append((item, outcome))
        return []
    }

    /// Delivers held frames from the oldest while their outcomes are known, asking the stage for
    /// a pending one's (`wait`: until none is held, as at end of stream). `deliver` returns false
    /// to stop (the host is going away): the rest is dropped and false returned. `afterAsking`
    /// runs after each question to the stage (the host posts its notices then).
    public mutating func deliverReady(from stage: any Stage, wait: Bool, afterAsking: () -> Void = {},
                                      _ deliver: (Item, FrameOutcome) -> Bool) -> Bool {
        while let oldest = held.first {
            var outcome = oldest.outcome
            if outcome == nil {
                outcome = stage.finishOldest(wait: wait)
                afterAsking()
            }
            guard let outcome else { return true }
            held.removeFirst()
            if !deliver(oldest.item, outcome) {
                held.removeAll()
                return false
            }
        }
        return true
    }

    /// Drops every held frame (a flush).
    public mutating func removeAll() { held.removeAll() }
}
