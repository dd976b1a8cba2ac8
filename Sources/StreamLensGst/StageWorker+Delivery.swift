import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// Delivery: frames leave the worker in the order they came (those the stage answered `.pending`
/// for are held until their outcome is known), pushed on or counted dropped.
extension StageWorker {
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
        switch outcome {
        case .forward:
            postEvents(of: pixels)
            guard let appsrc else { // a sink stage: the stage took the frame
                statistics.forwarded(age: live ? age(of: pixels.sample, pts: pts) : nil)
                return true
            }
            if downstreamDone { return true }
            let flow: GstFlowReturn
            if watchdog != nil {
                flow = pushRestamped(pixels.sample, into: appsrc)
            } else {
                // push_sample does not take the sample; it sets the caps on appsrc when they
                // change and carries the segment, so timestamps stay as they came in.
                sl_handoff_release(gst_sample_get_buffer(pixels.sample))
                flow = gst_app_src_push_sample(appsrc, pixels.sample)
            }
            sl_stage_flush_tags(element)
            // A watchdog's frames leave stamped "now": their age there says nothing.
            statistics.forwarded(age: live && watchdog == nil ? age(of: pixels.sample, pts: pts) : nil)
            if flow == GST_FLOW_FLUSHING { return false } // stopping
            if flow != GST_FLOW_OK {
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
    /// `framesDroppedForErrors` at end of stream).
    var framesDroppedForErrors: (count: Int, first: String?, lossless: Bool) {
        (droppedCount.load(ordering: .relaxed), firstDropReason.withLock { $0 }, !liveForHost.load(ordering: .relaxed))
    }

    private func droppedForErrors(_ reason: String) {
        droppedCount.add(1, ordering: .relaxed)
        firstDropReason.withLock { if $0 == nil { $0 = reason } }
        let kind = String(reason.map { $0.isNumber ? "#" : $0 })
        if dropKinds.insert(kind).inserted {
            sl_stage_post_warning(element, "dropped a frame: \(reason)" + (dropKinds.count == 1 ? " (each further reason is said once; the summary counts them)" : ""))
        }
    }
}
