/// Everything the host knows about a stage type before any instance exists.
public struct StageDescriptor: Sendable {
    /// Element factory name. All stage names start with `StageDescriptor.namePrefix` so they
    /// never collide with installed GStreamer elements (gstreamer1.0-opencv has `facedetect`).
    public var name: String
    public var summary: String
    /// A pipeline spec that runs: shown by `streamlens stages` and run by the tests.
    public var example: String
    /// Caps the stage accepts, in GStreamer's caps syntax.
    public var sinkCaps: String
    /// Output caps always equal input caps (the host then negotiates through the stage).
    public var capsPassthrough: Bool
    /// The stage's own properties; `properties` adds the bridge's.
    public var ownProperties: [PropertySpec]
    /// A sink stage ends the pipeline (no output pad): its frames go wherever the stage sends
    /// them (an RTSP server, a file of its own).
    public var isSink: Bool
    /// A watchdog stage: the host restarts everything upstream of it (the source part) when that
    /// part fails, ends or stalls, while everything downstream keeps running; frames leave it
    /// stamped with the pipeline's running time, so a restarted source continues the timeline.
    public var restartsUpstream: Bool
    /// Keys the stage answers in a preview window (each a property change; `KeyBinding`).
    public var keys: [KeyBinding]
    /// Where its frames are processed, by what the stage is (the `thread` property overrides it).
    public var placement: StagePlacement
    /// Caps of a second input, a sink pad named `audio` (`… ! aacparse ! NAME.audio`), for a
    /// stage that also takes the stream's audio (lensrecord); nil: none. The audio ends at the
    /// stage (nothing is passed on); it reaches the stage by `AudioInput` (StreamLensGst).
    public var audioCaps: String?

    public static let namePrefix = "lens"

    public init(name: String, summary: String, example: String, sinkCaps: String = "video/x-raw", audioCaps: String? = nil,
                capsPassthrough: Bool = true, isSink: Bool = false, restartsUpstream: Bool = false, placement: StagePlacement = .ownThread,
                properties: [PropertySpec], keys: [KeyBinding] = []) {
        precondition(name.hasPrefix(Self.namePrefix), "stage names start with \(Self.namePrefix)")
        self.name = name
        self.summary = summary
        self.example = example
        self.sinkCaps = sinkCaps
        self.capsPassthrough = capsPassthrough
        self.isSink = isSink
        self.restartsUpstream = restartsUpstream
        self.placement = placement
        self.ownProperties = properties
        self.keys = keys
        self.audioCaps = audioCaps
    }

    /// A stage of encoded video (its caps are not `video/x-raw`: lensrecord's H.264 after
    /// h264parse): its frames are access units, none of which may be dropped (every later frame
    /// until the next keyframe depends on it), so it is lossless whatever `mode` says.
    public var takesEncodedVideo: Bool { !sinkCaps.hasPrefix("video/x-raw") }

    /// The full property table: the stage's own, then the bridge's (same for every stage).
    public var properties: [PropertySpec] { ownProperties + BridgeSettings.table }
}

/// Where a stage's frames are processed: decided by what the stage is, never by timing.
public enum StagePlacement: String, Sendable, CaseIterable {
    /// On upstream's streaming thread, as each frame arrives, as a GstBaseTransform runs: for a
    /// stage whose work is short and never waits (drawing, tracking, counting, writing to a
    /// queue). No queue and no hand-over; nothing is dropped; upstream waits for it.
    case inLine = "in-line"
    /// On a thread of its own behind a bounded queue (lossless: 4 frames, upstream waits when
    /// it is full; live: 1, the newest wins): for a stage that runs a model or may wait.
    case ownThread = "own-thread"

    /// How a stage page and `-v` say it.
    public var description: String {
        switch self {
        case .inLine: return "in-line, on upstream's streaming thread"
        case .ownThread: return "on a thread of its own, behind a bounded queue"
        }
    }
}

