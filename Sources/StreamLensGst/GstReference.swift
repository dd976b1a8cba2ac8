import CGStreamer

/// One counted reference to a GstObject (an element, a pipeline, an appsrc, a bus…) that this
/// Swift value owns: taken once — given by a call that returns a new reference (`adopting`), or
/// added (`retaining`) — and dropped once, in deinit. Whoever holds the wrapper holds the
/// reference, so no path through a throwing init or a failure can drop it twice or forget it (a
/// clip writer whose pipeline would not start unreffed its objects, threw, and unreffed them
/// again in deinit).
///
/// @unchecked Sendable: GstObject's reference count is atomic; what may be done with the
/// object from several threads is its own business.
final class ObjectReference<Object>: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<Object>

    /// Takes over a reference the caller was given (transfer full).
    init(adopting pointer: UnsafeMutablePointer<Object>) { self.pointer = pointer }

    /// Adds a reference of its own.
    init(retaining pointer: UnsafeMutablePointer<Object>) {
        gst_object_ref(pointer)
        self.pointer = pointer
    }

    deinit { gst_object_unref(pointer) }
}

/// One counted reference to a GstSample (a frame's buffer with its caps and segment), owned as
/// `ObjectReference` owns a GstObject's.
final class SampleReference: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Takes over a reference the caller was given (transfer full).
    init(adopting pointer: OpaquePointer) { self.pointer = pointer }

    /// Adds a reference of its own.
    init(retaining pointer: OpaquePointer) { self.pointer = gst_sample_ref(pointer)! }

    deinit { gst_sample_unref(pointer) }
}
