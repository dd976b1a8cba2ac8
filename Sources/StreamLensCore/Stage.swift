/// A Swift stage: a worker that receives every frame the bridge pulls out of the pipeline and
/// decides what goes back in. Stages run on their own worker thread; all calls into one stage
/// instance come from that thread, one at a time, so a stage needs no locks of its own.
///
/// A stage appears in a pipeline spec like any element, e.g.
/// `streamlens run 'videotestsrc num-buffers=100 ! lenspass ! fakesink'`.
public protocol Stage: AnyObject, SendableMetatype {
    /// The stage's settings: a struct of its properties' values, its rows declared against its
    /// fields (`StageSettings`); `NoSettings` for a stage without properties of its own.
    associatedtype Settings: StageSettings

    /// Name, help, caps and the property table (`Settings.table`): declared once, read by
    /// registration, by `streamlens stages` and by the settings this stage is built from.
    static var descriptor: StageDescriptor { get }

    /// Builds the stage's runtime state from its settings (called when the pipeline starts).
    /// Throw a `StageError` for bad settings: the pipeline stops with its message.
    init(settings: Settings) throws

    /// The negotiated format of the frames that follow (first frame and every caps change).
    func formatChanged(_ format: VideoFormat) throws

    /// One frame. Leave `frame` untouched to pass the same buffer on without a copy.
    func process(_ frame: Frame) -> FrameOutcome

    /// The outcome of the oldest frame this stage answered `.pending` for, once the stage is
    /// done with it; nil when it is not done yet and `wait` is false. The host asks after every
    /// frame, while it waits for the next one, and with `wait` at end of stream; a stage whose
    /// window of frames in flight is full waits for its oldest one whatever `wait` says. Frames
    /// leave in the order they came (a remote model's requests overlap; the frames do not
    /// overtake each other).
    func finishOldest(wait: Bool) -> FrameOutcome?

    /// Properties marked `live` changed while playing; delivered between frames.
    func settingsChanged(_ settings: Settings)

    /// Checks the settings a live change would give the stage (`changing`: the properties it
    /// sets), before any of it is applied, on the caller's thread (the HTTP API's PATCH, the
    /// control socket's `set`, a key): throw a `StageError` for what `settingsChanged` would
    /// refuse — a file that is not there or does not decode, a colour that is not one, a device
    /// this machine lacks. The change is then refused with the message (HTTP 422) and nothing
    /// is set. Work that takes long (compiling a model) stays in `settingsChanged`, which may
    /// still refuse it and restore the values.
    static func checkLiveChange(_ settings: Settings, changing: Set<String>) throws

    /// The latency this stage adds, in nanoseconds (reported to downstream sinks so they wait
    /// for frames instead of dropping them as late).
    var latencyNanoseconds: UInt64 { get }

    /// End of stream, once, after the last frame and before the summary is read: a stage that
    /// sends things elsewhere (a broker) gets a bounded moment to finish sending.
    func streamEnded()

    /// The stage's own figures for the end-of-stream summary (e.g. "inference 1.2 ms median").
    var summary: String? { get }

    /// The current values of the stage's readings (`PropertySpec.reading`), by name; the host
    /// asks after every frame and publishes a value when it changed.
    var readings: [String: String] { get }

    /// What the stage has to tell the user since the last call (a live change applied or
    /// refused); the host asks after every frame and every settings change and prints them.
    func takeNotices() -> [StageNotice]

    /// Events of the stage's own since the last call, for the bus (`streamlens-event`) and the
    /// HTTP API's event stream but not written onto the frame (lenstrack's new tracks,
    /// lenssnapshot's snapshots); the host asks after every frame the stage forwards.
    func takeEvents() -> [FrameEvent]

    /// The stage's own measurements for Prometheus (`streamlens run --metrics`): inference
    /// times, model and device, messages sent… (names and conventions: `Metric`). The host asks
    /// a few times a second on the stage's thread and adds the `stage` label and the frame
    /// figures every stage has (frames in, out, dropped, frame age).
    var metrics: [Metric] { get }
}

/// A message from a running stage that does not stop the pipeline.
public struct StageNotice: Sendable, Equatable {
    public enum Level: Sendable { case info, warning }
    public var level: Level
    public var text: String
    /// Property values the host sets back on the element (a live change the stage refused, so
    /// the element shows what the stage really uses).
    public var restore: [String: PropertyValue]
    public init(_ level: Level, _ text: String, restore: [String: PropertyValue] = [:]) {
        self.level = level; self.text = text; self.restore = restore
    }
}

extension Stage {
    public func formatChanged(_ format: VideoFormat) throws {}
    public func finishOldest(wait: Bool) -> FrameOutcome? { .forward }
    public func settingsChanged(_ settings: Settings) {}
    public static func checkLiveChange(_ settings: Settings, changing: Set<String>) throws {}
    public func streamEnded() {}
    public var latencyNanoseconds: UInt64 { 0 }
    public var summary: String? { nil }
    public var readings: [String: String] { [:] }
    public func takeNotices() -> [StageNotice] { [] }
    public func takeEvents() -> [FrameEvent] { [] }
    public var metrics: [Metric] { [] }
}

/// What became of one frame (the per-frame channel; setup failures are `StageError`s).
public enum FrameOutcome: Equatable, Sendable {
    /// Push the frame on (modified in place or not).
    case forward
    /// Drop this frame on purpose (a filter, a sink stage with nobody to take it): counted in
    /// the statistics.
    case drop(reason: String)
    /// This frame could not be processed (inference failed on it, it is malformed): it is
    /// dropped, the first reason of each kind is said, and a lossless run that lost frames so
    /// ends with an error.
    case failed(reason: String)
    /// The stage is still working on this frame (a request in flight): the host holds it, and
    /// the frames after it, until `finishOldest` gives its outcome.
    case pending
}

/// A setup error: bad settings, a missing model, an unsupported format. The host prints
/// `<stage>: <message>` and exits non-zero.
public struct StageError: Error, CustomStringConvertible, Equatable, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// What the host does with a stage whose type it knows only as `any Stage.Type`: settings by
/// name (the element's properties) turned into the stage's own `Settings` by its rows.
extension Stage {
    public static func make(_ values: PropertyValues) throws -> any Stage { try Self(settings: Settings(values)) }
    public func changeSettings(_ values: PropertyValues) { settingsChanged(Settings(values)) }
    public static func checkLiveChange(_ values: PropertyValues, changing: Set<String>) throws {
        try checkLiveChange(Settings(values), changing: changing)
    }
}
