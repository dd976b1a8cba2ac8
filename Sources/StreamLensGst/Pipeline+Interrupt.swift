import CGStreamer
import CGstShim
import Foundation
import Synchronization

/// Interrupts (SIGINT, SIGTERM, SIGHUP) seen since the handler was installed. The first is the
/// bus loop's to act on (end-of-stream, so outputs are finalized); the second ends the process
/// in the handler itself, whatever the rest of the program is waiting for.
private let interrupts = Atomic<Int>(0)

/// What the handler writes before it ends the process on a second interrupt.
private let abortMessage: StaticString = "aborted\n"

/// The handler: async-signal-safe (an atomic add, write(2), unlink(2), _exit(2)). The outputs'
/// temporary files not yet moved onto their targets go with the process: an aborted run leaves
/// the earlier files as they were and no litter beside them.
private func interruptHandler(_ signal: Int32) {
    if interrupts.add(1, ordering: .relaxed).newValue >= 2 {
        sl_output_files_remove_pending()
        _ = write(2, abortMessage.utf8Start, abortMessage.utf8CodeUnitCount)
        _exit(130)
    }
}

extension Pipeline {
    /// Ctrl-C, kill and a closed terminal (SIGHUP: an ssh session dropping) all end the run like
    /// Ctrl-C; a second one ends the process at once. SIGPIPE is ignored: a reader that went away
    /// (a control client, `… | head`) makes that write fail, not the run.
    /// Ends a run in progress from any thread as an interrupt would (end-of-stream, outputs
    /// finalized, `run` returns `.finished(interrupted: true)`); before the run, it ends as soon
    /// as it starts.
    public func requestEnd() { endRequested.store(true, ordering: .relaxed) }

    /// The handlers `run` installs when `Options.handleSignals` is set, for a host that runs
    /// several pipelines (each with handleSignals off): every run in progress sees the first
    /// interrupt and ends; a second ends the process.
    public static func installInterruptHandlers() { installSignalHandlers() }

    /// Interrupts seen since the handlers were installed.
    public static var interruptsSeen: Int { interrupts.load(ordering: .relaxed) }

    func installSignalHandlers() { Self.installSignalHandlers() }

    static func installSignalHandlers() {
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

    /// Interrupts that came since the last look. The first of the run ends the stream, so the
    /// output is finalized (a paused preview resumes first: a paused pipeline would hold it).
    func noticeInterrupt(_ run: inout RunState) {
        let seen = interrupts.load(ordering: .relaxed)
        let asked = endRequested.load(ordering: .relaxed)
        if seen > run.interruptsHandled || asked {
            run.interruptsHandled = seen
            if run.interruptedAt == nil {
                run.interruptedAt = Date()
                run.keys.resume()
                sl_pipeline_set_ending(pipeline, 1)
                run.progress.clear()
                log(asked && seen == 0 ? "ending: sending end-of-stream to finish the output"
                                       : "interrupt: sending end-of-stream to finish the output (Ctrl-C again to abort)")
                endStream()
            }
        }
    }

    /// End-of-stream that does not come (a source that holds it, a stage stuck in its
    /// work) must not keep the run up: stop without it.
    func endOfStreamOverdue(_ run: RunState) -> Outcome? {
        guard let interruptedAt = run.interruptedAt, Date().timeIntervalSince(interruptedAt) > run.options.endOfStreamTimeout else { return nil }
        run.progress.clear()
        log("error: end of stream did not come within \(Int(run.options.endOfStreamTimeout)) s of the interrupt; stopping without it (outputs may be incomplete)")
        return .aborted
    }

    /// Sends end-of-stream to the pipeline from its own thread: a source busy reconnecting
    /// (rtspsrc behind a watchdog) can hold the event for a long time, and the bus loop must go on.
    func endStream() {
        gst_object_ref(pipeline)
        let target = ElementReference(pipeline)
        Thread.detachNewThread {
            gst_element_send_event(target.pointer, gst_event_new_eos())
            gst_object_unref(target.pointer)
        }
    }
}
