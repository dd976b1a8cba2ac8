import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// Interrupts (SIGINT, SIGTERM, SIGHUP) seen since the handler was installed. The first is the
/// bus loop's to act on (end-of-stream, so outputs are finalized); the second ends the process
/// in the handler itself, whatever the rest of the program is waiting for.
private let interrupts = Atomic<Int>(0)

/// What the handler writes before it ends the process on a second interrupt.
private let abortMessage: StaticString = "aborted\n"

/// The handler: async-signal-safe (an atomic add, write(2), _exit(2)).
private func interruptHandler(_ signal: Int32) {
    if interrupts.add(1, ordering: .relaxed).newValue >= 2 {
        _ = write(2, abortMessage.utf8Start, abortMessage.utf8CodeUnitCount)
        _exit(130)
    }
}

/// A parsed pipeline that can be run to the end: the host's equivalent of `gst-launch-1.0 -e`.
public final class Pipeline {
    public struct Options: Sendable {
        /// No progress, no per-stage summaries (errors are still printed).
        public var quiet = false
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

    let pipeline: UnsafeMutablePointer<GstElement>
    /// The pipeline text that was parsed.
    public let description: String
    /// What the stages reported during the last run: (kind, text), kind "caps", "stats" (at end of
    /// stream), "interval" (the same every 5 s while running) or "notice".
    public private(set) var stageReports: [(kind: String, text: String)] = []
    /// Where messages go (stderr by default).
    public var log: (String) -> Void = { writeStderr($0 + "\n") }
    /// The filesinks of the run in progress, writing under temporary names until data arrives.
    private(set) var outputFiles: OutputFiles?

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
        self.pipeline = pipeline
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
        gst_element_set_state(pipeline, GST_STATE_NULL)
        gst_object_unref(pipeline)
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
        if let mode = options.mode {
            for stage in stages { _ = sl_object_set_from_string(stage, "mode", mode.rawValue) }
        }
        StageElements.ending.store(false, ordering: .relaxed)
        // What each stage is offered, accepted or not: named when negotiation fails.
        for stage in stages { sl_stage_watch_offered_caps(stage) }
        // The source part of each watchdog stage is started by the watchdog itself, once the rest
        // plays (a camera that is not there yet is then an outage, not a failed start).
        let watchdogs = stages.filter { StageElements.descriptor(of: $0)?.restartsUpstream == true }
        for stage in watchdogs { sl_stage_lock_upstream(stage, 1) }
        defer { for stage in watchdogs { sl_stage_lock_upstream(stage, 0) } }
        if options.handleSignals { installSignalHandlers() }
        let bus = gst_element_get_bus(pipeline)!
        defer { gst_object_unref(bus) }
        let firstStage = stages.first
        let stageCount = stages.count
        let progress = Progress(interval: options.progressInterval)
        var control: ControlChannel?
        if let source = options.control {
            let channel = ControlChannel(pipeline: pipeline, echo: !options.quiet, access: options.controlAccess)
            do {
                try channel.start(source)
            } catch {
                log("error: \(error)")
                return .failed("\(error)")
            }
            control = channel
        }
        defer { control?.stop() }

        // An MP4 cut off before its index is refused before it plays. qtdemux would say so too,
        // but decodebin drops the errors of an element it is still setting up, and then the run
        // waits for the start timeout (1 run in ~30 here, GStreamer 1.22).
        for element in allElements() where sl_element_factory_name(element).map({ String(cString: $0) }) == "filesrc" {
            guard let file = takeString(sl_object_get_as_string(element, "location")), Self.isMP4WithoutIndex(file) else { continue }
            let message = "\(objectName(element)): " + Self.noIndexMessage(file)
            log("error: \(message)")
            return .failed(message)
        }

        // A window sink without a display fails at its first state change with a message that
        // does not say what to do (and autovideosink may crash trying DirectFB): say it first.
        for element in allElements() {
            guard let factory = sl_element_factory_name(element).map({ String(cString: $0) }),
                  let problem = DisplayCheck.problem(factory: factory) else { continue }
            let message = "\(objectName(element)): \(problem)"
            log("error: \(message)")
            return .failed(message)
        }
        let keys = PreviewKeys(pipeline: pipeline, control: control ?? ControlChannel(pipeline: pipeline, echo: false), log: { [quiet = options.quiet, log] line in
            if !quiet { log(line) }
        })
        var windowClosed: Date?

