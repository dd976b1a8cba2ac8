import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

extension Pipeline {
    /// An error stopped part of the pipeline, but what is downstream of the failed element can
    /// still finish: send it end-of-stream there, so encoders flush and muxers write their index
    /// (an MP4's moov), and wait up to 5 s for the pipeline's EOS or the muxers' sinks' own (only
    /// when there is a muxer). The EOS is sent from its own thread: a send that blocks must not
    /// hang the host.
    func finalizeAfterError(_ bus: UnsafeMutablePointer<GstBus>, source: UnsafeMutablePointer<GstObject>?, options: Options) {
        // Only a muxer's output needs finishing to be usable, and only once a stream reached it
        // or the encoder before it (which may hold frames yet: x264enc looks ahead); else stop at
        // once (a file that failed before its first frame: waiting would only add 5 s).
        let elements = allElements()
        func klass(_ e: UnsafeMutablePointer<GstElement>) -> String { String(cString: sl_element_klass(e)) }
        guard let source, sl_is_element(source) != 0, elements.contains(where: { klass($0).contains("Muxer") }),
              elements.contains(where: { (klass($0).contains("Muxer") || klass($0).contains("Encoder")) && sl_element_has_negotiated_sink_pad($0) != 0 })
        else { return }
        gst_object_ref(source)
        let element = ElementReference(UnsafeMutableRawPointer(source).assumingMemoryBound(to: GstElement.self))
        Thread.detachNewThread {
            sl_element_send_eos_downstream(element.pointer)
            gst_object_unref(element.pointer)
        }
        // The muxers' sinks tell when their files are complete: the pipeline's own EOS may never
        // come (a pipeline that failed before PLAYING does not aggregate its sinks' EOS).
        var sinks: [UnsafeMutableRawPointer] = [] // references, released below
        for muxer in elements where klass(muxer).contains("Muxer") {
            let list = sl_element_downstream_sinks(muxer)
            var node = list
            while let n = node {
                if let data = n.pointee.data { sinks.append(data) }
                node = n.pointee.next
            }
            g_list_free(list) // the references move to `sinks`
        }
        if waitForEOS(bus, seconds: 5, sinks: sinks, options: options) { log("the output written so far was finalized") }
        for sink in sinks { gst_object_unref(sink) }
    }

    /// The error cancelled the pipeline's pending change to PLAYING: an element that prerolls
    /// only now (a file sink behind an encoder's look-ahead) would wait in PAUSED for ever.
    private func resumePausedElements() {
        for element in allElements() {
            var state = GST_STATE_NULL, pending = GST_STATE_NULL
            gst_element_get_state(element, &state, &pending, 0)
            if state == GST_STATE_PAUSED { gst_element_set_state(element, GST_STATE_PLAYING) }
        }
    }

    /// Waits for the pipeline's EOS, or for every one of `sinks` to have posted its own.
    private func waitForEOS(_ bus: UnsafeMutablePointer<GstBus>, seconds: Double, sinks: [UnsafeMutableRawPointer] = [],
                            options: Options) -> Bool {
        if !sinks.isEmpty { _ = sl_object_set_from_string(pipeline, "message-forward", "true") }
        defer { if !sinks.isEmpty { _ = sl_object_set_from_string(pipeline, "message-forward", "false") } }
        var ended = Set<UnsafeMutableRawPointer>()
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard let message = gst_bus_timed_pop_filtered(bus, GstClockTime(50_000_000),
                                                           GstMessageType(GST_MESSAGE_EOS.rawValue | GST_MESSAGE_ELEMENT.rawValue)) else {
                resumePausedElements()
                continue
            }
            defer { gst_message_unref(message) }
            if sl_message_type(message) == GST_MESSAGE_EOS { return true }
            if let source = sl_message_forwarded_eos_source(message) {
                ended.insert(UnsafeMutableRawPointer(source))
                gst_object_unref(source)
                if sinks.allSatisfy({ ended.contains($0) }) { return true }
                continue
            }
            recordReport(message, options: options)
        }
        return false
    }
}
