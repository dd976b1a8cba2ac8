// See include/streamlens_gst.h, "Source restart": a watchdog stage's source part found by
// walking the graph upstream, stopped and started again (its dynamic pads relinked, its
// input flushed), and kept out of the pipeline's own state changes.
#include "shim_private.h"
#include <string.h>

// ---- walking the graph -------------------------------------------------------------------

// The elements a pad direction leads to, one hop: the parents of the peers of `element`'s pads.
static GList *sl_neighbours(GstElement *element, gboolean downstream) {
    GList *result = NULL;
    GstIterator *it = downstream ? gst_element_iterate_src_pads(element) : gst_element_iterate_sink_pads(element);
    GValue value = G_VALUE_INIT;
    while (gst_iterator_next(it, &value) == GST_ITERATOR_OK) {
        GstPad *peer = gst_pad_get_peer(g_value_get_object(&value));
        if (peer) {
            GstElement *parent = gst_pad_get_parent_element(peer);
            if (parent) result = g_list_prepend(result, parent);
            gst_object_unref(peer);
        }
        g_value_reset(&value);
    }
    g_value_unset(&value);
    gst_iterator_free(it);
    return result;
}

// Breadth-first walk from `start` in one direction; returns the elements reached (references),
// in order of distance, `start` excluded.
static GList *sl_walk(GstElement *start, gboolean downstream) {
    GList *seen = NULL, *queue = g_list_append(NULL, gst_object_ref(start));
    while (queue) {
        GstElement *e = queue->data;
        queue = g_list_delete_link(queue, queue);
        GList *next = sl_neighbours(e, downstream);
        for (GList *l = next; l; l = l->next) {
            if (l->data == start || g_list_find(seen, l->data)) { gst_object_unref(l->data); continue; }
            seen = g_list_append(seen, l->data);
            queue = g_list_append(queue, gst_object_ref(l->data));
        }
        g_list_free(next);
        gst_object_unref(e);
    }
    return seen;
}

gboolean sl_stage_has_stage_upstream(GstElement *stage) {
    GList *up = sl_walk(stage, FALSE);
    gboolean found = FALSE;
    for (GList *l = up; l; l = l->next) found |= sl_is_stage(l->data);
    g_list_free_full(up, gst_object_unref);
    return found;
}

GList *sl_stage_upstream_elements(GstElement *stage) {
    GstObject *parent = gst_object_get_parent(GST_OBJECT(stage));
    if (!parent) return NULL;
    GList *down = sl_walk(stage, TRUE), *up = sl_walk(stage, FALSE), *result = NULL;
    for (GList *l = up; l; l = l->next) result = g_list_append(result, gst_object_ref(l->data));
    GstIterator *it = gst_bin_iterate_elements(GST_BIN(parent));
    GValue value = G_VALUE_INIT;
    while (gst_iterator_next(it, &value) == GST_ITERATOR_OK) {
        GstElement *e = g_value_get_object(&value);
        if (e != stage && !g_list_find(down, e) && !g_list_find(result, e)) result = g_list_append(result, gst_object_ref(e));
        g_value_reset(&value);
    }
    g_value_unset(&value);
    gst_iterator_free(it);
    g_list_free_full(down, gst_object_unref);
    g_list_free_full(up, gst_object_unref);
    gst_object_unref(parent);
    return result;
}

gboolean sl_stage_is_upstream(GstElement *stage, GstObject *object) {
    GList *up = sl_stage_upstream_elements(stage);
    gboolean found = FALSE;
    GstObject *o = object ? gst_object_ref(object) : NULL;
    while (o) {
        if (g_list_find(up, o)) { found = TRUE; gst_object_unref(o); break; }
        GstObject *p = gst_object_get_parent(o);
        gst_object_unref(o);
        o = p;
    }
    g_list_free_full(up, gst_object_unref);
    return found;
}

// ---- the stage's input -------------------------------------------------------------------

void sl_stage_flush_input(GstElement *stage) {
    SLStage *self = (SLStage *)stage;
    GstPad *pad = gst_element_get_static_pad(self->sink, "sink");
    gst_pad_send_event(pad, gst_event_new_flush_start());
    gst_pad_send_event(pad, gst_event_new_flush_stop(FALSE));
    gst_object_unref(pad);
}

// End-of-stream into the stage's own input (the pipeline counts the stage's input among its
// sinks, and a stopped source part would never send one), on a thread of its own: the EOS waits
// for the sink pad's stream lock, which upstream's streaming thread may hold in a push the
// worker has yet to drain.
static gpointer sl_end_input_thread(gpointer data) {
    SLStage *self = data;
    GstPad *pad = gst_element_get_static_pad(self->sink, "sink");
    gst_pad_send_event(pad, gst_event_new_eos());
    gst_object_unref(pad);
    gst_object_unref(self);
    return NULL;
}

void sl_stage_close_input(GstElement *stage) {
    // From now on upstream is refused with EOS (sl_count_buffer); the frames that arrived before
    // (queued in the stage's input, or in a push waiting for room there) stay, and the EOS sent
    // behind them ends the input once the worker has pulled them.
    __atomic_store_n(&((SLStage *)stage)->input_closed, 1, __ATOMIC_RELEASE);
    g_thread_unref(g_thread_new("stage-end-input", sl_end_input_thread, gst_object_ref(stage)));
}

// ---- dynamic pads relinked after a restart -----------------------------------------------

// Links of an element's "sometimes" pads (a demuxer's, rtspsrc's, decodebin's), recorded before
// a restart: the element makes new pads when it starts again and nobody else would link them
// (gst_parse links dynamic pads once). Each new pad from the same template is linked to the
// recorded peer it had, if that peer is free.
typedef struct { char *template_name; GstPad *peer; GstCaps *caps; } SLDynamicLink;
static GQuark sl_links_quark;