        // Existing files are replaced only once data reaches them (OutputFiles).
        let outputs = OutputFiles(elements: allElements(), pipeline: pipeline)
        outputFiles = outputs
        defer {
            for problem in outputs.finish() { log("warning: \(problem)") }
            outputFiles = nil
        }
        if gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE {
            let message = drainError(bus) ?? "the pipeline could not start (state change failed)"
            stop()
            return .failed(message)
        }
        let started = Date()
        var playing = false
        var interruptsHandled = 0
        var interruptedAt: Date?
        var firstError: String?
        var outcome: Outcome?

        while outcome == nil {
            let seen = interrupts.load(ordering: .relaxed)
            if seen > interruptsHandled {
                interruptsHandled = seen
                if interruptedAt == nil {
                    interruptedAt = Date()
                    keys.resume()
                    StageElements.ending.store(true, ordering: .relaxed)
                    progress.clear()
                    log("interrupt: sending end-of-stream to finish the output (Ctrl-C again to abort)")
                    endStream()
                }
            }
            // End-of-stream that does not come (a source that holds it, a stage stuck in its
            // work) must not keep the run up: stop without it.
            if let interruptedAt, Date().timeIntervalSince(interruptedAt) > options.endOfStreamTimeout {
                progress.clear()
                log("error: end of stream did not come within \(Int(options.endOfStreamTimeout)) s of the interrupt; stopping without it (outputs may be incomplete)")
                outcome = .aborted
                break
            }
            // With a watchdog, a source that does not come is its business (retries, then an error).
            if !playing, watchdogs.isEmpty, Date().timeIntervalSince(started) > options.startTimeout {
                var state = GST_STATE_NULL, pending = GST_STATE_NULL
                gst_element_get_state(pipeline, &state, &pending, 0)
                let name = gst_element_state_get_name(state).map { String(cString: $0) } ?? "?"
                var message = "the pipeline did not reach PLAYING within \(Int(options.startTimeout)) s (stuck in \(name))"
                let waiting = allElements().filter { sl_is_stage($0) == 0 && sl_element_has_unlinked_sink_pad($0) != 0 }.map { objectName($0) }
                // A decodebin that never showed a stream failed on the input (an error it took
                // while setting up an element can be lost); otherwise a named pad never came.
                let silent = allElements().filter { e in
                    let factory = sl_element_factory_name(e).map { String(cString: $0) } ?? ""
                    return factory.hasSuffix("decodebin") && e.pointee.numsrcpads == 0
                }.map { objectName($0) }
                if let decodebin = silent.first {
                    message += "; \(decodebin) found no stream in the input: is it a damaged or unfinished file?"
                } else if !waiting.isEmpty {
                    message += "; nothing ever linked to \(waiting.joined(separator: ", ")): a demuxer pad named in the spec (e.g. demux.audio_0) never appeared — does the input have that stream?"
                }
                log("error: \(message)")
                outcome = .failed(message)
                break
            }
            if !options.quiet, playing, !keys.paused { progress.update(pipeline: pipeline, stage: firstStage, log: log) }
            // The window closed: the end of stream sent then normally arrives within a frame.
            if let closed = windowClosed, Date().timeIntervalSince(closed) > 5 {
                outcome = .finished(interrupted: true)
                break
            }

            guard let message = gst_bus_timed_pop(bus, GstClockTime(100_000_000)) else { continue }
            defer { gst_message_unref(message) }
            switch sl_message_type(message) {
            case GST_MESSAGE_EOS:
                outcome = .finished(interrupted: interruptsHandled > 0 || windowClosed != nil)
                if !options.quiet { for line in windowSinkSummaries() { log(line) } }
                drainStageReports(bus, expected: stageCount, options: options)
                if interruptsHandled == 0, windowClosed == nil, watchdogs.isEmpty, let lost = lostFrames() {
                    progress.clear()
                    log("\(lost.fatal ? "error" : "warning"): \(lost.text)")
                    if lost.fatal { outcome = .failed(lost.text) }
                }
                // Lossless means every frame: one a stage had to drop for an error fails the run.
                if case .finished? = outcome, let lost = framesDroppedForErrors() {
                    progress.clear()
                    log("error: \(lost)")
                    outcome = .failed(lost)
                }
            case GST_MESSAGE_ERROR:
                // The user closed the window: the end of the run, not a failure. End the stream
                // (files written beside the window are finalized) and take the errors that follow
                // (the source's "Internal data stream error") as part of it.
                if firstError == nil, windowClosed == nil, sl_error_is_window_closed(message) != 0 {
                    progress.clear()
                    if !options.quiet { log("\(sourceName(message)): window closed: ending the run") }
                    windowClosed = Date()
                    StageElements.ending.store(true, ordering: .relaxed)
                    endStream()
                    continue
                }
                if windowClosed != nil {
                    if options.verbose { log("after the window closed: \(errorText(message))") }
                    continue
                }
                let text = errorText(message)
                // An error in the source part of a watchdog stage is an outage, not the end.
                if let watchdog = stages.first(where: { stage in
                    StageElements.worker(of: stage)?.watchdog != nil && sl_stage_is_upstream(stage, message.pointee.src) != 0
                }), let worker = StageElements.worker(of: watchdog) {
                    // A bin's "state change failed" follows its element's real error: say only that one.
                    if !text.contains("failed to post a proper error message") {
                        progress.clear()
                        log("warning: \(text.split(separator: "\n").first ?? "")")
                        worker.sourceFailed(String(text.split(separator: "\n").first ?? ""))
                    }
                    continue
                }
                if firstError == nil {
                    progress.clear()
                    log("error: \(text)")
                    firstError = text
                    outcome = .failed(text)
                    if options.finalizeOnError { finalizeAfterError(bus, source: message.pointee.src, options: options) }
                } else if options.verbose {
                    log("error (after the first): \(text)")
                }
            case GST_MESSAGE_WARNING:
                var error: UnsafeMutablePointer<GError>?
                var debug: UnsafeMutablePointer<gchar>?
                gst_message_parse_warning(message, &error, &debug)
                let text = error.flatMap { $0.pointee.message }.map { String(cString: $0) } ?? "?"
                let debugText = takeString(debug)
                if let error { g_error_free(error) }
                progress.clear()
                // gst_parse could not link a dynamic pad (decodebin found no stream the next
                // element takes): that element never gets data, so the run could only hang or
                // fail later with a vaguer error. Fail now, saying what met. (Behind a watchdog
                // the source part is the watchdog's to restart.)
                if firstError == nil, let debugText, debugText.contains("failed delayed linking"),
                   !stages.contains(where: { StageElements.worker(of: $0)?.watchdog != nil && sl_stage_is_upstream($0, message.pointee.src) != 0 }),
                   let explained = NegotiationDiagnosis.delayedLink(in: pipeline, debug: debugText) {
                    let failure = "\(sourceName(message)): \(explained)\n  debug: \(debugText)"
                    log("error: \(failure)")
                    firstError = failure
                    outcome = .failed(failure)
                    continue
                }
                let warning = "warning: \(sourceName(message)): \(text)" + (debugText.map { "\n  debug: \($0)" } ?? "")
                log(outputFiles?.userNames(in: warning) ?? warning)
            case GST_MESSAGE_STATE_CHANGED:
                if messageIsFrom(message, pipeline) {
                    var old = GST_STATE_NULL, new = GST_STATE_NULL, pending = GST_STATE_NULL
                    gst_message_parse_state_changed(message, &old, &new, &pending)
                    if new == GST_STATE_PLAYING { playing = true }
                }
            case GST_MESSAGE_LATENCY:
                _ = gst_bin_recalculate_latency(UnsafeMutableRawPointer(pipeline).assumingMemoryBound(to: GstBin.self))
            case GST_MESSAGE_ELEMENT:
                if let key = takeString(sl_navigation_key_press(message)) {
                    progress.clear()
                    keys.press(key, stages: stages)
                    continue
                }
                progress.clear()
                recordReport(message, options: options)
            default:
                break
            }
        }
        progress.clear()
        stop()
        return outcome!
    }

