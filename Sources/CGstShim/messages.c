// See include/streamlens_gst.h, "Bus messages": what a stage posts (errors, warnings, its
// reports for the host's log) and how the host reads a report back.
#include "streamlens_gst.h"

GstMessageType sl_message_type(GstMessage *message) { return GST_MESSAGE_TYPE(message); }

void sl_stage_post_error(GstElement *stage, const char *message, const char *debug) {
    GError *error = g_error_new_literal(GST_STREAM_ERROR, GST_STREAM_ERROR_FAILED, message);
    gst_element_post_message(stage, gst_message_new_error(GST_OBJECT(stage), error, debug));
    g_error_free(error);
}

void sl_stage_post_flow_error(GstElement *stage, GstFlowReturn flow) {
    GST_ELEMENT_FLOW_ERROR(stage, flow);
}

void sl_stage_post_warning(GstElement *stage, const char *message) {
    GError *error = g_error_new_literal(GST_CORE_ERROR, GST_CORE_ERROR_FAILED, message);
    gst_element_post_message(stage, gst_message_new_warning(GST_OBJECT(stage), error, NULL));
    g_error_free(error);
}

void sl_stage_post_info(GstElement *stage, const char *kind, const char *text) {
    GstStructure *s = gst_structure_new("streamlens", "kind", G_TYPE_STRING, kind, "text", G_TYPE_STRING, text, NULL);
    gst_element_post_message(stage, gst_message_new_element(GST_OBJECT(stage), s));
}

gboolean sl_message_parse_info(GstMessage *message, const char **kind, const char **text) {
    if (GST_MESSAGE_TYPE(message) != GST_MESSAGE_ELEMENT) return FALSE;
    const GstStructure *s = gst_message_get_structure(message);
    if (!s || !gst_structure_has_name(s, "streamlens")) return FALSE;
    *kind = gst_structure_get_string(s, "kind");
    *text = gst_structure_get_string(s, "text");
    return *kind && *text;
}

void sl_stage_post_event(GstElement *stage, const char *type, const char *zone, const char *label, gint object_id,
                         const char *direction, double time, double dwell, const char *json) {
    GstStructure *s = gst_structure_new("streamlens-event", "type", G_TYPE_STRING, type, "zone", G_TYPE_STRING, zone,
                                        "label", G_TYPE_STRING, label, "object-id", G_TYPE_INT, object_id,
                                        "json", G_TYPE_STRING, json, NULL);
    if (direction) gst_structure_set(s, "direction", G_TYPE_STRING, direction, NULL);
    if (time >= 0) gst_structure_set(s, "time", G_TYPE_DOUBLE, time, NULL);
    if (dwell >= 0) gst_structure_set(s, "dwell", G_TYPE_DOUBLE, dwell, NULL);
    gst_element_post_message(stage, gst_message_new_element(GST_OBJECT(stage), s));
}

const char *sl_message_parse_event(GstMessage *message) {
    if (GST_MESSAGE_TYPE(message) != GST_MESSAGE_ELEMENT) return NULL;
    const GstStructure *s = gst_message_get_structure(message);
    if (!s || !gst_structure_has_name(s, "streamlens-event")) return NULL;
    return gst_structure_get_string(s, "json");
}
