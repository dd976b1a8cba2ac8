import Foundation
import StreamLensCore
import Synchronization

/// The sources a host runs, as the HTTP API sees them: `streamlens serve`'s `SourceSet`, or
/// `streamlens run`'s one pipeline (`RunSource`, named `main`). Both carry out the API's requests
/// through the same calls their control channels use (one command layer).
public protocol SourceCatalog: AnyObject, Sendable {
    /// Whether sources can be added and removed (serve), or the pipeline is the one source (run).
    var acceptsNewSources: Bool { get }
    func statuses() -> [SourceSet.Status]
    /// Starts a source; nil once it plays, or why not.
    func add(name: String, uri: String) -> SourceRefusal?
    /// Ends a source (its outputs finalized) and forgets it; nil once done, or why not.
    func remove(name: String) -> SourceRefusal?
    func commands(of name: String) -> PipelineCommands?
    /// Why the last change (a source added or removed, a property set) is not kept across a
    /// restart; nil when it is, or nothing keeps changes.
    var changesNotKept: String? { get }
    func stageSummaries(of name: String) -> [StageSummary]
    /// The HTTP API (http://HOST:PORT) of the instance that runs source `name` when that is
    /// another instance of a cluster: requests about the source go there. Nil: it runs here (or
    /// nowhere yet).
    func holder(of name: String) -> String?
}

extension SourceCatalog {
    public var changesNotKept: String? { nil }
    public func holder(of name: String) -> String? { nil }
}

/// A change made to a running serve through its API or control socket, for whatever keeps
/// them across a restart (`SourceKeeper`).
public enum SourceChange: Sendable, Equatable {
    case added(name: String, uri: String)
    case removed(name: String)
    /// Settings of a stage (not requests: `PropertySpec.isRequest`).
    case set(source: String, stage: String, [Assignment])

    public struct Assignment: Sendable, Equatable {
        public var name: String
        public var value: String
    }
}

/// Keeps the changes made to a running serve (serve --config's state file).
public protocol SourceKeeper: Sendable {
    func keep(_ change: SourceChange)
    /// Why the last change could not be kept; nil when it was.
    var problem: String? { get }
}

/// Why a source was not added or removed: what kind of refusal (the HTTP API's status code) and
/// the message the control socket answers too.
public typealias SourceRefusal = KindedError<SourceRefusalReason>

public enum SourceRefusalReason: Sendable, Equatable {
    /// A bad name or URI, or a template that does not parse with it: nothing was built.
    case invalid
    /// The name is taken.
    case taken
    /// No source of that name.
    case unknown
    /// Built, but it did not start (and is not kept).
    case didNotStart
    /// This host does not add or remove sources (run), or is ending.
    case notHere
    /// As many sources as may start at once are starting: try again in a moment.
    case busy
}

extension KindedError where Kind == SourceRefusalReason {
    /// "no source named X (sources: …)".
    public static func unknown(_ name: String, among names: [String]) -> SourceRefusal {
        SourceRefusal(.unknown, "no source named \(name)" + (names.isEmpty ? " (there are none)" : " (sources: \(names.joined(separator: ", ")))"))
    }
}

/// One stage's figures in a source's status.
public struct StageSummary: Codable, Sendable, Equatable {
    public var name: String
    public var frames: Int
    public var fps: Double
    public var drops: Int
    public var restarts: Int

    init(_ f: StageFigures) {
        name = f.stage
        frames = f.framesReceived
        fps = (f.framesPerSecond * 10).rounded() / 10
        drops = f.framesDropped
        restarts = f.restarts
    }
}

/// `streamlens run`'s pipeline as the one source of the HTTP API, named `main`: its state from
/// the run (starting, playing, then ended or failed), its figures from its stages.
public final class RunSource: SourceCatalog, @unchecked Sendable {
    public static let name = "main"
    private let pipeline: Pipeline
    private let commands: PipelineCommands
    private let uri: String
    private let firstStage: String?
    private let added = Date()
    /// `final`: the stages' figures when the run ended (their workers are gone then).
    private struct State { var state = SourceSet.State.starting; var error: String?; var final: [StageFigures]? }
    private let state = Mutex(State())

    /// Watches `pipeline` (its `onPlaying` and `onStopping` are this source's from now on).
    public init(pipeline: Pipeline, access: ControlAccess) {
        self.pipeline = pipeline
        commands = PipelineCommands(pipeline: pipeline, access: access)
        uri = pipeline.description
        firstStage = pipeline.stages.first.map { objectName($0) }
        pipeline.onPlaying = { [weak self] in
            self?.state.withLock { if $0.state == .starting { $0.state = .playing } }
            EventLog.shared.append(source: RunSource.name, type: "source-playing")
        }
        pipeline.onStopping = { [weak self] in
            let final = StageFigures.of(source: nil).map { f -> StageFigures in var f = f; f.framesPerSecond = 0; return f }
            self?.state.withLock { $0.final = final }
        }
    }

    /// The run is over: how it ended.
    public func finished(_ outcome: Pipeline.Outcome) {
        let failed: String? = { if case .failed(let text) = outcome { return text }; if case .aborted = outcome { return "aborted" }; return nil }()
        state.withLock {
            $0.state = failed == nil ? .ended : .failed
            $0.error = failed
        }
        if let failed {
            EventLog.shared.append(source: Self.name, type: "source-failed", fields: ["error": String(failed.split(separator: "\n").first ?? "")])
        } else {
            EventLog.shared.append(source: Self.name, type: "source-ended")
        }
    }

    /// The run is ending on purpose (Ctrl-C).
    public func ending() { state.withLock { if $0.state == .playing || $0.state == .starting { $0.state = .ending } } }

    public var acceptsNewSources: Bool { false }

    public func statuses() -> [SourceSet.Status] {
        let s = state.withLock { $0 }
        let f = SourceSet.Figures(stages: s.final ?? StageFigures.of(source: nil), firstStage: firstStage)
        return [SourceSet.Status(name: Self.name, uri: uri, state: s.state.rawValue, fps: f.fps, frames: f.frames, drops: f.drops,
                                 restarts: f.restarts, seconds: (Date().timeIntervalSince(added) * 10).rounded() / 10, error: s.error, latencyMs: f.latencyMs)]
    }

    public func add(name: String, uri: String) -> SourceRefusal? {
        SourceRefusal(.notHere, "streamlens run has one source, \(Self.name) (its pipeline); streamlens serve --http adds and removes sources")
    }

    public func remove(name: String) -> SourceRefusal? {
        SourceRefusal(.notHere, "streamlens run has one source, \(Self.name) (its pipeline): Ctrl-C or SIGTERM ends it; streamlens serve --http adds and removes sources")
    }

    public func commands(of name: String) -> PipelineCommands? { name == Self.name ? commands : nil }

    public func stageSummaries(of name: String) -> [StageSummary] {
        guard name == Self.name else { return [] }
        return (state.withLock { $0.final } ?? StageFigures.of(source: nil)).map(StageSummary.init)
    }
}
