import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// `streamlens serve`: many sources in one process, each a pipeline of its own made from one
/// template (`${NAME}`, `${URI}`), added and removed while the others run.
///
/// Why one pipeline per source (and not one pipeline with a branch per source, as DeepStream's
/// nvstreammux does): a GstPipeline is GStreamer's unit of failure and of state — an error, an
/// end of stream or a stuck state change stops the pipeline it happens in — so a camera that
/// fails, stalls or is removed cannot stop, pause or restart another. What sources have in
/// common lives in the process, not in the pipeline: the inference engine (one OpenVINO core;
/// model stages with the same model, device, precision and frame size share one compiled
/// model), the thread budget and the metrics registry.
///
/// Each source's pipeline runs on a thread of its own through `Pipeline.run` (the same bus loop,
/// output finalizing and summaries as `streamlens run`), its lines prefixed with `[NAME]`.
/// Interrupts are the host's: with the handlers installed (`Pipeline.installInterruptHandlers`)
/// every run sees the first one and ends as `streamlens run` does.
///
/// @unchecked Sendable: `sources` and every `Source`'s state are behind `lock`; a Source's
/// pipeline is used by its own thread (`run`), and from others only through its thread-safe
/// entry points (`requestEnd`, `PipelineCommands`).
public final class SourceSet: SourceCatalog, @unchecked Sendable {
    public enum State: String, Sendable { case starting, playing, ending, ended, failed }

    /// What `sources` answers for each source (JSON).
    public struct Status: Codable, Sendable, Equatable {
        public var name: String
        public var uri: String
        public var state: String
        /// Frames per second reaching the first stage, over the last 5 s.
        public var fps: Double
        /// Frames that reached the first stage.
        public var frames: Int
        /// Frames dropped by any stage (queue, error or on purpose).
        public var drops: Int
        /// Source restarts by watchdog stages.
        public var restarts: Int
        /// Seconds since the source was added.
        public var seconds: Double
        public var error: String?
        /// The median age of the frames leaving the pipeline's slowest stage, ms: how far behind
        /// its source the pipeline shows (live sources; nil before a frame).
        public var latencyMs: Double?
        /// In a cluster, the instance that runs it (nil: not claimed, or no cluster).
        public var instance: String?

        public init(name: String, uri: String, state: String, fps: Double, frames: Int, drops: Int, restarts: Int, seconds: Double,
                    error: String?, latencyMs: Double?, instance: String? = nil) {
            (self.name, self.uri, self.state, self.fps, self.frames, self.drops) = (name, uri, state, fps, frames, drops)
            (self.restarts, self.seconds, self.error, self.latencyMs, self.instance) = (restarts, seconds, error, latencyMs, instance)
        }

        enum CodingKeys: String, CodingKey {
            case name, uri, state, fps, frames, drops, restarts, seconds, error, instance
            case latencyMs = "latency_ms"
        }
    }

    final class Source: @unchecked Sendable {
        let name: String
        let uri: String
        let pipeline: Pipeline
        let commands: PipelineCommands
        let added = Date()
        var state = State.starting
        var error: String?
        /// Stage element names, first stage first (for its figures, `StageFigures`).
        let stageNames: [String]
        /// The figures when the run ended, rate 0 (the stages' metrics go with them).
        var finalFigures: Figures?
        let finished = DispatchSemaphore(value: 0)
        init(name: String, uri: String, pipeline: Pipeline, access: ControlAccess, keeper: (any SourceKeeper)?) {
            self.name = name
            self.uri = uri
            self.pipeline = pipeline
            var onSet: (@Sendable (String, [SourceChange.Assignment]) -> Void)?
            if let keeper { onSet = { stage, settings in keeper.keep(.set(source: name, stage: stage, settings)) } }
            commands = PipelineCommands(pipeline: pipeline.pipeline, access: access, onSet: onSet)
            stageNames = pipeline.stages.map { objectName($0) }
            sl_pipeline_set_source_name(pipeline.pipeline, name)
            pipeline.eventSource = name
        }
    }