    /// Keeps a stage's report (caps, stats) and prints it as the options say; other element
    /// messages are ignored.
    func recordReport(_ message: UnsafeMutablePointer<GstMessage>, options: Options) {
        var kind: UnsafePointer<CChar>?, text: UnsafePointer<CChar>?
        guard sl_message_parse_info(message, &kind, &text) != 0, let kind, let text else { return }
        let (k, t) = (String(cString: kind), String(cString: text))
        stageReports.append((k, t))
        if ((k == "caps" || k == "interval") && options.verbose) || ((k == "stats" || k == "notice") && !options.quiet) { log(t) }
    }

    /// Sets the pipeline to NULL and waits for it (workers are joined on the way down).
    func stop() {
        // Locked elements (a watchdog's source part) follow the pipeline down too.
        for stage in stages where StageElements.descriptor(of: stage)?.restartsUpstream == true { sl_stage_lock_upstream(stage, 0) }
        gst_element_set_state(pipeline, GST_STATE_NULL)
        gst_element_get_state(pipeline, nil, nil, GstClockTime.max)
    }

    /// Ctrl-C, kill and a closed terminal (SIGHUP: an ssh session dropping) all end the run like
    /// Ctrl-C; a second one ends the process at once. SIGPIPE is ignored: a reader that went away
    /// (a control client, `… | head`) makes that write fail, not the run.
    private func installSignalHandlers() {
        interrupts.store(0, ordering: .relaxed)
        for s in [SIGINT, SIGTERM, SIGHUP] { signal(s, interruptHandler) }
        signal(SIGPIPE, SIG_IGN)
        // A parent may have spawned us with these blocked (the mask survives exec; Foundation's
        // Process does this): unblock them, or Ctrl-C and kill would never arrive.
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&set, s) }
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    static func noIndexMessage(_ file: String) -> String {
        "\(file) has no index (no moov box): the MP4 was cut short before it was finalized (a recording stopped without end-of-stream), so none of it can be played"
    }

    /// An ISO-BMFF file (an `ftyp` box first) whose top-level boxes hold no `moov`: the index a
    /// muxer writes at the end, missing when a recording was cut off.
    static func isMP4WithoutIndex(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        var offset: UInt64 = 0
        var boxes: [String] = []
        while offset + 8 <= size, boxes.count < 1000 {
            try? handle.seek(toOffset: offset)
            guard let header = try? handle.read(upToCount: 16), header.count >= 8 else { break }
            var length = header.prefix(4).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            boxes.append(String(decoding: header[4..<8], as: UTF8.self))
            if length == 1, header.count >= 16 { length = header[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
            if length == 0 { break } // to the end of the file
            guard length >= 8 else { break }
            offset += length
        }
        return boxes.first == "ftyp" && !boxes.contains("moov")
    }

    /// Sends end-of-stream to the pipeline from its own thread: a source busy reconnecting
    /// (rtspsrc behind a watchdog) can hold the event for a long time, and the bus loop must go on.
    private func endStream() {
        gst_object_ref(pipeline)
        let target = ElementReference(pipeline)
        Thread.detachNewThread {
            gst_element_send_event(target.pointer, gst_event_new_eos())
            gst_object_unref(target.pointer)
        }
    }
}

private func messageIsFrom(_ message: UnsafeMutablePointer<GstMessage>, _ element: UnsafeMutablePointer<GstElement>) -> Bool {
    UnsafeMutableRawPointer(message.pointee.src) == UnsafeMutableRawPointer(element)
}

/// A GStreamer object pointer handed to another thread.
/// @unchecked Sendable: GstObjects are thread-safe reference-counted objects; the sender holds a
/// reference for the receiver, which releases it.
struct ElementReference: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<GstElement>
    init(_ pointer: UnsafeMutablePointer<GstElement>) { self.pointer = pointer }
}
