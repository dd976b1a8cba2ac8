// See include/streamlens_gst.h, "Stage pads": what a stage element's pads answer and count.
// The query functions and probes are installed by sl_instance_init (stage_element.c), hence
// declared in shim_private.h; the rest reads or sets what they use.
#include "shim_private.h"

// ---- latency -----------------------------------------------------------------------------

// LATENCY on the src pad: upstream's latency (and liveness) plus this stage's own. The inner
// output would otherwise answer for the whole upstream with nothing.
gboolean sl_src_query(GstPad *pad, GstObject *parent, GstQuery *query) {
    SLStage *self = (SLStage *)parent;
    if (GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
        GstPad *inner = gst_element_get_static_pad(self->sink, "sink");
        gboolean ok = gst_pad_peer_query(inner, query);
        gst_object_unref(inner);
        if (ok) {
            gboolean live; GstClockTime min, max;
            gst_query_parse_latency(query, &live, &min, &max);
            GstClockTime own = __atomic_load_n(&self->latency, __ATOMIC_RELAXED);
            gst_query_set_latency(query, live, min + own, GST_CLOCK_TIME_IS_VALID(max) ? max + own : max);
            return TRUE;
        }
        // Upstream cannot answer yet (decodebin's or rtspsrc's pads not linked): fail, as any
        // element with an unlinked sink pad does.
        return FALSE;
    }
    return gst_pad_query_default(pad, parent, query);
}

void sl_stage_set_latency(GstElement *stage, GstClockTime latency) {
    __atomic_store_n(&((SLStage *)stage)->latency, latency, __ATOMIC_RELAXED);
}

gboolean sl_stage_upstream_is_live(GstElement *stage) {
    SLStage *self = (SLStage *)stage;
    GstPad *inner = gst_element_get_static_pad(self->sink, "sink");
    GstQuery *query = gst_query_new_latency();
    gboolean live = FALSE;
    if (gst_pad_peer_query(inner, query)) gst_query_parse_latency(query, &live, NULL, NULL);
    gst_query_unref(query);
    gst_object_unref(inner);
    return live;
}

// ---- caps --------------------------------------------------------------------------------

// CAPS on the sink pad of a pass-through stage: what downstream accepts, within the stage's
// own caps, so `videotestsrc ! lenspass ! video/x-raw,format=I420 ! …` negotiates as it would
// without the stage.
gboolean sl_sink_query(GstPad *pad, GstObject *parent, GstQuery *query) {
    SLStage *self = (SLStage *)parent;
    if (GST_QUERY_TYPE(query) == GST_QUERY_CAPS) {
        GstCaps *filter = NULL;
        gst_query_parse_caps(query, &filter);
        GstCaps *tmpl = gst_pad_get_pad_template_caps(pad);
        GstCaps *wanted = filter ? gst_caps_intersect_full(filter, tmpl, GST_CAPS_INTERSECT_FIRST) : gst_caps_ref(tmpl);
        GstCaps *downstream = gst_pad_peer_query_caps(self->srcpad, wanted);
        GstCaps *result = gst_caps_intersect_full(downstream, tmpl, GST_CAPS_INTERSECT_FIRST);
        gst_query_set_caps_result(query, result);
        gst_caps_unref(result); gst_caps_unref(downstream); gst_caps_unref(wanted); gst_caps_unref(tmpl);
        return TRUE;
    }
    return gst_pad_query_default(pad, parent, query);
}

// ---- buffers arriving, and what downstream answered --------------------------------------

// Counts buffers arriving (live-mode drops are arrivals minus frames pulled). Once downstream
// of the stage has answered EOS (a sink that wanted N frames, `pngenc snapshot=true`) or an
// error, buffers are refused with that answer, as a plain element's chain function would
// return it: upstream then stops and sends EOS, and the pipeline can end. Once the stage's
// input is closed (sl_stage_close_input) they are refused with EOS.
GstPadProbeReturn sl_count_buffer(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    (void)pad;
    SLStage *self = data;
    gint flow = __atomic_load_n(&self->downstream_flow, __ATOMIC_RELAXED);
    if (flow == GST_FLOW_OK && __atomic_load_n(&self->input_closed, __ATOMIC_ACQUIRE)) flow = GST_FLOW_EOS;
    if (flow != GST_FLOW_OK) {
        __atomic_add_fetch(&self->refused, 1, __ATOMIC_RELAXED);
        gst_buffer_unref(GST_PAD_PROBE_INFO_BUFFER(info));
        GST_PAD_PROBE_INFO_DATA(info) = NULL;
        GST_PAD_PROBE_INFO_FLOW_RETURN(info) = (GstFlowReturn)flow;
        return GST_PAD_PROBE_HANDLED;
    }
    __atomic_add_fetch(&self->arrived, 1, __ATOMIC_RELAXED);
    return GST_PAD_PROBE_OK;
}

GstFlowReturn sl_stage_downstream_flow(GstElement *stage) {
    return (GstFlowReturn)__atomic_load_n(&((SLStage *)stage)->downstream_flow, __ATOMIC_RELAXED);
}

void sl_stage_set_downstream_flow(GstElement *stage, GstFlowReturn flow) {
    __atomic_store_n(&((SLStage *)stage)->downstream_flow, (gint)flow, __ATOMIC_RELAXED);
}

guint64 sl_stage_buffers_arrived(GstElement *stage) {
    return __atomic_load_n(&((SLStage *)stage)->arrived, __ATOMIC_RELAXED);
}

guint64 sl_stage_buffers_refused(GstElement *stage) {
    return __atomic_load_n(&((SLStage *)stage)->refused, __ATOMIC_RELAXED);
}

// ---- tags --------------------------------------------------------------------------------

// Tags (title, orientation, …) stop at the stage's input; each is handed to its output, which
// sends it before the next frame, so a muxer still sees them.
GstPadProbeReturn sl_forward_tags(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    (void)pad;
    SLStage *self = data;
    GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
    if (GST_EVENT_TYPE(event) == GST_EVENT_TAG && self->src) sl_stage_src_queue_event(self->src, gst_event_ref(event));
    return GST_PAD_PROBE_OK;
}
