import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

extension Pipeline {
    /// The pipeline's end-of-stream: the run finished (interrupted, if it was or the window was
    /// closed), unless frames were lost on the way. The window sinks' figures and the stages'
    /// reports are printed first.
    func endOfStreamOutcome(_ run: RunState) -> Outcome {
        var outcome = Outcome.finished(interrupted: run.interruptedAt != nil || run.windowClosed != nil)
        if !run.options.quiet { for line in windowSinkSummaries() { log(line) } }
        drainStageReports(run.bus, expected: run.stageCount, options: run.options)
        if run.interruptedAt == nil, run.windowClosed == nil, run.watchdogs.isEmpty, let lost = lostFrames() {
            run.progress.clear()
            log("\(lost.fatal ? "error" : "warning"): \(lost.text)")
            if lost.fatal { outcome = .failed(lost.text) }
        }
        // Lossless means every frame: one a stage had to drop for an error fails the run.
        if case .finished = outcome, let lost = framesDroppedForErrors() {
            run.progress.clear()
            log("error: \(lost)")
            outcome = .failed(lost)
        }
        return outcome
    }

    /// "ximagesink0: 450 frames shown, 0 dropped as late, each 81 ms after capture" for each
    /// window sink (the last part for live pipelines: a synced sink shows every frame at its
    /// capture time plus the pipeline's latency, which the stages' reports are part of).
    private func windowSinkSummaries() -> [String] {
        let latency = sl_live_latency(pipeline)
        let lag = latency == GstClockTime.max ? "" : String(format: ", each %.0f ms after capture", Double(latency) / 1e6)
        return allElements().compactMap { element in
            var rendered: guint64 = 0, dropped: guint64 = 0
            guard sl_window_sink_stats(element, &rendered, &dropped) != 0 else { return nil }
            return "\(objectName(element)): \(rendered) frames shown, \(dropped) dropped as late\(lag)"
        }
    }

    /// The pipeline's EOS can overtake the stages' own reports by a moment (a stage's report is
    /// posted by its worker as it ends its output): wait for them, at most two seconds.
    private func drainStageReports(_ bus: UnsafeMutablePointer<GstBus>, expected: Int, options: Options) {
        let deadline = Date().addingTimeInterval(2)
        while stageReports.filter({ $0.kind == "stats" }).count < expected, Date() < deadline {
            guard let message = gst_bus_timed_pop_filtered(bus, GstClockTime(50_000_000), GST_MESSAGE_ELEMENT) else { continue }
            defer { gst_message_unref(message) }
            recordReport(message, options: options)
        }
    }

    /// A file that ends early or loses frames on the way (cut short, damaged) ends the stream as
    /// if all were well: the demuxer stops where the data stops, decoders skip what they cannot
    /// decode. Compares the frames that reached the first stage with what the input's duration
    /// and frame rate promise. No frame at all is an error (the output is empty); fewer than 90%
    /// a warning (the output holds what could be read). Not when downstream ended the stream
    /// itself (a sink that wanted N frames), nor for live or endless sources (no duration).
    private func lostFrames() -> (fatal: Bool, text: String)? {
        guard let stage = stages.first, sl_stage_buffers_refused(stage) == 0,
              let pad = gst_element_get_static_pad(stage, "sink") else { return nil }
        defer { gst_object_unref(pad) }
        let arrived = Int(sl_stage_buffers_arrived(stage))
        let name = objectName(stage)
        var num: gint = 0, den: gint = 1
        if let caps = gst_pad_get_current_caps(pad) {
            if let structure = gst_caps_get_structure(caps, 0) { _ = gst_structure_get_fraction(structure, "framerate", &num, &den) }
            gst_caps_unref(caps)
        }
        // One frame at rate 0/1: a picture. Written into a video file it is one sample of no
        // duration, which players show as nothing.
        if arrived == 1, num == 0, allElements().contains(where: { String(cString: sl_element_klass($0)).contains("Muxer") }) {
            return (false, "\(name): the input is a single picture (no frame rate), so the video written holds one frame of no duration that players do not show; to make a clip of it, put imagefreeze num-buffers=N ! video/x-raw,framerate=30/1 after the decoder")
        }
        var duration: gint64 = -1
        guard gst_pad_peer_query_duration(pad, GST_FORMAT_TIME, &duration) != 0, duration > 0 else { return nil }
        let seconds = Double(duration) / 1e9
        if arrived == 0 {
            return (true, "\(name): no frame arrived, though the input lasts \(String(format: "%.1f", seconds)) s: its frames cannot be read (a damaged file?)")
        }
        guard num > 0, den > 0 else { return nil } // variable frame rate: no count to expect
        let expected = Int((seconds * Double(num) / Double(den)).rounded())
        guard Double(arrived) < 0.9 * Double(expected) - 1 else { return nil }
        return (false, "\(name): \(arrived) of the input's \(expected) frames arrived (\(String(format: "%.1f", seconds)) s at \(Self.rate(num, den)) fps): the input is cut short or damaged; the output holds the frames that could be read")
    }

    /// "lensdetect0: 3 frames were dropped because of errors (the first: …)" for the lossless
    /// stages that dropped frames for errors, nil when none did.
    private func framesDroppedForErrors() -> String? {
        let lost = stages.compactMap { stage -> String? in
            guard let dropped = StageElements.worker(of: stage)?.framesDroppedForErrors, dropped.lossless, dropped.count > 0 else { return nil }
            return "\(objectName(stage)): \(dropped.count) frame\(dropped.count == 1 ? " was" : "s were") dropped because of errors (the first: \(dropped.first ?? "?"))"
        }
        return lost.isEmpty ? nil : lost.joined(separator: "; ")
    }

    private static func rate(_ num: gint, _ den: gint) -> String {
        den == 1 ? "\(num)" : String(format: "%.2f", Double(num) / Double(den))
    }
}
