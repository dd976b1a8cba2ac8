/// A stage's settings as one value, as gst-plugins-rs keeps them: a struct whose initial field
/// values are the defaults, and one table of properties, each row declared against a key path
/// of it. The stage reads a setting as a field (`settings.strength`): a wrong name or kind is a
/// compile error. Everything that sets properties by name — GStreamer, the control socket, the
/// HTTP API, a test — goes through the rows (`init(_:)` fills the struct from values by name).
///
///     struct Settings: StageSettings {
///         var strength = 1.0
///         var method = Method.pixelate
///         static let properties: [Property<Settings>] = [
///             .double("strength", \.strength, 0...1, live: true, help: "how much"),
///             .choice("method", \.method, help: "pixelate or blur"),
///         ]
///     }
public protocol StageSettings: Sendable, Equatable {
    /// The defaults.
    init()
    /// The stage's properties, in the order `streamlens stages` lists them.
    static var properties: [Property<Self>] { get }
}

extension StageSettings {
    /// The rows as a property table (the descriptor's `properties`).
    public static var table: [PropertySpec] { properties.map(\.spec) }

    /// The settings the values by name give (each row writes its field; a name no row has, or a
    /// value of another kind, is left out: values are checked against the table before).
    public init(_ values: PropertyValues) {
        self.init()
        for property in Self.properties {
            if let value = values[property.spec.name] { property.write(&self, value) }
        }
    }

    /// The same settings as values by name, a row each (readings empty).
    public var values: [String: PropertyValue] {
        Dictionary(Self.properties.map { ($0.spec.name, $0.read(self)) }, uniquingKeysWith: { first, _ in first })
    }
}

/// Settings of a stage with no properties of its own.
public struct NoSettings: StageSettings {
    public init() {}
    public static let properties: [Property<NoSettings>] = []
}

/// One property of a stage: its row (`PropertySpec`: name, kind, range, default, help, live) and
/// the field of the settings it is bound to.
public struct Property<Settings>: Sendable {
    public let spec: PropertySpec
    let write: @Sendable (inout Settings, PropertyValue) -> Void
    let read: @Sendable (Settings) -> PropertyValue

    /// A row bound to a field through `write` and `read`; its default is the field's value in
    /// `Settings()`.
    public init(_ spec: PropertySpec, write: @escaping @Sendable (inout Settings, PropertyValue) -> Void,
                read: @escaping @Sendable (Settings) -> PropertyValue) {
        self.spec = spec
        self.write = write
        self.read = read
    }

    /// The row as a request (`PropertySpec.isRequest`).
    public func request() -> Property {
        var spec = self.spec
        spec.isRequest = true
        return Property(spec, write: write, read: read)
    }

    /// The same row for settings that hold these at `path` (a group of rows several stages
    /// share: the inference options, the record sinks').
    public func lifted<Outer>(_ path: WritableKeyPath<Outer, Settings> & Sendable) -> Property<Outer> {
        let (write, read) = (self.write, self.read)
        return Property<Outer>(spec, write: { outer, value in write(&outer[keyPath: path], value) }, read: { read($0[keyPath: path]) })
    }
}

extension Property where Settings: StageSettings {
    private static func bound<Value>(_ name: String, _ kind: PropertySpec.Kind, _ path: WritableKeyPath<Settings, Value> & Sendable, live: Bool,
                                     help: String, from: @escaping @Sendable (PropertyValue) -> Value?,
                                     to: @escaping @Sendable (Value) -> PropertyValue) -> Property {
        Property(PropertySpec(name, kind, default: to(Settings()[keyPath: path]), live: live, help: help),
                 write: { settings, value in if let v = from(value) { settings[keyPath: path] = v } },
                 read: { to($0[keyPath: path]) })
    }

    public static func bool(_ name: String, _ path: WritableKeyPath<Settings, Bool> & Sendable, live: Bool = false, help: String) -> Property {
        bound(name, .bool, path, live: live, help: help, from: { if case .bool(let v) = $0 { v } else { nil } }, to: { .bool($0) })
    }

    public static func int(_ name: String, _ path: WritableKeyPath<Settings, Int> & Sendable, _ range: ClosedRange<Int>, live: Bool = false,
                           help: String) -> Property {
        bound(name, .int(range), path, live: live, help: help, from: { if case .int(let v) = $0 { v } else { nil } }, to: { .int($0) })
    }

