import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// Delivery: frames leave the worker in the order they came (those the stage answered `.pending`
/// for are held until their outcome is known), pushed on or counted dropped.
extension FramePath {
    /// Delivers held frames from the oldest while their outcomes are known; `wait`: until none
    /// is left (end of stream). False when the worker must stop.
    func deliverFinished(wait: Bool) -> Bool {
        held.deliverReady(from: stage, wait: wait, afterAsking: {
            postNotices()
            if stage.latencyNanoseconds != reportedLatency { updateLatency(post: true) }
        }) { frame, outcome in deliver(outcome, pixels: frame.pixels, pts: frame.pts) }
    }

    /// Pushes a frame on or counts it dropped. False when the worker must stop (flushing).
    func deliver(_ outcome: FrameOutcome, pixels: SamplePixels, pts: GstClockTime) -> Bool {
        if pixels.copiedPixels { statistics.copied() }
        switch outcome {
        case .forward:
            postEvents(of: pixels)
            guard hasOutput else { // a sink stage: the stage took the frame
                statistics.forwarded(age: live ? age(of: pixels.sample, pts: pts) : nil)
                return true
            }
            if downstreamDone { return true }
            // Handed over: the stage keeps no reference, so the next element owns the frame.
            // A watchdog's frames are stamped with the pipeline's running time now, in a
            // segment from 0, so the timeline runs on across source restarts.
            guard let buffer = watchdog == nil ? pixels.takeBuffer() : restamped(pixels) else { return true }
            sl_handoff_release(buffer)
            let flow = sl_stage_push(element, buffer, gst_sample_get_caps(pixels.sample),
                                     watchdog == nil ? gst_sample_get_segment(pixels.sample) : nil)
            // A watchdog's frames leave stamped "now": their age there says nothing.
            statistics.forwarded(age: live && watchdog == nil ? age(of: pixels.sample, pts: pts) : nil)
            if flow == GST_FLOW_FLUSHING { return false } // stopping
            if flow != GST_FLOW_OK {
                // Said by the stage, as a source's task says it (appsrc's did): upstream, told
                // the same, would say it too, as if the fault were its own.
                if flow == GST_FLOW_NOT_LINKED || flow == GST_FLOW_NOT_NEGOTIATED { sl_stage_post_flow_error(element, flow) }
                sl_stage_set_downstream_flow(element, flow)
                downstreamDone = true
            }
        case .failed(let reason):
            statistics.addDropped(1)
            droppedForErrors(reason)
        case .drop, .pending:
            statistics.addDropped(1)
        }
        return true
    }

    /// Frames a stage dropped (an error on that frame, a frame shorter than its caps), by kind of
    /// reason (the text with its numbers blanked): the first of each kind is said at once, the
    /// count in the summary; a lossless run that lost frames so fails (the host reads
    /// `StageWorker.framesDroppedForErrors` at end of stream).
    private func droppedForErrors(_ reason: String) {
        inbox.droppedForErrors.add(1, ordering: .relaxed)
        inbox.firstDropReason.withLock { if $0 == nil { $0 = reason } }
        let kind = String(reason.map { $0.isNumber ? "#" : $0 })
        if dropKinds.insert(kind).inserted {
            sl_stage_post_warning(element, "dropped a frame: \(reason)" + (dropKinds.count == 1 ? " (each further reason is said once; the summary counts them)" : ""))
        }
    }
}