/// One row of a property table.
public struct PropertySpec: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case bool
        case int(ClosedRange<Int>)
        case double(ClosedRange<Double>)
        case string
        /// A string restricted to these values (checked when the stage starts).
        case choice([String])
    }
    public var name: String
    public var help: String
    public var kind: Kind
    public var defaultValue: PropertyValue
    /// Can change while the pipeline plays (delivered to `Stage.settingsChanged`).
    public var live: Bool
    /// A reading, not a setting: the stage publishes its value while it runs (`Stage.readings`);
    /// `get` on the control channel and g_object_get read it, nothing sets it (lenszone's counts).
    public var readOnly: Bool
    /// A request, not a setting: setting it makes the stage do something once, and it reads
    /// back as its default (lensrecord's `record`). Never kept as a setting (serve's state).
    public var isRequest = false

    public init(_ name: String, _ kind: Kind, default defaultValue: PropertyValue, live: Bool = false, help: String) {
        self.name = name
        self.kind = kind
        self.defaultValue = defaultValue
        self.live = live
        self.readOnly = false
        self.help = help
    }

    /// A string reading the stage publishes (see `readOnly`).
    public static func reading(_ name: String, help: String) -> PropertySpec {
        var spec = PropertySpec(name, .string, default: .string(""), help: help)
        spec.readOnly = true
        return spec
    }

    /// Checks a value against the row: type, range, allowed choices.
    public func validate(_ value: PropertyValue) throws {
        switch (kind, value) {
        case (.bool, .bool), (.string, .string): return
        case (.int(let range), .int(let v)):
            guard range.contains(v) else { throw StageError("property \(name)=\(v) is out of range \(range.lowerBound)…\(range.upperBound)") }
        case (.double(let range), .double(let v)):
            guard range.contains(v) else { throw StageError("property \(name)=\(v) is out of range \(range.lowerBound)…\(range.upperBound)") }
        case (.choice(let allowed), .string(let v)):
            guard allowed.contains(v) else { throw StageError("property \(name)=\(v) is not one of \(allowed.joined(separator: ", "))") }
        default:
            throw StageError("property \(name) has the wrong type")
        }
    }

    /// A value written as text (a control command, a key binding), checked against the row.
    public func parse(_ text: String) throws -> PropertyValue {
        let value: PropertyValue
        switch kind {
        case .bool:
            switch text.lowercased() {
            case "true", "yes", "1", "on": value = .bool(true)
            case "false", "no", "0", "off": value = .bool(false)
            default: throw StageError("property \(name)=\(text) is not true or false")
            }
        case .int:
            guard let v = Int(text) else { throw StageError("property \(name)=\(text) is not a whole number") }
            value = .int(v)
        case .double:
            guard let v = Double(text), v.isFinite else { throw StageError("property \(name)=\(text) is not a number") }
            value = .double(v)
        case .string, .choice:
            value = .string(text)
        }
        try validate(value)
        return value
    }

    /// `range`/`choices` for help text.
    public var constraint: String {
        switch kind {
        case .bool: return "true|false"
        case .int(let r): return "int \(r.lowerBound)…\(r.upperBound)"
        case .double(let r): return "double \(r.lowerBound)…\(r.upperBound)"
        case .string: return "string"
        case .choice(let c): return c.joined(separator: "|")
        }
    }
}

public enum PropertyValue: Sendable, Equatable, CustomStringConvertible {
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)

    public var description: String {
        switch self {
        case .bool(let v): return v ? "true" : "false"
        case .int(let v): return String(v)
        case .double(let v): return String(v)
        case .string(let v): return v.isEmpty ? "\"\"" : v
        }
    }
}

/// A stage's property values by name, as the host carries them between GStreamer and the stage
/// (the element's properties, a control command, a test's overrides): every row of the table,
/// its default where no value was given. A stage never reads them by name: it gets its typed
/// `StageSettings`, which its table's rows fill from these.
public struct PropertyValues: Sendable, Equatable {
    public private(set) var values: [String: PropertyValue]

    public init(descriptor: StageDescriptor, values: [String: PropertyValue] = [:]) {
        self.init(table: descriptor.properties, values: values)
    }

    public init(table: [PropertySpec], values: [String: PropertyValue] = [:]) {
        var all: [String: PropertyValue] = [:]
        for p in table { all[p.name] = values[p.name] ?? p.defaultValue }
        self.values = all
    }

    public subscript(name: String) -> PropertyValue? { values[name] }

    /// The same values with some replaced.
    public func merging(_ changes: [String: PropertyValue]) -> PropertyValues {
        var copy = self
        copy.values.merge(changes) { $1 }
        return copy
    }

    /// Validates every value against its row; the first failure is thrown.
    public func validate(against descriptor: StageDescriptor) throws {
        for p in descriptor.properties { if let v = values[p.name] { try p.validate(v) } }
    }
}

/// Properties every stage has: how the bridge between the pipeline and the worker behaves.
public struct BridgeSettings: StageSettings {
    public enum Mode: String, Sendable, CaseIterable {
        /// Lossless when the source is not live (files), live otherwise.
        case auto
        /// Every frame processed, back-pressure upstream, nothing dropped.
        case lossless
        /// Newest frame wins: a frame waiting when a newer one arrives is dropped and counted.
        case live
    }

    /// Where the stage runs, if not where it says (`StageDescriptor.placement`).
    public enum Thread: String, Sendable, CaseIterable {
        case auto
        case inLine = "in-line"
        case own
    }

    public var mode = Mode.auto
    public var thread = Thread.auto
    public init() {}

    public static let properties: [Property<BridgeSettings>] = [
        .choice("mode", \.mode,
                help: "lossless: every frame, back-pressure (files); live: newest frame wins, drops counted (on a thread of its own); auto: live if the source is"),
        .choice("thread", \.thread,
                help: "auto: where the stage runs by what it is (its page says); in-line: on upstream's streaming thread; own: on a thread of its own behind a queue"),
    ]

    /// Where a stage with these bridge settings runs: what it declares, or the `thread`
    /// property; `mode=live` needs a queue to drop from, so a thread of its own.
    public func placement(of descriptor: StageDescriptor) -> StagePlacement {
        if mode == .live { return .ownThread }
        switch thread {
        case .auto: return descriptor.placement
        case .inLine: return .inLine
        case .own: return .ownThread
        }
    }
}