    public static func double(_ name: String, _ path: WritableKeyPath<Settings, Double> & Sendable, _ range: ClosedRange<Double>,
                              live: Bool = false, help: String) -> Property {
        bound(name, .double(range), path, live: live, help: help, from: { if case .double(let v) = $0 { v } else { nil } }, to: { .double($0) })
    }

    public static func string(_ name: String, _ path: WritableKeyPath<Settings, String> & Sendable, live: Bool = false, help: String) -> Property {
        bound(name, .string, path, live: live, help: help, from: { if case .string(let v) = $0 { v } else { nil } }, to: { .string($0) })
    }

    /// One of a fixed set of words, held as a String (the set is known only at run time: devices).
    public static func choice(_ name: String, _ path: WritableKeyPath<Settings, String> & Sendable, _ choices: [String], live: Bool = false,
                              help: String) -> Property {
        bound(name, .choice(choices), path, live: live, help: help, from: { if case .string(let v) = $0 { v } else { nil } }, to: { .string($0) })
    }

    /// One of an enumeration's cases, by raw value.
    public static func choice<Choice>(_ name: String, _ path: WritableKeyPath<Settings, Choice> & Sendable, live: Bool = false,
                                      help: String) -> Property
        where Choice: RawRepresentable & CaseIterable & Sendable, Choice.RawValue == String {
        bound(name, .choice(Choice.allCases.map(\.rawValue)), path, live: live, help: help,
              from: { if case .string(let v) = $0 { Choice(rawValue: v) } else { nil } }, to: { .string($0.rawValue) })
    }

    /// A reading the stage publishes while it runs (`Stage.readings`), bound to no field.
    public static func reading(_ name: String, help: String) -> Property {
        Property(.reading(name, help: help), write: { _, _ in }, read: { _ in .string("") })
    }

    /// The rows of `Group`, for settings that hold one at `path`.
    public static func group<Group: StageSettings>(_ path: WritableKeyPath<Settings, Group> & Sendable) -> [Property] {
        Group.properties.map { $0.lifted(path) }
    }
}

extension Property where Settings: StageSettings {
    /// A row that keeps its value by name in `path` for someone else to read with rows of its
    /// own (lensmetadata's record sinks: each sink decodes its `Settings` from these).
    public static func passthrough(_ spec: PropertySpec, _ path: WritableKeyPath<Settings, [String: PropertyValue]> & Sendable) -> Property {
        let name = spec.name, fallback = spec.defaultValue
        return Property(spec, write: { settings, value in settings[keyPath: path][name] = value }, read: { $0[keyPath: path][name] ?? fallback })
    }
}

/// How a watchdog stage (`StageDescriptor.restartsUpstream`) restarts its source part: the
/// settings of lenswatchdog, which the bridge's restart logic reads (`SourceRestarting`).
public struct RestartPolicy: StageSettings {
    /// Seconds without a frame after which the source counts as stalled.
    public var timeout = 5.0
    /// Failed restarts in a row before the run ends with an error (0: never give up).
    public var retries = 10
    /// Seconds before the first restart; doubled after each failed one, up to `maxBackoff`.
    public var backoff = 1.0
    public var maxBackoff = 30.0
    /// An end of stream from the source is an outage (a file then plays in a loop).
    public var restartOnEOS = true
    public init() {}

    public static let properties: [Property<RestartPolicy>] = [
        .double("timeout", \.timeout, 0.5...3600, help: "seconds without a frame after which the source counts as stalled"),
        .int("retries", \.retries, 0...1_000_000, help: "failed restarts in a row before the run ends with an error (0: never give up)"),
        .double("backoff", \.backoff, 0...600, help: "seconds before the first restart; doubled after each failed one, up to max-backoff"),
        .double("max-backoff", \.maxBackoff, 0...3600,
                help: "longest wait between two restarts, seconds (how soon a source that is back is noticed)"),
        .bool("restart-on-eos", \.restartOnEOS,
              help: "an end of stream from the source is an outage (a file then plays in a loop); false: end the run"),
    ]
}

/// A stage whose source part the bridge restarts (`StageDescriptor.restartsUpstream`), by its policy.
public protocol SourceRestarting {
    var restartPolicy: RestartPolicy { get }
}