    /// A source's figures in `sources`.
    struct Figures {
        var fps = 0.0, frames = 0, drops = 0, restarts = 0
        var latencyMs: Double?

        /// From its stages' (`StageFigures`, published with their metrics): the first stage's
        /// rate and frames, every stage's drops and restarts.
        init(stages: [StageFigures], firstStage: String?) {
            let first = stages.first { $0.stage == firstStage }
            fps = ((first?.framesPerSecond ?? 0) * 10).rounded() / 10
            frames = first?.framesReceived ?? 0
            drops = stages.reduce(0) { $0 + $1.framesDropped }
            restarts = stages.reduce(0) { $0 + $1.restarts }
            latencyMs = stages.compactMap(\.latencyMs).max()
        }
    }

    /// A source's figures from its stages' (by source: every source's pipeline has the same
    /// stage names).
    static func figures(of source: Source) -> Figures {
        Figures(stages: StageFigures.of(source: source.name), firstStage: source.stageNames.first)
    }

    /// The pipeline text for one source.
    private let expand: @Sendable (_ name: String, _ uri: String) throws -> String
    private let options: Pipeline.Options
    /// Told of each change made through the API or the control socket (serve --config's state).
    private let keeper: (any SourceKeeper)?
    let log: @Sendable (String) -> Void
    private let lock = NSLock()
    /// In the order they were added; a source stays listed until removed (an ended or failed one
    /// too, so that its state and error can be read).
    private var sources: [Source] = []
    private var closed = false
    /// Names whose pipelines are being built (outside the lock), not yet listed.
    private var reserved: Set<String> = []
    /// Sources being built or starting now (`maxStarting` at most).
    private var starting = 0

    /// Sources that may start at once. A start holds a thread and its pipeline's own (decoders,
    /// sockets) until it plays or the start timeout passes; a flood of starts that never finish
    /// (60 POSTs of silent UDP sources) held the API for a minute and grew 160 threads. Beyond
    /// it a start is refused at once (`busy`: the HTTP API answers 503 with Retry-After).
    public static let maxStarting = 4

    /// `options` are each source's run options (signals, control and progress are the host's
    /// and are turned off here).
    public init(options: Pipeline.Options, log: (@Sendable (String) -> Void)? = nil, keeper: (any SourceKeeper)? = nil,
                expand: @escaping @Sendable (_ name: String, _ uri: String) throws -> String) {
        self.keeper = keeper
        var options = options
        options.handleSignals = false
        options.control = nil
        options.showProgress = false
        self.options = options
        self.log = log ?? { writeStderr($0 + "\n") }
        self.expand = expand
    }

    /// `SourceName.isValid`.
    public static func isValidName(_ name: String) -> Bool { SourceName.isValid(name) }

