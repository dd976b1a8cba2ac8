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
        if pixels.copiedPixels { statistics.copied() }
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
                flow = pushRestamped(pixels, into: appsrc)
            } else if pushedSegmentChanged(pixels.sample, into: appsrc), let buffer = pixels.takeBuffer() {
                // A segment other than the last (appsrc's own at first: TIME from 0, what a file
                // decoded from its start has): push_sample carries it, so timestamps stay as they
                // came in. It does not take the sample: the one made here for it is let go at
                // once, so the frame downstream is (almost at once) nobody else's.
                let handing = gst_sample_new(buffer, gst_sample_get_caps(pixels.sample), gst_sample_get_segment(pixels.sample), nil)!
                gst_buffer_unref(buffer)
                sl_handoff_release(gst_sample_get_buffer(handing))
                flow = gst_app_src_push_sample(appsrc, handing)
                gst_sample_unref(handing)
            } else if let buffer = pixels.takeBuffer() {
                // Handed over: the stage keeps no reference, so the next stage owns the frame.
                sl_handoff_release(buffer)
                flow = gst_app_src_push_buffer(appsrc, buffer)
            } else {
                flow = GST_FLOW_ERROR
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

    /// Sets the sample's caps on appsrc when they changed; whether its segment differs from the
    /// last one pushed (then remembered).
    private func pushedSegmentChanged(_ sample: OpaquePointer, into appsrc: UnsafeMutablePointer<GstAppSrc>) -> Bool {
        setCapsIfChanged(sample, on: appsrc)
        guard let segment: UnsafeMutablePointer<GstSegment> = gst_sample_get_segment(sample) else { return false }
        if pushedSegment == nil {
            var initial = GstSegment()
            gst_segment_init(&initial, GST_FORMAT_TIME)
            pushedSegment = initial
        }
        if withUnsafePointer(to: pushedSegment!, { gst_segment_is_equal(segment, $0) != 0 }) { return false }
        pushedSegment = segment.pointee
        return true
    }

    /// Sets the sample's caps on appsrc when they differ from the last ones set (then remembered).
    func setCapsIfChanged(_ sample: OpaquePointer, on appsrc: UnsafeMutablePointer<GstAppSrc>) {
        guard let caps = gst_sample_get_caps(sample), pushedCaps == nil || gst_caps_is_equal(caps, pushedCaps) == 0 else { return }
        gst_app_src_set_caps(appsrc, caps)
        if let pushedCaps { gst_caps_unref(pushedCaps) }
        pushedCaps = gst_caps_ref(caps)
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
