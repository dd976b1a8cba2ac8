import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// A parsed pipeline that can be run to the end: the host's equivalent of `gst-launch-1.0 -e`.
public final class Pipeline {
    public struct Options: Sendable {
        /// No progress, no per-stage summaries (errors are still printed).
        public var quiet = false
        /// The progress line (frames so far, fps) while running; off where several pipelines
        /// share one terminal (`streamlens serve`).
        public var showProgress = true
        /// Negotiated caps of each stage, every warning, every error.
        public var verbose = false
        /// Overrides every stage's `mode` property.
        public var mode: BridgeSettings.Mode?
        /// How long the pipeline may take to reach PLAYING.
        public var startTimeout: Double = 20
        /// Seconds between progress lines when stderr is not a terminal.
        public var progressInterval: Double = 5
        /// Install SIGINT/SIGTERM/SIGHUP handlers (first: EOS and wait, second: abort) and ignore
        /// SIGPIPE.
        public var handleSignals = true
        /// Seconds end-of-stream may take after the first interrupt before the run stops without it.
        public var endOfStreamTimeout: Double = 15
        /// After an error, end the stream just downstream of the failed element so files written
        /// so far are finalized, before stopping.
        public var finalizeOnError = true
        /// Read control commands (property changes while playing) from stdin or a Unix socket.
        public var control: ControlSource?
        /// Who may use the control socket and what it reaches (stages only, by default).
        public var controlAccess = ControlAccess()
        public init() {}
    }

    /// How a run ended.
    public enum Outcome: Equatable, Sendable {
        /// End of stream reached (also after an interrupt: the output is finalized).
        case finished(interrupted: Bool)
        /// An error (already printed).
        case failed(String)
        /// A second interrupt, or no EOS after the first one.
        case aborted
        public var exitCode: Int32 {
            switch self {
            case .finished: return 0
            case .failed: return 1
            case .aborted: return 130
            }
        }
    }

    private let reference: ObjectReference<GstElement>
    var pipeline: UnsafeMutablePointer<GstElement> { reference.pointer }
    /// The pipeline text that was parsed.
    public let description: String
    /// What the stages reported during the last run: (kind, text), kind "caps", "stats" (at end of
    /// stream), "interval" (the same every 5 s while running) or "notice".
    public private(set) var stageReports: [(kind: String, text: String)] = []
    /// Where messages go (stderr by default).
    public var log: (String) -> Void = { writeStderr($0 + "\n") }
    /// The filesinks of the run in progress, writing under temporary names until data arrives.
    private(set) var outputFiles: OutputFiles?
    /// `requestEnd()` was called.
    let endRequested = Atomic<Bool>(false)
    /// The source this pipeline is in the process's events (`EventLog`): a `streamlens serve`
    /// source's name, `main` under `streamlens run`.
    public var eventSource = "main"
    /// Called on the run's thread when the pipeline first reaches PLAYING.
    public var onPlaying: (() -> Void)?
    /// Called on the run's thread when the run is over, before the pipeline goes down: the
    /// stages still hold their figures (their metrics leave the registry with them).
    public var onStopping: (() -> Void)?
    /// What a state change that never returned was waiting for (its elements, and the file or
    /// URI each opens), when the run stopped waiting for it; nil while the pipeline is ours. A
    /// pipeline left behind is its state change's thread's (Pipeline+StateChange), not touched here again.
    public internal(set) var leftBehind: String?

    /// Parses a gst-launch description; throws a spec error naming the problem.
    public init(description: String) throws {
        var error: UnsafeMutablePointer<GError>?
        // Parsed keeping what was built when a link fails: the two elements' pads tell what each
        // side carries (a second parse would name them videotestsrc1 and not videotestsrc0).
        let parsed = sl_pipeline_parse_keeping_elements(description, &error)
        if let error {
            defer {
                g_error_free(error)
                if let parsed { gst_object_unref(parsed) }
            }
            if error.pointee.domain == gst_parse_error_quark(), error.pointee.code == Int32(GST_PARSE_ERROR_LINK.rawValue), let parsed,
               let raw = error.pointee.message.map({ String(cString: $0) }),
               let explained = NegotiationDiagnosis.link(in: parsed, parseMessage: raw) {
                throw HostError(.spec, explained)
            }
            var message = parseErrorMessage(error)
            if error.pointee.domain == gst_parse_error_quark(), error.pointee.code == Int32(GST_PARSE_ERROR_SYNTAX.rawValue),
               let hint = Self.syntaxHint(description) {
                message += " (\(hint))"
            }
            throw HostError(.spec, message)
        }
        guard let pipeline = parsed else { throw HostError(.spec, "cannot parse pipeline") }
        reference = ObjectReference(adopting: pipeline)
        self.description = description
        if let stage = stages.first(where: { sl_stage_internals_intact($0) == 0 }) {
            throw HostError(.spec, "\(objectName(stage)): its inner stage_sink/stage_src are part of the bridge and cannot be set from the spec")
        }
    }

