import Foundation

/// Where lensmetadata sends each frame's record: a file, standard output, an MQTT broker…
/// A sink is chosen by the scheme of lensmetadata's `location` (a registry of sinks lists them;
/// a path without a scheme is a file).
///
/// What a sink promises:
/// - `init` checks the location and its own properties at start, and opens what can be opened
///   without waiting on a peer: a bad URL or an unwritable folder is a StageError, and the run
///   does not start;
/// - `take` never waits: records go through the sink's own bounded queue (`OutputQueue`) and
///   thread, so a destination that is slow or away costs records — dropped and counted, one
///   warning — never frames;
/// - `finish` drains what waits, within the end's deadline, and says what was lost;
/// - `summary` and `metrics` give its figures.
///
/// All calls come from the stage's worker thread, one at a time.
public protocol RecordSink: AnyObject, SendableMetatype {
    /// Its own properties (their help says which sink), which join lensmetadata's table.
    associatedtype Settings: StageSettings
    /// The URL schemes it takes (`mqtt`, `mqtts`), lower case. The sink that takes `file` also
    /// takes paths without a scheme.
    static var schemes: [String] { get }
    /// How its location is written and what it does: one clause of lensmetadata's `location` help.
    static var usage: String { get }
    init(location: String, settings: Settings) throws

    /// One frame's record: the JSON line exactly as the file sink writes it, newline included.
    /// Returns what to tell the user now (the first drop, a failure).
    func take(_ record: Data) -> [StageNotice]

    /// End of stream: sends what waits, giving up after `quiet` seconds without progress or
    /// `atMost` seconds in all; what to tell the user (what was lost). Called once.
    func finish(quiet: Double, atMost: Double) -> [StageNotice]

    /// What became of the records, for the end-of-stream summary; nil when nothing is worth saying.
    var summary: String? { get }
    var metrics: [Metric] { get }
}

extension RecordSink {
    public var metrics: [Metric] { [] }

    /// Its properties' rows.
    public static var properties: [PropertySpec] { Settings.table }

    /// The sink opened with the values by name its stage was given (its rows pick theirs).
    public static func open(location: String, values: PropertyValues) throws -> any RecordSink {
        try Self(location: location, settings: Settings(values))
    }
}
