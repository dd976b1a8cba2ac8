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
    func add(name: String, uri: String) -> String?
    /// Ends a source (its outputs finalized) and forgets it; nil once done, or why not.
    func remove(name: String) -> String?
    func commands(of name: String) -> PipelineCommands?
    func stageSummaries(of name: String) -> [StageSummary]
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
    private let added = Date()
    private struct State { var state = SourceSet.State.starting; var error: String?; var final: [StageSummary]? }
    private let state = Mutex(State())

    /// Watches `pipeline` (its `onPlaying` and `onStopping` are this source's from now on).
    public init(pipeline: Pipeline, access: ControlAccess) {
        self.pipeline = pipeline
        commands = PipelineCommands(pipeline: pipeline, access: access)
        uri = pipeline.description
        pipeline.onPlaying = { [weak self] in
            self?.state.withLock { if $0.state == .starting { $0.state = .playing } }
            EventLog.shared.append(source: RunSource.name, type: "source-playing")
        }
        pipeline.onStopping = { [weak self] in
            let final = StageFigures.of(source: nil).map(StageSummary.init).map { s -> StageSummary in var s = s; s.fps = 0; return s }
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
        let stages = s.final ?? stageSummaries(of: Self.name)
        let first = stages.first
        return [SourceSet.Status(name: Self.name, uri: uri, state: s.state.rawValue, fps: first?.fps ?? 0, frames: first?.frames ?? 0,
                                 drops: stages.reduce(0) { $0 + $1.drops }, restarts: stages.reduce(0) { $0 + $1.restarts },
                                 seconds: (Date().timeIntervalSince(added) * 10).rounded() / 10, error: s.error)]
    }

    public func add(name: String, uri: String) -> String? {
        "streamlens run has one source, \(Self.name) (its pipeline); streamlens serve --http adds and removes sources"
    }

    public func remove(name: String) -> String? {
        "streamlens run has one source, \(Self.name) (its pipeline): Ctrl-C or SIGTERM ends it; streamlens serve --http adds and removes sources"
    }

    public func commands(of name: String) -> PipelineCommands? { name == Self.name ? commands : nil }

    public func stageSummaries(of name: String) -> [StageSummary] {
        guard name == Self.name else { return [] }
        if let final = state.withLock({ $0.final }) { return final }
        return StageFigures.of(source: nil).map(StageSummary.init)
    }
}