    /// A URI GStreamer can open (scheme://…) that is one token of the pipeline text it is put
    /// into, as given. gst-launch's parser ends a value at white space, takes a backslash as an
    /// escape (a URI ending in one swallowed the template's next ` !`) and strips quotes at a
    /// value's ends; every other character stays in the value (tested with GStreamer's own
    /// parser). So those are refused, with control characters (they would end a log line), and
    /// '!' and "'" as before; none of them belongs in a URI unencoded (RFC 3986).
    public static func uriProblem(_ uri: String) -> String? {
        if uri.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "the URI holds a control character (a line break, a tab…): percent-encode it (%0A, %09)"
        }
        if uri.contains(where: { $0.isWhitespace || $0 == "\"" || $0 == "'" || $0 == "!" || $0 == "\\" }) {
            return "URI '\(uri)' holds a space, a quote, a backslash or '!' (percent-encode them: %20, %22, %27, %5C, %21)"
        }
        guard gst_uri_is_valid(uri) != 0 else {
            return "'\(uri)' is not a URI (expected scheme://…, e.g. file:///videos/door.mp4 or rtsp://camera.local/stream)"
        }
        return nil
    }

    /// Builds and starts a source; returns once it plays (nil) or failed to start (the error,
    /// and the source is not kept, unless its pipeline was left behind stuck opening its input:
    /// listed as failed until removed). Refused at once: a bad or taken name, a bad URI, a
    /// template that does not parse with this URI.
    public func add(name: String, uri: String) -> SourceRefusal? {
        let refusal = add(name: name, uri: uri, stages: [])
        if refusal == nil { keeper?.keep(.added(name: name, uri: uri)) }
        return refusal
    }

    /// `add`, with properties of its stages set before it starts (`stages`: element, property,
    /// value), and not told to the keeper: the sources serve starts with.
    public func add(name: String, uri: String, stages: [(element: String, property: String, value: String)]) -> SourceRefusal? {
        guard Self.isValidName(name) else { return SourceRefusal(.invalid, "source name '\(name)' must be 1–64 letters, digits, '-' or '_'") }
        if let problem = Self.uriProblem(uri) { return SourceRefusal(.invalid, problem) }
        // The name reserved and a start slot taken under the lock (a second `add` of the same
        // name is refused); the pipeline built and started outside it, so that reading the
        // sources never waits for a parse or a start.
        let reservation: SourceRefusal? = withLock {
            if closed { return SourceRefusal(.notHere, "the server is ending: no source can be added") }
            if sources.contains(where: { $0.name == name }) || reserved.contains(name) {
                return SourceRefusal(.taken, "a source named \(name) exists already (remove it first, or choose another name)")
            }
            guard starting < Self.maxStarting else {
                return SourceRefusal(.busy, "\(Self.maxStarting) sources are starting already: try again once one plays or fails (at most the start timeout)")
            }
            starting += 1
            reserved.insert(name)
            return nil
        }
        if let reservation { return reservation }
        defer { withLock { starting -= 1 } }
        let source: Source
        do {
            source = Source(name: name, uri: uri, pipeline: try Pipeline(description: try expand(name, uri)), access: options.controlAccess, keeper: keeper)
            for (element, values) in Dictionary(grouping: stages, by: \.element).sorted(by: { $0.key < $1.key }) {
                try source.commands.configure(element: element, values.map { ($0.property, $0.value) })
            }
        } catch {
            withLock { _ = reserved.remove(name) }
            let message = (error as? HostError)?.message ?? (error as? ControlError)?.message ?? "\(error)"
            return SourceRefusal(.invalid, "\(name): \(message)")
        }
        let listed: Bool = withLock {
            reserved.remove(name)
            guard !closed else { return false }
            sources.append(source)
            return true
        }
        guard listed else { return SourceRefusal(.notHere, "the server is ending: no source can be added") }
        EventLog.shared.append(source: name, type: "source-added", fields: ["uri": uri])
        if start(source) { return nil }
        let error: String? = withLock {
            if source.pipeline.leftBehind == nil { sources.removeAll { $0 === source } }
            return source.error
        }
        return SourceRefusal(.didNotStart, "\(name): \(error ?? "did not start")")
    }

    private func withLock<R>(_ body: () -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    /// Runs the source's pipeline on a thread of its own; true once it plays, false if it ended
    /// or failed first.
    private func start(_ source: Source) -> Bool {
        let playing = DispatchSemaphore(value: 0)
        let name = source.name
        source.pipeline.log = { [log] line in log("[\(name)] \(line)") }
        // Weak: the pipeline holds this closure, and a source that is removed must go (its
        // pipeline with it) even if nothing else does.
        source.pipeline.onPlaying = { [lock, weak source] in
            lock.lock()
            if let source, source.state == .starting { source.state = .playing }
            lock.unlock()
            EventLog.shared.append(source: name, type: "source-playing")
            playing.signal()
        }
        source.pipeline.onStopping = { [lock, weak source] in
            guard let source else { return }
            var figures = Self.figures(of: source)
            figures.fps = 0
            lock.lock()
            source.finalFigures = figures
            lock.unlock()
        }
        let options = options
        Thread.detachNewThread { [lock] in
            let outcome = source.pipeline.run(options)
            source.pipeline.onPlaying = nil
            source.pipeline.onStopping = nil
            lock.lock()
            switch outcome {
            case .finished: source.state = .ended
            case .failed(let text): source.state = .failed; source.error = text
            case .aborted:
                source.state = .failed
                source.error = source.pipeline.leftBehind.map { "ended while starting (\($0) still opening its input)" }
                    ?? source.error ?? "ended without its end of stream"
            }
            let (state, error) = (source.state, source.error)
            lock.unlock()
            if state == .failed {
                EventLog.shared.append(source: name, type: "source-failed", fields: ["error": String(error?.split(separator: "\n").first ?? "")])
            } else {
                EventLog.shared.append(source: name, type: "source-ended")
            }
            playing.signal()
            source.finished.signal()
        }
        playing.wait()
        lock.lock()
        defer { lock.unlock() }
        return source.state == .playing || source.state == .ending
    }


    /// Ends a source (end of stream: its outputs are finalized) and forgets it; returns once it
    /// has ended, or the reason it cannot. A source still starting stops waiting for its start
    /// at once (a pipeline stuck opening its input is left behind).
    public func remove(name: String) -> SourceRefusal? {
        lock.lock()
        guard let source = sources.first(where: { $0.name == name }) else {
            defer { lock.unlock() }
            return SourceRefusal.unknown(name, among: sources.map(\.name))
        }
        if source.state == .starting || source.state == .playing { source.state = .ending }
        lock.unlock()
        source.pipeline.requestEnd()
        source.finished.wait()
        source.finished.signal() // for anyone else waiting (endAll)
        lock.lock()
        sources.removeAll { $0 === source }
        lock.unlock()
        EventLog.shared.append(source: name, type: "source-removed")
        keeper?.keep(.removed(name: name))
        return nil
    }

    public var changesNotKept: String? { keeper?.problem }

    public var acceptsNewSources: Bool { true }

    /// The command layer of one source's pipeline (its stages' properties), nil when there is no
    /// such source.
    public func commands(of name: String) -> PipelineCommands? {
        withLock { sources.first { $0.name == name }?.commands }
    }

    /// Each stage's figures in source `name` (empty once it has ended: its stages are gone).
    public func stageSummaries(of name: String) -> [StageSummary] {
        StageFigures.of(source: name).map(StageSummary.init)
    }

    /// Ends every source and refuses new ones; returns when all have ended. True when none failed.
    @discardableResult
    public func endAll() -> Bool {
        lock.lock()
        closed = true
        let all = sources
        for s in all where s.state == .starting || s.state == .playing { s.state = .ending }
        lock.unlock()
        for s in all { s.pipeline.requestEnd() }
        for s in all {
            s.finished.wait()
            s.finished.signal()
        }
        lock.lock()
        defer { lock.unlock() }
        return !all.contains { $0.state == .failed }
    }

    /// Whether every source has ended (or there are none).
    public var allEnded: Bool {
        lock.lock()
        defer { lock.unlock() }
        return sources.allSatisfy { $0.state == .ended || $0.state == .failed }
    }

    public var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return sources.count
    }

    /// Each source's state and figures (its stages', `StageFigures`).
    public func statuses() -> [Status] {
        lock.lock()
        let listed = sources.map { ($0, $0.state, $0.error, $0.finalFigures) }
        lock.unlock()
        return listed.map { source, state, error, final in
            let f = final ?? Self.figures(of: source)
            return Status(name: source.name, uri: source.uri, state: state.rawValue, fps: f.fps, frames: f.frames, drops: f.drops,
                          restarts: f.restarts, seconds: (Date().timeIntervalSince(source.added) * 10).rounded() / 10, error: error, latencyMs: f.latencyMs)
        }
    }
}

