/// A stage's `labels=` property: the regions of these labels only, comma-separated; empty, every
/// region. lensblur, lensclassify, lenssnapshot, lensstylize, lenstrack and lenszone read it.
public struct LabelFilter: Sendable, Equatable {
    /// The labels let through; empty: every label.
    public let labels: Set<String>

    public init(_ labels: some Sequence<String>) { self.labels = Set(labels) }

    /// The `labels` property's text: a comma-separated list (`commaList`).
    public init(text: String) { self.init(commaList(text)) }

    public func admits(_ label: String) -> Bool { labels.isEmpty || labels.contains(label) }

    /// The property's row, bound to a stage's `labels` text: `which` says what the stage does
    /// with the regions it lets through ("hide only regions with these labels"); the list's
    /// syntax and the empty case follow.
    public static func property<S: StageSettings>(_ path: WritableKeyPath<S, String> & Sendable, _ which: String, live: Bool) -> Property<S> {
        .string("labels", path, live: live, help: which + ", comma-separated (empty: every region)")
    }
}