    /// Where a spec GStreamer calls a "syntax error" goes wrong, for the usual slips; nil when
    /// none is seen. Positions count characters from 1.
    static func syntaxHint(_ spec: String) -> String? {
        let chars = Array(spec)
        if chars.filter({ $0 == "\"" }).count % 2 == 1 { return "a double quote is not closed" }
        let bangs = chars.indices.filter { chars[$0] == "!" }
        guard let first = bangs.first, let last = bangs.last else { return nil }
        if chars[..<first].allSatisfy(\.isWhitespace) { return "the spec starts with '!'" }
        if chars[(last + 1)...].allSatisfy(\.isWhitespace) { return "the spec ends with '!'" }
        for (a, b) in zip(bangs, bangs.dropFirst()) where chars[(a + 1)..<b].allSatisfy(\.isWhitespace) {
            return "no element between the '!' at characters \(a + 1) and \(b + 1)"
        }
        return nil
    }

    deinit {
        if leftBehind == nil { gst_element_set_state(pipeline, GST_STATE_NULL) }
    }

    /// Every element, depth first (bins' children included, stage internals excluded).
    public var elements: [(name: String, factory: String, isStage: Bool)] {
        allElements().map { e in
            let factory = sl_element_factory_name(e).map { String(cString: $0) } ?? "?"
            return (objectName(e), factory, sl_is_stage(e) != 0)
        }
    }

    func allElements() -> [UnsafeMutablePointer<GstElement>] {
        var result: [UnsafeMutablePointer<GstElement>] = []
        func walk(_ bin: UnsafeMutablePointer<GstElement>) {
            let it = gst_bin_iterate_sorted(UnsafeMutableRawPointer(bin).assumingMemoryBound(to: GstBin.self))
            defer { gst_iterator_free(it) }
            var value = GValue()
            var children: [UnsafeMutablePointer<GstElement>] = []
            // The sorted iterator answers RESYNC whenever a link in the bin changes, which a
            // watchdog does while it restarts its source (rtspsrc's pads go and come back).
            // Stopping there gave a partial list, and the bus loop, not finding the watchdog
            // among the stages, took the source's error for the pipeline's: the soak test's
            // relay died on ~1 camera outage in 60 (rtspsrc0: Could not write to resource).
            iterate: while true {
                switch gst_iterator_next(it, &value) {
                case GST_ITERATOR_OK:
                    if let object = g_value_get_object(&value) { children.append(object.assumingMemoryBound(to: GstElement.self)) }
                    g_value_unset(&value)
                case GST_ITERATOR_RESYNC:
                    children.removeAll()
                    gst_iterator_resync(it)
                default:
                    break iterate
                }
            }
            // iterate_sorted lists sinks first; print sources first.
            for child in children.reversed() {
                result.append(child)
                if sl_is_bin(child) != 0 && sl_is_stage(child) == 0 { walk(child) }
            }
        }
        walk(pipeline)
        return result
    }

    var stages: [UnsafeMutablePointer<GstElement>] { allElements().filter { sl_is_stage($0) != 0 } }

    /// Runs to EOS, an error, or an abort. Messages go to stderr as described in README.
    public func run(_ options: Options = Options()) -> Outcome {
        prepareStages(options)
        let watchdogs = lockWatchdogSources()
        defer { for stage in watchdogs { sl_stage_lock_upstream(stage, 0) } }
        if options.handleSignals { installSignalHandlers() }
        let bus = gst_element_get_bus(pipeline)!
        defer { gst_object_unref(bus) }
        let firstStage = stages.first
        let stageCount = stages.count
        let progress = Progress(interval: options.progressInterval)
        let control: ControlChannel?
        do { control = try startControl(options) } catch { return .failed("\(error)") }
        defer { control?.stop() }
        if let refused = refusalBeforeStart() { return refused }
        let keys = previewKeys(control: control, options: options)

        // Existing files are replaced only by a finished output (OutputFiles).
        let outputs: OutputFiles
        do { outputs = try OutputFiles(elements: allElements(), pipeline: pipeline) } catch {
            log("error: \(error)")
            return .failed("\(error)")
        }
        outputFiles = outputs
        var outputsDone = false
        defer {
            if !outputsDone { for note in outputs.finish(finished: false, pipelineStopped: leftBehind == nil).notes { log("warning: \(note)") } }
            outputFiles = nil
        }
        let started = Date()
        if let failed = startPlaying(bus, options, started: started) { return failed }
        var state = RunState(options: options, bus: bus, watchdogs: watchdogs, firstStage: firstStage, stageCount: stageCount,
                             progress: progress, keys: keys, started: started)
        var outcome = busLoop(&state)
        progress.clear()
        onStopping?()
        // Interrupted before any frame came out of a stage (a model still loading): the outputs
        // hold nothing the run made, so none replaces an earlier file and the run is aborted
        // (exit 130), as by a second interrupt.
        let nothingCameThrough = outcome == .finished(interrupted: true) && stagesLetNothingThrough()
        if nothingCameThrough {
            log("interrupt: no frame had come through \(stages.map { objectName($0) }.joined(separator: ", ")) yet; nothing is written")
            outcome = .aborted
        }
        let stopped = stop()
        let (failures, notes) = outputs.finish(finished: outcome != .aborted, discard: nothingCameThrough, pipelineStopped: stopped)
        outputsDone = true
        for note in notes { log("warning: \(note)") }
        for failure in failures { log("error: \(failure)") }
        // An output that is not where the user asked for it is a failed run, however it ended.
        if let failure = failures.first, case .finished = outcome { outcome = .failed(failure) }
        return outcome
    }

