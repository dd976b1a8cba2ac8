import CGStreamer
import StreamLensCore
import CGstShim

/// A short-lived pipeline of the host's own — a still image decoded (StillImage), a picture
/// encoded (JPEGEncoder) — whose description names one element `src` and one `sink`: parsed,
/// handed to `body` with those two, then set to NULL and freed whatever `body` does.
/// `cannotBuild` turns GStreamer's parse error into the caller's message.
func withHelperPipeline<R>(_ description: String, cannotBuild: (String) -> String, incomplete: String,
                           _ body: (_ pipeline: UnsafeMutablePointer<GstElement>, _ src: UnsafeMutablePointer<GstElement>,
                                    _ sink: UnsafeMutablePointer<GstElement>) throws -> R) throws -> R {
    var error: UnsafeMutablePointer<GError>?
    guard let pipeline = sl_pipeline_parse(description, &error) else {
        defer { if let error { g_error_free(error) } }
        throw StageError(cannotBuild(error.map(parseErrorMessage) ?? "?"))
    }
    if let error { g_error_free(error) }
    defer {
        gst_element_set_state(pipeline, GST_STATE_NULL)
        gst_object_unref(pipeline)
    }
    let bin = UnsafeMutableRawPointer(pipeline).assumingMemoryBound(to: GstBin.self)
    guard let src = gst_bin_get_by_name(bin, "src"), let sink = gst_bin_get_by_name(bin, "sink") else {
        throw StageError(incomplete)
    }
    defer { gst_object_unref(src); gst_object_unref(sink) }
    return try body(pipeline, src, sink)
}

/// The text of an error message's GError ("unknown error" when it has none).
func errorMessageText(_ message: UnsafeMutablePointer<GstMessage>) -> String {
    var gerror: UnsafeMutablePointer<GError>?
    var debug: UnsafeMutablePointer<gchar>?
    gst_message_parse_error(message, &gerror, &debug)
    defer { if let gerror { g_error_free(gerror) }; g_free(debug) }
    return gerror.flatMap { $0.pointee.message }.map { String(cString: $0) } ?? "unknown error"
}

/// The first error on a helper pipeline's bus, if any (taken off the bus).
func firstBusError(_ pipeline: UnsafeMutablePointer<GstElement>) -> String? {
    guard let bus = gst_element_get_bus(pipeline) else { return nil }
    defer { gst_object_unref(bus) }
    guard let message = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR) else { return nil }
    defer { gst_message_unref(message) }
    return errorMessageText(message)
}
