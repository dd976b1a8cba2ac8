import CGStreamer
import CGstShim
import StreamLensCore
import Synchronization

/// The watchdog's part of the frame pump (a stage with `restartsUpstream`): restarts of the
/// source part between two pulls and at its end of stream (none once the run is ending), and frames
/// stamped with the pipeline's running time so the timeline runs on across restarts.
extension FramePath {
    /// What the pump does next after asking the watchdog.
    enum PumpStep { case proceed, again, stop }

    /// The run is ending on purpose (see sl_pipeline_set_ending): an end of stream is not an outage.
    var pipelineEnding: Bool { sl_element_pipeline_ending(element) != 0 }

    /// Before each pull: a failed source part is restarted (with back-off). Once the run is
    /// ending on purpose nothing is restarted and the pump goes on: the end-of-stream sent to
    /// the pipeline asked the stage to end (sl_stage_end_requested), which ends its own input
    /// from another thread, so it also ends a source part that is down or was restarting.
    func watchdogBeforePull() -> PumpStep {
        let reported = inbox.sourceFailure.withLock { m -> String? in defer { m = nil }; return m }
        guard let watchdog, let reason = watchdog.pendingFailure(reported: reported) else { return .proceed }
        if watchdog.restart(reason: reason, stopping: { [inbox] in inbox.stopping.load(ordering: .relaxed) }) {
            noteRestart(reason)
            return .again
        }
        return pipelineEnding ? .proceed : .stop
    }

    /// A restart is an event of the source (`EventLog`, the HTTP API's event stream).
    private func noteRestart(_ reason: String) {
        EventLog.shared.append(source: metricsSourceName ?? "main", type: "source-restarted", fields: ["stage": name, "reason": reason])
    }

    /// No sample came: a source part that ended (a file played as a live source) is restarted
    /// unless the run is ending (then the pump's own end-of-stream path finishes the output).
    func watchdogAtEndOfStream() -> PumpStep {
        guard let watchdog, sl_stage_input_ended(element) != 0, watchdog.restartOnEOS,
              !pipelineEnding, !inbox.stopping.load(ordering: .relaxed) else { return .proceed }
        if watchdog.restart(reason: "end of stream", stopping: { [inbox] in inbox.stopping.load(ordering: .relaxed) }) {
            noteRestart("end of stream")
            return .again
        }
        return pipelineEnding ? .proceed : .stop
    }

    /// A watchdog's frame, handed over (no pixel copy) and stamped with the pipeline's running
    /// time now.
    func restamped(_ pixels: SamplePixels) -> UnsafeMutablePointer<GstBuffer>? {
        guard let buffer = pixels.takeBuffer() else { return nil }
        // Writable without a copy unless another element holds it (then only its metadata is
        // copied, never the pixels).
        let own = sl_buffer_make_writable(buffer)!
        sl_buffer_set_pts(own, sl_element_running_time_now(element))
        return own
    }
}