    /// Whether the pipeline has stages with an output and none of them let a frame through.
    private func stagesLetNothingThrough() -> Bool {
        let passing = stages.filter { sl_stage_has_output($0) != 0 }
        return !passing.isEmpty && passing.allSatisfy { sl_stage_frames_pushed($0) == 0 }
    }

    /// The stages made ready for a run: the options' mode on each, not ending, offered caps watched.
    private func prepareStages(_ options: Options) {
        if let mode = options.mode {
            for stage in stages { _ = sl_object_set_from_string(stage, "mode", mode.rawValue) }
        }
        sl_pipeline_set_ending(pipeline, 0)
        // What each stage is offered, accepted or not: named when negotiation fails.
        for stage in stages { sl_stage_watch_offered_caps(stage) }
    }

    /// Keeps a stage's report (caps, stats) and prints it as the options say; other element
    /// messages are ignored.
    func recordReport(_ message: UnsafeMutablePointer<GstMessage>, options: Options) {
        // A stage's event (lenszone's crossings): said with -v, as "lenszone0: crossed mid in (face #3 at 1.56 s)".
        if let json = sl_message_parse_event(message) {
            EventLog.shared.append(source: eventSource, stage: sourceName(message), eventJSON: String(cString: json))
            guard options.verbose, let e = FrameRecords.decode(FrameEvent.self, String(cString: json)) else { return }
            var what = e.type + (e.zone.isEmpty ? "" : " \(e.zone)") + (e.direction.map { " \($0)" } ?? "")
            what += " (\(e.label.isEmpty ? "object" : e.label) #\(e.objectId)" + (e.time.map { String(format: " at %.2f s", $0) } ?? "")
            what += (e.dwell.map { String(format: ", %.2f s inside", $0) } ?? "") + ")" + (e.path.map { ": \($0)" } ?? "")
            log("\(sourceName(message)): \(what)")
            return
        }
        var kind: UnsafePointer<CChar>?, text: UnsafePointer<CChar>?
        guard sl_message_parse_info(message, &kind, &text) != 0, let kind, let text else { return }
        let (k, t) = (String(cString: kind), String(cString: text))
        stageReports.append((k, t))
        if ((k == "caps" || k == "interval") && options.verbose) || ((k == "stats" || k == "notice") && !options.quiet) { log(t) }
    }

    /// Sets the pipeline to NULL and waits for it (workers are joined on the way down), at most
    /// `stopDeadline` seconds: past it the pipeline is left behind (said in the log) and false is
    /// returned.
    @discardableResult
    func stop() -> Bool {
        // Locked elements (a watchdog's source part) follow the pipeline down too.
        for stage in stages where StageElements.descriptor(of: stage)?.restartsUpstream == true { sl_stage_lock_upstream(stage, 0) }
        let started = Date()
        guard case .overdue = changeState(to: GST_STATE_NULL, overdue: { Date().timeIntervalSince(started) > Self.stopDeadline }) else { return true }
        log("warning: the pipeline did not stop within \(Int(Self.stopDeadline)) s (still stopping: \(leftBehind ?? "?")); it is left behind")
        return false
    }
}

/// A GStreamer object pointer handed to another thread.
/// @unchecked Sendable: GstObjects are thread-safe reference-counted objects; the sender holds a
/// reference for the receiver, which releases it.
struct ElementReference: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<GstElement>
    init(_ pointer: UnsafeMutablePointer<GstElement>) { self.pointer = pointer }
}
