import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// The restart logic of a watchdog stage (`StageDescriptor.restartsUpstream`), run by its
/// worker thread: the source part (everything upstream of the stage) is set to NULL and back to
/// the pipeline's state after a failure (an error it posted, an end of stream, no frame for
/// `timeout`), waiting `backoff` seconds first and doubling the wait after each restart that
/// brings no frame, up to `max-backoff` (30 s by default). `retries` restarts in a row without a frame end the run with an
/// error. Everything downstream keeps running.
///
/// Part of its stage's frame path (`FramePath`): used by the worker thread only. A failure the
/// bus thread saw comes through the stage's inbox.
final class SourceWatchdog {
    private let element: UnsafeMutablePointer<GstElement>
    private let name: String
    let timeout: Double
    let retries: Int
    let initialBackoff: Double
    let restartOnEOS: Bool
    let maximumBackoff: Double

    private var lastFrame = DispatchTime.now().uptimeNanoseconds
    private var outageStart: UInt64?
    private var failedAttempts = 0
    private var backoff: Double
    private(set) var restarts = 0
    private var linksRecorded = false

    init(element: UnsafeMutablePointer<GstElement>, name: String, policy: RestartPolicy) {
        self.element = element
        self.name = name
        timeout = policy.timeout
        retries = policy.retries
        initialBackoff = policy.backoff
        restartOnEOS = policy.restartOnEOS
        maximumBackoff = policy.maxBackoff
        backoff = initialBackoff
    }

    /// A frame arrived: the source is up (again).
    func frameArrived() {
        lastFrame = DispatchTime.now().uptimeNanoseconds
        if !linksRecorded {
            // The first frame after a (re)start: every dynamic pad on its way is linked now.
            sl_stage_record_upstream_links(element)
            linksRecorded = true
        }
        if let start = outageStart {
            let seconds = Double(lastFrame - start) / 1e9
            sl_stage_post_info(element, "notice", "\(name): source back after \(String(format: "%.1f", seconds)) s (\(restarts) restart\(restarts == 1 ? "" : "s") so far)")
            outageStart = nil
        }
        failedAttempts = 0
        backoff = initialBackoff
    }

    /// Why the source needs a restart now, if it does: an error the bus thread reported, or a stall.
    func pendingFailure(reported: String?) -> String? {
        if let reported { return reported }
        let idle = Double(DispatchTime.now().uptimeNanoseconds - lastFrame) / 1e9
        return idle >= timeout ? "no frame for \(String(format: "%.1f", idle)) s" : nil
    }

    /// The source part, nearest to the stage first.
    private func sourceElements() -> (list: UnsafeMutablePointer<GList>?, elements: [UnsafeMutablePointer<GstElement>]) {
        let list = sl_stage_upstream_elements(element)
        var elements: [UnsafeMutablePointer<GstElement>] = []
        var node = list
        while let n = node {
            if let e = n.pointee.data { elements.append(e.assumingMemoryBound(to: GstElement.self)) }
            node = n.pointee.next
        }
        return (list, elements)
    }

    /// First start: the host locked the source part out of the pipeline's state changes (so a
    /// source that cannot start is an outage, not a failed start); start it once the pipeline
    /// heads for PLAYING. Returns false when the worker is stopping first.
    func startSource(stopping: () -> Bool) -> Bool {
        while true {
            if stopping() { return false }
            var state = GST_STATE_NULL, pending = GST_STATE_NULL
            if let parent = gst_object_get_parent(UnsafeMutableRawPointer(element).assumingMemoryBound(to: GstObject.self)) {
                gst_element_get_state(UnsafeMutableRawPointer(parent).assumingMemoryBound(to: GstElement.self), &state, &pending, 0)
                gst_object_unref(parent)
            }
            // On its way to PLAYING is enough: the sinks complete that step only when frames come.
            // And with its clock chosen: the source's base time is taken from it.
            if state == GST_STATE_PLAYING || pending == GST_STATE_PLAYING, sl_element_parent_has_clock(element) != 0 { break }
            usleep(20_000)
        }
        let (list, elements) = sourceElements()
        for e in elements { sl_element_restart(e, 0) }
        g_list_free_full(list) { gst_object_unref($0) }
        lastFrame = DispatchTime.now().uptimeNanoseconds
        return true
    }

    /// Restarts the source part after the back-off. Returns false when the run should end
    /// (retries exhausted: an error was posted) or the worker is stopping.
    func restart(reason: String, stopping: () -> Bool) -> Bool {
        // Ending on purpose (Ctrl-C, a removed source): the failure is likely the end-of-stream
        // meeting a source part that was restarting; restarting it again would only fail again.
        if sl_element_pipeline_ending(element) != 0 { return false }
        if outageStart == nil { outageStart = DispatchTime.now().uptimeNanoseconds }
        failedAttempts += 1
        if retries > 0 && failedAttempts > retries {
            sl_stage_post_error(element, "the source failed \(retries) time\(retries == 1 ? "" : "s") in a row; giving up (last: \(reason))", nil)
            return false
        }
        let limit = retries > 0 ? " of \(retries)" : ""
        sl_stage_post_warning(element, "source lost (\(reason)); restarting it in \(String(format: "%.1f", backoff)) s (attempt \(failedAttempts)\(limit))")
        // Wait, but answer a stop at once.
        let until = DispatchTime.now().uptimeNanoseconds + UInt64(backoff * 1e9)
        while DispatchTime.now().uptimeNanoseconds < until {
            if stopping() || sl_element_pipeline_ending(element) != 0 { return false }
            usleep(50_000)
        }
        backoff = min(maximumBackoff, max(0.1, backoff * 2))
        let (list, elements) = sourceElements()
        // Stop from the source end, start again from the stage's end (so each element has
        // somewhere to push when its upstream starts).
        for e in elements.reversed() { sl_element_restart(e, 1) }
        sl_stage_flush_input(element)
        for e in elements { sl_element_restart(e, 0) }
        g_list_free_full(list) { gst_object_unref($0) }
        restarts += 1
        linksRecorded = false
        // The new attempt gets a full timeout before it counts as stalled.
        lastFrame = DispatchTime.now().uptimeNanoseconds
        return !stopping()
    }
}
