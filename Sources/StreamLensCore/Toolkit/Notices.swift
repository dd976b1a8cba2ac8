extension Array where Element == StageNotice {
    /// The notices gathered since the last call, leaving none: what a stage's `takeNotices`
    /// answers (`notices.take()`).
    public mutating func take() -> [StageNotice] {
        var taken: [StageNotice] = []
        swap(&self, &taken)
        return taken
    }
}
