// See include/streamlens_gst.h, "Preview windows": keys pressed in a video window, the window
// closed, what a window sink showed and how late (PreviewWindow.swift, the run's summary).
#include "streamlens_gst.h"

gchar *sl_navigation_key_press(GstMessage *message) {
    if (GST_MESSAGE_TYPE(message) != GST_MESSAGE_ELEMENT
        || gst_navigation_message_get_type(message) != GST_NAVIGATION_MESSAGE_EVENT) return NULL;
    GstEvent *event = NULL;
    if (!gst_navigation_message_parse_event(message, &event) || !event) return NULL;
    const gchar *key = NULL;
    gchar *result = NULL;
    if (gst_navigation_event_get_type(event) == GST_NAVIGATION_EVENT_KEY_PRESS
        && gst_navigation_event_parse_key_event(event, &key) && key) result = g_strdup(key);
    gst_event_unref(event);
    return result;
}

gboolean sl_error_is_window_closed(GstMessage *message) {
    if (GST_MESSAGE_TYPE(message) != GST_MESSAGE_ERROR || !GST_MESSAGE_SRC(message)
        || !GST_IS_VIDEO_OVERLAY(GST_MESSAGE_SRC(message))) return FALSE;
    GError *error = NULL;
    gst_message_parse_error(message, &error, NULL);
    gboolean closed = error && error->domain == GST_RESOURCE_ERROR && error->code == GST_RESOURCE_ERROR_NOT_FOUND;
    if (error) g_error_free(error);
    return closed;
}

gboolean sl_window_sink_stats(GstElement *element, guint64 *rendered, guint64 *dropped) {
    if (!GST_IS_BASE_SINK(element) || !GST_IS_VIDEO_OVERLAY(element)) return FALSE;
    GstStructure *stats = NULL;
    g_object_get(element, "stats", &stats, NULL);
    if (!stats) return FALSE;
    gboolean ok = gst_structure_get_uint64(stats, "rendered", rendered) && gst_structure_get_uint64(stats, "dropped", dropped);
    gst_structure_free(stats);
    return ok;
}

GstClockTime sl_live_latency(GstElement *pipeline) {
    GstQuery *query = gst_query_new_latency();
    GstClockTime result = GST_CLOCK_TIME_NONE;
    if (gst_element_query(pipeline, query)) {
        gboolean live; GstClockTime min, max;
        gst_query_parse_latency(query, &live, &min, &max);
        if (live) result = min;
    }
    gst_query_unref(query);
    return result;
}
