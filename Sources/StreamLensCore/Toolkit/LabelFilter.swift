/// A stage's `labels=` property: the regions of these labels only, comma-separated; empty, every
/// region. lensblur, lensclassify, lenssnapshot, lensstylize, lenstrack and lenszone read it.
public struct LabelFilter: Sendable, Equatable {
    /// The labels let through; empty: every label.
    public let labels: Set<String>

    public init(_ labels: some Sequence<String>) { self.labels = Set(labels) }

    /// The `labels` property of a stage's settings.
    public init(_ settings: StageSettings) { self.init(settings.list("labels")) }

    public func admits(_ label: String) -> Bool { labels.isEmpty || labels.contains(label) }

    /// The property's row: `which` says what the stage does with the regions it lets through
    /// ("hide only regions with these labels"); the list's syntax and the empty case follow.
    public static func property(_ which: String, live: Bool) -> PropertySpec {
        PropertySpec("labels", .string, default: .string(""), live: live, help: which + ", comma-separated (empty: every region)")
    }
}
