// See include/streamlens_gst.h, "Buffers": timestamps, writability, the hand-off that
// ThreadSanitizer is told about, and the size a buffer's video meta describes.
#include "streamlens_gst.h"

GstClockTime sl_buffer_pts(GstBuffer *buffer) { return GST_BUFFER_PTS(buffer); }
GstClockTime sl_buffer_duration(GstBuffer *buffer) { return GST_BUFFER_DURATION(buffer); }
void sl_buffer_set_pts(GstBuffer *buffer, GstClockTime pts) {
    GST_BUFFER_PTS(buffer) = pts;
    GST_BUFFER_DTS(buffer) = GST_CLOCK_TIME_NONE;
}

GstClockTime sl_element_running_time_now(GstElement *element) {
    GstClock *clock = gst_element_get_clock(element);
    if (!clock) return GST_CLOCK_TIME_NONE;
    GstClockTime now = gst_clock_get_time(clock);
    gst_object_unref(clock);
    GstClockTime base = gst_element_get_base_time(element);
    return now >= base ? now - base : 0;
}

GstBuffer *sl_buffer_make_writable(GstBuffer *buffer) { return gst_buffer_make_writable(buffer); }

gboolean sl_buffer_pixels_shared(GstBuffer *buffer) { return !gst_buffer_is_all_memory_writable(buffer); }

// ThreadSanitizer sees our threads and our reads and writes of buffers, but not GLib's locks
// (futexes in uninstrumented code) that order a push out of a stage before the pull from the next
// stage's input: without these it reports every restamped buffer as a race.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SL_THREAD_SANITIZER 1
#endif
#endif
#ifdef SL_THREAD_SANITIZER
void __tsan_acquire(void *address);
void __tsan_release(void *address);
void sl_handoff_release(const void *object) { __tsan_release((void *)object); }
void sl_handoff_acquire(const void *object) { __tsan_acquire((void *)object); }
#else
void sl_handoff_release(const void *object) { (void)object; }
void sl_handoff_acquire(const void *object) { (void)object; }
#endif

gsize sl_buffer_video_meta_size(GstBuffer *buffer) {
    GstVideoMeta *meta = gst_buffer_get_video_meta(buffer);
    guint heights[GST_VIDEO_MAX_PLANES] = {0};
    if (!meta || !gst_video_meta_get_plane_height(meta, heights)) return 0;
    gsize needed = 0;
    for (guint i = 0; i < meta->n_planes && i < GST_VIDEO_MAX_PLANES; i++) {
        gsize end = meta->offset[i] + (gsize)(meta->stride[i] > 0 ? meta->stride[i] : 0) * heights[i];
        if (end > needed) needed = end;
    }
    return needed;
}
