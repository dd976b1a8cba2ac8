import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

extension Pipeline {
    /// What the bus loop of one run keeps from one message to the next.
    struct RunState {
        let options: Options
        let bus: UnsafeMutablePointer<GstBus>
        /// The watchdog stages: their source parts are theirs to start and restart.
        let watchdogs: [UnsafeMutablePointer<GstElement>]
        /// Progress counts the frames reaching the first stage; the summary waits for every stage's report.
        let firstStage: UnsafeMutablePointer<GstElement>?
        let stageCount: Int
        let progress: Progress
        let keys: PreviewKeys
        /// When the pipeline was set to PLAYING (the start timeout counts from here).
        let started: Date
        var playing = false
        var interruptsHandled = 0
        var interruptedAt: Date?
        var windowClosed: Date?
        var firstError: String?
        var outcome: Outcome?
    }

    /// Until the run has an outcome: acts on an interrupt, ends a run whose end-of-stream or start
    /// is overdue, draws the progress line, and handles the bus's messages one at a time.
    func busLoop(_ run: inout RunState) -> Outcome {
        while run.outcome == nil {
            noticeInterrupt(&run)
            if let overdue = endOfStreamOverdue(run) ?? startOverdue(run) {
                run.outcome = overdue
                break
            }
            if !run.options.quiet, run.options.showProgress, run.playing, !run.keys.paused { run.progress.update(pipeline: pipeline, stage: run.firstStage, log: log) }
            // The window closed: the end of stream sent then normally arrives within a frame.
            if let closed = run.windowClosed, Date().timeIntervalSince(closed) > 5 {
                run.outcome = .finished(interrupted: true)
                break
            }

            guard let message = gst_bus_timed_pop(run.bus, GstClockTime(100_000_000)) else { continue }
            defer { gst_message_unref(message) }
            handle(message, &run)
        }
        return run.outcome!
    }

    private func handle(_ message: UnsafeMutablePointer<GstMessage>, _ run: inout RunState) {
        switch sl_message_type(message) {
        case GST_MESSAGE_EOS:
            run.outcome = endOfStreamOutcome(run)
        case GST_MESSAGE_ERROR:
            handleError(message, &run)
        case GST_MESSAGE_WARNING:
            handleWarning(message, &run)
        case GST_MESSAGE_STATE_CHANGED:
            if messageIsFrom(message, pipeline) {
                var old = GST_STATE_NULL, new = GST_STATE_NULL, pending = GST_STATE_NULL
                gst_message_parse_state_changed(message, &old, &new, &pending)
                if new == GST_STATE_PLAYING, !run.playing {
                    run.playing = true
                    onPlaying?()
                }
            }
        case GST_MESSAGE_LATENCY:
            _ = gst_bin_recalculate_latency(UnsafeMutableRawPointer(pipeline).assumingMemoryBound(to: GstBin.self))
        case GST_MESSAGE_ELEMENT:
            if pressKey(message, run) { return }
            run.progress.clear()
            recordReport(message, options: run.options)
        default:
            break
        }
    }

    /// The first error fails the run (and, as the options say, what is downstream of it is
    /// finalized); the closed window's and a watchdog's source part's are not failures.
    private func handleError(_ message: UnsafeMutablePointer<GstMessage>, _ run: inout RunState) {
        if windowClosing(message, &run) { return }
        outputFiles?.noteError(from: UnsafeMutableRawPointer(message.pointee.src))
        let text = errorText(message)
        if sourceOutage(message, text: text, progress: run.progress) { return }
        if run.firstError == nil {
            run.progress.clear()
            log("error: \(text)")
            run.firstError = text
            run.outcome = .failed(text)
            if run.options.finalizeOnError { finalizeAfterError(run.bus, source: message.pointee.src, options: run.options) }
        } else if run.options.verbose {
            log("error (after the first): \(text)")
        }
    }

    private func handleWarning(_ message: UnsafeMutablePointer<GstMessage>, _ run: inout RunState) {
        var error: UnsafeMutablePointer<GError>?
        var debug: UnsafeMutablePointer<gchar>?
        gst_message_parse_warning(message, &error, &debug)
        let text = error.flatMap { $0.pointee.message }.map { String(cString: $0) } ?? "?"
        let debugText = takeString(debug)
        if let error { g_error_free(error) }
        run.progress.clear()
        // gst_parse could not link a dynamic pad (decodebin found no stream the next
        // element takes): that element never gets data, so the run could only hang or
        // fail later with a vaguer error. Fail now, saying what met. (Behind a watchdog
        // the source part is the watchdog's to restart.)
        if run.firstError == nil, let debugText, debugText.contains("failed delayed linking"),
           watchdogStage(upstreamOf: message.pointee.src) == nil,
           let explained = NegotiationDiagnosis.delayedLink(in: pipeline, debug: debugText) {
            let failure = "\(sourceName(message)): \(explained)\n  debug: \(debugText)"
            log("error: \(failure)")
            run.firstError = failure
            run.outcome = .failed(failure)
            return
        }
        let warning = "warning: \(sourceName(message)): \(text)" + (debugText.map { "\n  debug: \($0)" } ?? "")
        log(outputFiles?.userNames(in: warning) ?? warning)
    }
}

private func messageIsFrom(_ message: UnsafeMutablePointer<GstMessage>, _ element: UnsafeMutablePointer<GstElement>) -> Bool {
    UnsafeMutableRawPointer(message.pointee.src) == UnsafeMutableRawPointer(element)
}
