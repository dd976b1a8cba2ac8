// See include/streamlens_gst.h, "Stage elements" (SLStageInfo.audio_caps): a stage's audio
// input. It is a sink pad of the bin's own with no element behind it: an element there (an
// appsink) would be a second sink of the pipeline, whose preroll and end-of-stream the pipeline
// would wait for even when nothing is linked to it. The audio ends here (nothing is passed on):
// each buffer goes to Swift as a sample with the pad's caps and segment.
#include "shim_private.h"

static GstFlowReturn sl_audio_chain(GstPad *pad, GstObject *parent, GstBuffer *buffer) {
    GstCaps *caps = gst_pad_get_current_caps(pad);
    GstEvent *segment_event = gst_pad_get_sticky_event(pad, GST_EVENT_SEGMENT, 0);
    const GstSegment *segment = NULL;
    if (segment_event) gst_event_parse_segment(segment_event, &segment);
    GstSample *sample = gst_sample_new(buffer, caps, segment, NULL);   // copies the segment, refs the rest
    gst_buffer_unref(buffer);
    if (caps) gst_caps_unref(caps);
    if (segment_event) gst_event_unref(segment_event);
    sl_stage_audio_arrived(GST_ELEMENT(parent), sample);
    gst_sample_unref(sample);
    return GST_FLOW_OK;
}

// Every event ends here; caps and segment are kept on the pad (sticky) for the samples.
static gboolean sl_audio_event(GstPad *pad, GstObject *parent, GstEvent *event) {
    (void)pad;
    if (GST_EVENT_TYPE(event) == GST_EVENT_EOS) sl_stage_audio_ended(GST_ELEMENT(parent));
    gst_event_unref(event);
    return TRUE;
}

// Caps: the template's. Nothing else is answered (the default would forward a query to the
// bin's video output, which has nothing to do with this audio).
static gboolean sl_audio_query(GstPad *pad, GstObject *parent, GstQuery *query) {
    (void)parent;
    switch (GST_QUERY_TYPE(query)) {
    case GST_QUERY_CAPS: {
        GstCaps *filter = NULL;
        gst_query_parse_caps(query, &filter);
        GstCaps *tmpl = gst_pad_get_pad_template_caps(pad);
        GstCaps *result = filter ? gst_caps_intersect_full(filter, tmpl, GST_CAPS_INTERSECT_FIRST) : gst_caps_ref(tmpl);
        gst_query_set_caps_result(query, result);
        gst_caps_unref(result);
        gst_caps_unref(tmpl);
        return TRUE;
    }
    case GST_QUERY_ACCEPT_CAPS: {
        GstCaps *caps = NULL;
        gst_query_parse_accept_caps(query, &caps);
        GstCaps *tmpl = gst_pad_get_pad_template_caps(pad);
        gst_query_set_accept_caps_result(query, caps && gst_caps_is_subset(caps, tmpl));
        gst_caps_unref(tmpl);
        return TRUE;
    }
    default:
        return FALSE;
    }
}

static GstIterator *sl_audio_no_links(GstPad *pad, GstObject *parent) {
    (void)pad; (void)parent;
    return NULL;
}

GstPad *sl_stage_audio_pad_new(GstPadTemplate *templ) {
    GstPad *pad = gst_pad_new_from_template(templ, "audio");
    gst_pad_set_chain_function(pad, sl_audio_chain);
    gst_pad_set_event_function(pad, sl_audio_event);
    gst_pad_set_query_function(pad, sl_audio_query);
    gst_pad_set_iterate_internal_links_function(pad, sl_audio_no_links);
    return pad;
}
