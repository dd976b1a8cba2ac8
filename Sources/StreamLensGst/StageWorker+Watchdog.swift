import CGStreamer
import CGstShim
import StreamLensCore
import Synchronization

/// The watchdog's part of the frame pump (a stage with `restartsUpstream`): restarts of the
/// source part between two pulls, at its end of stream, Ctrl-C while it is down, and frames
/// stamped with the pipeline's running time so the timeline runs on across restarts.
extension StageWorker {
    /// What the pump does next after asking the watchdog.
    enum PumpStep { case proceed, again, stop }

    /// The run is ending on purpose (see sl_pipeline_set_ending): an end of stream is not an outage.
    var pipelineEnding: Bool { sl_element_pipeline_ending(element) != 0 }

    /// Before each pull: a failed source part is restarted (with back-off); ending while it is
    /// down ends the stream here, since no end-of-stream will come through a stopped source.
    func watchdogBeforePull() -> PumpStep {
        guard let watchdog else { return .proceed }
        if let reason = watchdog.pendingFailure() {
            if !watchdog.restart(reason: reason, stopping: { stopping.load(ordering: .relaxed) }) {
                if pipelineEnding { endWithoutSource() }
                return .stop
            }
            return .again
        }
        if watchdog.sourceIsDown, pipelineEnding { // the cheap test first: this runs before every pull
            endWithoutSource()
            return .stop
        }
        return .proceed
    }

    /// No sample came: a source part that ended (a file played as a live source) is restarted
    /// unless the run is ending.
    func watchdogAtEndOfStream() -> PumpStep {
        guard let watchdog, gst_app_sink_is_eos(appsink) != 0, watchdog.restartOnEOS,
              !pipelineEnding, !stopping.load(ordering: .relaxed) else { return .proceed }
        if watchdog.restart(reason: "end of stream", stopping: { stopping.load(ordering: .relaxed) }) { return .again }
        // Ending (Ctrl-C) during the back-off: the input has its end-of-stream already; the
        // output gets its own (the pipeline's EOS is not let through to the inner appsrc).
        if pipelineEnding { finishStream() }
        return .stop
    }

    /// A watchdog's output: the buffer (no pixel copy) stamped with the pipeline's running time
    /// now, in appsrc's own segment, so the timeline runs on across source restarts.
    func pushRestamped(_ sample: OpaquePointer, into appsrc: UnsafeMutablePointer<GstAppSrc>) -> GstFlowReturn {
        if let caps = gst_sample_get_caps(sample), pushedCaps == nil || gst_caps_is_equal(pushedCaps, caps) == 0 {
            gst_app_src_set_caps(appsrc, caps)
            if let pushedCaps { gst_caps_unref(pushedCaps) }
            pushedCaps = gst_caps_ref(caps)
        }
        guard let buffer = gst_sample_get_buffer(sample) else { return GST_FLOW_ERROR }
        let own = sl_buffer_make_writable(gst_buffer_ref(buffer))!
        sl_buffer_set_pts(own, sl_element_running_time_now(element))
        sl_handoff_release(own)
        return gst_app_src_push_buffer(appsrc, own)
    }

    /// Ctrl-C while a watchdog's source is down: no end-of-stream will come through it, so the
    /// stage ends its own input (the pipeline waits for its inner appsink too) and its output.
    func endWithoutSource() {
        sl_stage_end_input(element)
        finishStream()
    }
}