static void sl_free_links(gpointer data) {
    for (GList *l = data; l; l = l->next) {
        SLDynamicLink *link = l->data;
        g_free(link->template_name);
        gst_object_unref(link->peer);
        if (link->caps) gst_caps_unref(link->caps);
        g_free(link);
    }
    g_list_free(data);
}

// Same kind of stream: same media type, and for RTP the same media and encoding (the ssrc and
// parameter sets of a new session differ).
static gboolean sl_same_kind(GstCaps *a, GstCaps *b) {
    if (gst_caps_is_empty(a) || gst_caps_is_empty(b) || gst_caps_is_any(a) || gst_caps_is_any(b)) return TRUE;
    const GstStructure *x = gst_caps_get_structure(a, 0), *y = gst_caps_get_structure(b, 0);
    if (!gst_structure_has_name(x, gst_structure_get_name(y))) return FALSE;
    const char *fields[] = {"media", "encoding-name"};
    for (int i = 0; i < 2; i++) {
        const char *u = gst_structure_get_string(x, fields[i]), *v = gst_structure_get_string(y, fields[i]);
        if (u && v && g_ascii_strcasecmp(u, v) != 0) return FALSE;
    }
    return TRUE;
}

static void sl_relink_pad(GstElement *element, GstPad *pad, gpointer data) {
    (void)data;
    GstPadTemplate *t = gst_pad_get_pad_template(pad);
    if (!t) return;
    for (GList *l = g_object_get_qdata(G_OBJECT(element), sl_links_quark); l; l = l->next) {
        SLDynamicLink *link = l->data;
        if (strcmp(link->template_name, GST_PAD_TEMPLATE_NAME_TEMPLATE(t)) != 0 || gst_pad_is_linked(link->peer)) continue;
        // The same kind of stream as before (a demuxer's audio pad must not take the video's
        // place): the new pad's caps must meet the old link's.
        if (link->caps) {
            GstCaps *caps = gst_pad_query_caps(pad, NULL);
            gboolean same = sl_same_kind(caps, link->caps);
            gst_caps_unref(caps);
            if (!same) continue;
        }
        if (gst_pad_link(pad, link->peer) == GST_PAD_LINK_OK) break;
    }
    gst_object_unref(t);
}

static void sl_record_dynamic_links(GstElement *element) {
    if (!sl_links_quark) sl_links_quark = g_quark_from_static_string("streamlens-dynamic-links");
    GList *links = NULL;
    GstIterator *it = gst_element_iterate_src_pads(element);
    GValue value = G_VALUE_INIT;
    while (gst_iterator_next(it, &value) == GST_ITERATOR_OK) {
        GstPad *pad = g_value_get_object(&value);
        GstPadTemplate *t = gst_pad_get_pad_template(pad);
        GstPad *peer = gst_pad_get_peer(pad);
        if (t && peer && GST_PAD_TEMPLATE_PRESENCE(t) == GST_PAD_SOMETIMES) {
            SLDynamicLink *link = g_new0(SLDynamicLink, 1);
            link->template_name = g_strdup(GST_PAD_TEMPLATE_NAME_TEMPLATE(t));
            link->peer = gst_object_ref(peer);
            link->caps = gst_pad_get_current_caps(pad);
            links = g_list_append(links, link);
        }
        if (peer) gst_object_unref(peer);
        if (t) gst_object_unref(t);
        g_value_reset(&value);
    }
    g_value_unset(&value);
    gst_iterator_free(it);
    if (!links) return; // keep what an earlier restart recorded (the pads may be gone now)
    gboolean had = g_object_get_qdata(G_OBJECT(element), sl_links_quark) != NULL;
    g_object_set_qdata_full(G_OBJECT(element), sl_links_quark, links, sl_free_links);
    if (!had) g_signal_connect(element, "pad-added", G_CALLBACK(sl_relink_pad), NULL);
}

void sl_stage_record_upstream_links(GstElement *stage) {
    GList *up = sl_stage_upstream_elements(stage);
    for (GList *l = up; l; l = l->next) sl_record_dynamic_links(l->data);
    g_list_free_full(up, gst_object_unref);
}

// ---- stopping and starting ---------------------------------------------------------------

void sl_element_restart(GstElement *element, gboolean stop) {
    if (stop) {
        sl_record_dynamic_links(element);
        gst_element_set_state(element, GST_STATE_NULL);
        gst_element_get_state(element, NULL, NULL, 5 * GST_SECOND);
    } else {
        // A fresh base time: the restarted part's running time starts at 0 now, so an element
        // that syncs to the clock (identity sync=true pacing a file) waits as it did at first.
        GstObject *parent = gst_object_get_parent(GST_OBJECT(element));
        GstClock *clock = parent ? gst_element_get_clock(GST_ELEMENT(parent)) : NULL;
        if (clock) {
            gst_element_set_base_time(element, gst_clock_get_time(clock));
            gst_object_unref(clock);
        }
        if (parent) gst_object_unref(parent);
        gst_element_set_state(element, GST_STATE_PLAYING);
    }
}

gboolean sl_element_parent_has_clock(GstElement *element) {
    GstObject *parent = gst_object_get_parent(GST_OBJECT(element));
    if (!parent) return FALSE;
    GstClock *clock = gst_element_get_clock(GST_ELEMENT(parent));
    gst_object_unref(parent);
    if (!clock) return FALSE;
    gst_object_unref(clock);
    return TRUE;
}

void sl_stage_lock_upstream(GstElement *stage, gboolean locked) {
    GList *up = sl_stage_upstream_elements(stage);
    for (GList *l = up; l; l = l->next) gst_element_set_locked_state(l->data, locked);
    g_list_free_full(up, gst_object_unref);
}
