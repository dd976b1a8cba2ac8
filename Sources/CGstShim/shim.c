// See include/streamlens_gst.h. Each function here exists because Swift cannot import the
// macro, variadic function or GObject boilerplate it wraps.
#include "streamlens_gst.h"
#include <string.h>
// Our own locks are pthread mutexes, not GMutex: GLib's are futexes that ThreadSanitizer cannot
// see (`make test-tsan` would report every access they guard as a race).
#include <pthread.h>

// ---- macros and variadics as functions --------------------------------------------------

gboolean sl_is_bin(GstElement *element) { return GST_IS_BIN(element); }
gboolean sl_is_element(gpointer object) { return GST_IS_ELEMENT(object); }
const char *sl_element_factory_name(GstElement *element) {
    GstElementFactory *factory = gst_element_get_factory(element);
    return factory ? GST_OBJECT_NAME(factory) : NULL;
}

GstElement *sl_pipeline_parse(const char *description, GError **error) {
    // FATAL_ERRORS: an unknown property or a failed link is an error, not a warning with a
    // half-built pipeline.
    GstElement *element = gst_parse_launch_full(description, NULL, GST_PARSE_FLAG_FATAL_ERRORS, error);
    if (!element) return NULL;
    gst_object_ref_sink(element); // gst_parse_launch returns a floating reference
    if (GST_IS_PIPELINE(element)) return element;
    GstElement *pipeline = gst_pipeline_new(NULL);
    gst_object_ref_sink(pipeline);
    gst_bin_add(GST_BIN(pipeline), element); // takes its own reference
    gst_object_unref(element);
    return pipeline;
}

gboolean sl_element_has_unlinked_sink_pad(GstElement *element) {
    gboolean found = FALSE;
    GST_OBJECT_LOCK(element);
    for (GList *l = element->sinkpads; l && !found; l = l->next) found = !gst_pad_is_linked(GST_PAD(l->data));
    GST_OBJECT_UNLOCK(element);
    return found;
}

const char *sl_element_klass(GstElement *element) {
    const char *klass = gst_element_class_get_metadata(GST_ELEMENT_GET_CLASS(element), GST_ELEMENT_METADATA_KLASS);
    return klass ? klass : "";
}

static void sl_send_eos_to_peer(const GValue *value, gpointer data) {
    (void)data;
    GstPad *peer = gst_pad_get_peer(GST_PAD(g_value_get_object(value)));
    if (!peer) return;
    gst_pad_send_event(peer, gst_event_new_eos());
    gst_object_unref(peer);
}

void sl_element_send_eos_downstream(GstElement *element) {
    GstIterator *it = gst_element_iterate_src_pads(element);
    while (gst_iterator_foreach(it, sl_send_eos_to_peer, NULL) == GST_ITERATOR_RESYNC) gst_iterator_resync(it);
    gst_iterator_free(it);
}

// ---- stage elements ----------------------------------------------------------------------

typedef struct {
    SLStageInfo info;   // deep copy, kept for the life of the process (types are never unloaded)
    GstCaps *sink_caps;
} SLStageClassData;

typedef struct {
    GstBin parent;
    GstElement *appsink, *appsrc;
    GstPad *sinkpad, *srcpad; // ghost pads
    pthread_mutex_t lock;              // guards values, context
    GValue *values;
    guint n_values;
    gpointer context;
    GDestroyNotify release;
    GstClockTime latency;     // atomic
    guint64 arrived;          // atomic
    gint downstream_flow;     // atomic: GST_FLOW_OK, or what downstream returned (EOS…)
    guint64 refused;          // atomic: buffers refused with downstream_flow (downstream ended first)
    GList *pending_tags;      // guarded by lock
    gboolean has_pending_tags; // atomic
} SLStage;

typedef struct {
    GstBinClass parent_class;
    SLStageClassData *data;
} SLStageClass;

#define SL_LOSSLESS_QUEUE 4 // buffers held by the inner appsink and appsrc in lossless mode

static SLStageCallbacks sl_callbacks;
static GstElementClass *sl_bin_class;    // every stage type derives from GstBin directly
static GQuark sl_stage_quark;

void sl_stage_set_callbacks(SLStageCallbacks callbacks) { sl_callbacks = callbacks; }

gboolean sl_is_stage(GstElement *element) {
    return element && sl_stage_quark && g_type_get_qdata(G_OBJECT_TYPE(element), sl_stage_quark) != NULL;
}

static SLStageClass *sl_class_of(gpointer instance) { return (SLStageClass *)G_OBJECT_GET_CLASS(instance); }

static void sl_set_property(GObject *object, guint id, const GValue *value, GParamSpec *pspec) {
    SLStage *self = (SLStage *)object;
    guint index = id - 1;
    if (index >= self->n_values) { G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec); return; }
    pthread_mutex_lock(&self->lock);
    g_value_copy(value, &self->values[index]);
    gboolean notify = self->context != NULL;
    pthread_mutex_unlock(&self->lock);
    if (notify && sl_callbacks.property_changed) sl_callbacks.property_changed(GST_ELEMENT(object), index);
}

static void sl_get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec) {
    SLStage *self = (SLStage *)object;
    guint index = id - 1;
    if (index >= self->n_values) { G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec); return; }
    pthread_mutex_lock(&self->lock);
    g_value_copy(&self->values[index], value);
    pthread_mutex_unlock(&self->lock);
}

static void sl_finalize(GObject *object) {
    SLStage *self = (SLStage *)object;
    if (self->context && self->release) self->release(self->context);
    g_list_free_full(self->pending_tags, (GDestroyNotify)gst_event_unref);
    for (guint i = 0; i < self->n_values; i++) g_value_unset(&self->values[i]);
    g_free(self->values);
    pthread_mutex_destroy(&self->lock);
    G_OBJECT_CLASS(sl_bin_class)->finalize(object);
}

static GstStateChangeReturn sl_change_state(GstElement *element, GstStateChange transition) {
    // The inner appsrc is live: in PAUSED it pushes nothing. A bin takes its sinks to PLAYING
    // first, so the inner appsink would get there before it — and appsink's change waits for the
    // preroll lock, which upstream's streaming thread holds while it waits for room in the full
    // appsink; the worker that would make room waits for room in the appsrc, which waits for
    // PLAYING: a deadlock when frames came fast enough in PAUSED to fill both queues (a file
    // source under a busy core). The appsrc goes first; downstream of the stage is PLAYING already.
    SLStage *self = (SLStage *)element;
    if (transition == GST_STATE_CHANGE_PAUSED_TO_PLAYING && self->appsrc)
        gst_element_set_state(self->appsrc, GST_STATE_PLAYING);
    GstStateChangeReturn ret = sl_bin_class->change_state(element, transition);
    if (ret == GST_STATE_CHANGE_FAILURE) return ret;
    switch (transition) {
    case GST_STATE_CHANGE_READY_TO_PAUSED:
        if (sl_callbacks.start && !sl_callbacks.start(element, sl_class_of(element)->data->info.type_id))
            return GST_STATE_CHANGE_FAILURE;
        break;
    case GST_STATE_CHANGE_PAUSED_TO_READY:
        if (sl_callbacks.stop) sl_callbacks.stop(element);
        break;
    default:
        break;
    }
    return ret;
}

// LATENCY on the src pad: upstream's latency (and liveness) plus this stage's own. The inner
// appsrc would otherwise answer for the whole upstream with only its own figure.
static gboolean sl_src_query(GstPad *pad, GstObject *parent, GstQuery *query) {
    SLStage *self = (SLStage *)parent;
    if (GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
        GstPad *inner = gst_element_get_static_pad(self->appsink, "sink");
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
        // element with an unlinked sink pad does. The default would ask the inner appsrc, whose
        // is-live=TRUE (it must not preroll) would tell a compositor or muxer downstream that a
        // file pipeline is live: it would then drop and repeat frames against the clock.
        return FALSE;
    }
    return gst_pad_query_default(pad, parent, query);
}

// CAPS on the sink pad of a pass-through stage: what downstream accepts, within the stage's
// own caps, so `videotestsrc ! lenspass ! video/x-raw,format=I420 ! …` negotiates as it would
// without the stage.
static gboolean sl_sink_query(GstPad *pad, GstObject *parent, GstQuery *query) {
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

// Counts buffers arriving (live-mode drops are arrivals minus frames pulled). Once downstream
// of the stage has answered EOS (a sink that wanted N frames, `pngenc snapshot=true`) or an
// error, buffers are refused with that answer, as a plain element's chain function would
// return it: upstream then stops and sends EOS, and the pipeline can end.
static GstPadProbeReturn sl_count_buffer(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    (void)pad;
    SLStage *self = data;
    gint flow = __atomic_load_n(&self->downstream_flow, __ATOMIC_RELAXED);
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

// End-of-stream leaving the stage's appsrc (downstream answered EOS or failed, and the appsrc's
// task sent EOS and stopped; or its segment ended): nothing pushed from now on goes anywhere.
// Refuse further input with EOS and let a worker blocked on a full appsrc go on (an unbounded
// queue wakes it; it pushes nothing more).
static GstPadProbeReturn sl_watch_src_eos(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    (void)pad;
    SLStage *self = data;
    if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS) {
        gint ok = GST_FLOW_OK;
        __atomic_compare_exchange_n(&self->downstream_flow, &ok, (gint)GST_FLOW_EOS, FALSE, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        gst_app_src_set_max_buffers(GST_APP_SRC(self->appsrc), 0);
    }
    return GST_PAD_PROBE_OK;
}

GstFlowReturn sl_stage_downstream_flow(GstElement *stage) {
    return (GstFlowReturn)__atomic_load_n(&((SLStage *)stage)->downstream_flow, __ATOMIC_RELAXED);
}

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

void sl_stage_flush_input(GstElement *stage) {
    SLStage *self = (SLStage *)stage;
    GstPad *pad = gst_element_get_static_pad(self->appsink, "sink");
    gst_pad_send_event(pad, gst_event_new_flush_start());
    gst_pad_send_event(pad, gst_event_new_flush_stop(FALSE));
    gst_object_unref(pad);
}

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

void sl_stage_end_input(GstElement *stage) {
    SLStage *self = (SLStage *)stage;
    GstPad *pad = gst_element_get_static_pad(self->appsink, "sink");
    gst_pad_send_event(pad, gst_event_new_eos());
    gst_object_unref(pad);
}

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

void sl_stage_set_downstream_flow(GstElement *stage, GstFlowReturn flow) {
    __atomic_store_n(&((SLStage *)stage)->downstream_flow, (gint)flow, __ATOMIC_RELAXED);
}

// Tags (title, orientation, …) stop at the appsink; hand each one to the appsrc, which sends
// it downstream in order with its buffers, so a muxer still sees them. Before the appsrc has
// caps (tags usually precede the first buffer) they wait for sl_stage_flush_tags, or the
// appsrc would send a segment ahead of the caps.
static GstPadProbeReturn sl_forward_tags(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    (void)pad;
    SLStage *self = data;
    GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
    if (GST_EVENT_TYPE(event) != GST_EVENT_TAG) return GST_PAD_PROBE_OK;
    GstCaps *caps = gst_app_src_get_caps(GST_APP_SRC(self->appsrc));
    if (caps) {
        gst_caps_unref(caps);
        gst_element_send_event(self->appsrc, gst_event_ref(event));
    } else {
        pthread_mutex_lock(&self->lock);
        self->pending_tags = g_list_append(self->pending_tags, gst_event_ref(event));
        __atomic_store_n(&self->has_pending_tags, TRUE, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&self->lock);
    }
    return GST_PAD_PROBE_OK;
}

void sl_stage_flush_tags(GstElement *stage) {
    SLStage *self = (SLStage *)stage;
    if (!self->appsrc) return;
    if (!__atomic_load_n(&self->has_pending_tags, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&self->lock);
    GList *events = self->pending_tags;
    self->pending_tags = NULL;
    __atomic_store_n(&self->has_pending_tags, FALSE, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&self->lock);
    for (GList *l = events; l; l = l->next) gst_element_send_event(self->appsrc, l->data);
    g_list_free(events);
}

static void sl_instance_init(GTypeInstance *instance, gpointer g_class) {
    SLStage *self = (SLStage *)instance;
    SLStageClassData *data = ((SLStageClass *)g_class)->data;
    pthread_mutex_init(&self->lock, NULL);
    guint n = 0;
    GParamSpec **pspecs = g_object_class_list_properties(G_OBJECT_CLASS(g_class), &n);
    self->n_values = data->info.n_props;
    self->values = g_new0(GValue, self->n_values);
    for (guint i = 0; i < n; i++) {
        if (pspecs[i]->owner_type != G_TYPE_FROM_CLASS(g_class)) continue;
        guint index = pspecs[i]->param_id - 1;
        if (index >= self->n_values) continue;
        g_value_init(&self->values[index], pspecs[i]->value_type);
        g_param_value_set_default(pspecs[i], &self->values[index]);
    }
    g_free(pspecs);

    // The pair is unlinked; the Swift worker carries samples across. appsink: async=false
    // (else the pipeline deadlocks before the first frame), sync=false (real sinks sync),
    // no last-sample reference (it would force a copy on make_writable). appsrc: time format
    // (bytes is the default and silently breaks muxers), live, blocking, no byte limit.
    // Four buffers on each side in lossless mode: with two, each frame costs two thread
    // wake-ups in lock-step; four lets the threads run in bursts (bench-bridge: ~28 -> ~19 us
    // added per 720p frame) for ~22 MB more at 720p RGB.
    self->appsink = gst_element_factory_make("appsink", "stage_sink");
    g_object_set(self->appsink, "caps", data->sink_caps, "async", FALSE, "sync", FALSE, "qos", FALSE,
                 "enable-last-sample", FALSE, "emit-signals", FALSE, "max-buffers", (guint)SL_LOSSLESS_QUEUE, "drop", FALSE, NULL);
    gst_bin_add(GST_BIN(self), self->appsink);
    GstPad *sinkpad = gst_element_get_static_pad(self->appsink, "sink");
    GstElementClass *klass = GST_ELEMENT_CLASS(g_class);
    self->sinkpad = gst_ghost_pad_new_from_template("sink", sinkpad, gst_element_class_get_pad_template(klass, "sink"));
    gst_pad_add_probe(sinkpad, GST_PAD_PROBE_TYPE_BUFFER, sl_count_buffer, self, NULL);
    gst_object_unref(sinkpad);
    if (data->info.caps_passthrough && !data->info.is_sink) gst_pad_set_query_function(self->sinkpad, sl_sink_query);
    gst_element_add_pad(GST_ELEMENT(self), self->sinkpad);
    // A sink stage ends the pipeline: the frames go wherever its worker sends them.
    if (data->info.is_sink) return;

    self->appsrc = gst_element_factory_make("appsrc", "stage_src");
    g_object_set(self->appsrc, "format", GST_FORMAT_TIME, "is-live", TRUE, "block", TRUE, "max-bytes", (guint64)0,
                 "max-buffers", (guint64)SL_LOSSLESS_QUEUE, "handle-segment-change", TRUE, NULL);
    gst_bin_add(GST_BIN(self), self->appsrc);
    GstPad *srcpad = gst_element_get_static_pad(self->appsrc, "src");
    self->srcpad = gst_ghost_pad_new_from_template("src", srcpad, gst_element_class_get_pad_template(klass, "src"));
    sinkpad = gst_element_get_static_pad(self->appsink, "sink");
    gst_pad_add_probe(sinkpad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, sl_forward_tags, self, NULL);
    gst_object_unref(sinkpad);
    gst_pad_add_probe(srcpad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, sl_watch_src_eos, self, NULL);
    gst_object_unref(srcpad);
    gst_pad_set_query_function(self->srcpad, sl_src_query);
    gst_element_add_pad(GST_ELEMENT(self), self->srcpad);
}

static void sl_class_init(gpointer g_class, gpointer class_data) {
    SLStageClass *klass = (SLStageClass *)g_class;
    SLStageClassData *data = class_data;
    klass->data = data;
    sl_bin_class = g_type_class_peek(GST_TYPE_BIN);
    GObjectClass *object_class = G_OBJECT_CLASS(g_class);
    object_class->set_property = sl_set_property;
    object_class->get_property = sl_get_property;
    object_class->finalize = sl_finalize;
    GstElementClass *element_class = GST_ELEMENT_CLASS(g_class);
    element_class->change_state = sl_change_state;

    for (guint i = 0; i < data->info.n_props; i++) {
        const SLPropSpec *p = &data->info.props[i];
        GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
            (p->mutable_playing ? GST_PARAM_MUTABLE_PLAYING : GST_PARAM_MUTABLE_READY);
        GParamSpec *spec = NULL;
        switch (p->kind) {
        case SL_PROP_BOOL: spec = g_param_spec_boolean(p->name, p->name, p->blurb, p->default_number != 0, flags); break;
        // Numbers get the type's full range: GLib would only warn about an out-of-range value
        // and keep the default; the stage validates against the table's range on start and
        // fails with a message naming the property. (The real range is in the blurb.)
        case SL_PROP_INT: spec = g_param_spec_int(p->name, p->name, p->blurb, G_MININT, G_MAXINT, (gint)p->default_number, flags); break;
        case SL_PROP_DOUBLE: spec = g_param_spec_double(p->name, p->name, p->blurb, -G_MAXDOUBLE, G_MAXDOUBLE, p->default_number, flags); break;
        case SL_PROP_STRING: spec = g_param_spec_string(p->name, p->name, p->blurb, p->default_string, flags); break;
        }
        g_object_class_install_property(object_class, i + 1, spec);
    }
    gst_element_class_set_metadata(element_class, data->info.longname, data->info.is_sink ? "Sink/Network/Video" : "Filter/Effect/Video",
                                   data->info.description, "StreamLens");
    gst_element_class_add_pad_template(element_class,
        gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, data->sink_caps));
    if (!data->info.is_sink) gst_element_class_add_pad_template(element_class,
        gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS,
                             data->info.caps_passthrough ? data->sink_caps : GST_CAPS_ANY));
}

void sl_registry_forget_plugin(const char *name) {
    GstRegistry *registry = gst_registry_get();
    GstPlugin *plugin = gst_registry_find_plugin(registry, name);
    if (!plugin) return;
    gst_registry_remove_plugin(registry, plugin);
    gst_object_unref(plugin);
}

gboolean sl_stage_register(const SLStageInfo *info, GstPlugin *plugin) {
    if (!sl_stage_quark) sl_stage_quark = g_quark_from_static_string("streamlens-stage");
    // "GstLenspass": GStreamer names instances after the type minus "Gst", so the first
    // lenspass in a pipeline is "lenspass0", as users expect from gst-launch.
    char *type_name = g_strdup_printf("Gst%c%s", g_ascii_toupper(info->name[0]), info->name + 1);
    GType type = g_type_from_name(type_name);
    if (!type) {
        SLStageClassData *data = g_new0(SLStageClassData, 1);
        data->info = *info;
        data->info.name = g_strdup(info->name);
        data->info.longname = g_strdup(info->longname);
        data->info.description = g_strdup(info->description);
        data->info.sink_caps = g_strdup(info->sink_caps);
        SLPropSpec *props = g_new0(SLPropSpec, info->n_props);
        for (guint i = 0; i < info->n_props; i++) {
            props[i] = info->props[i];
            props[i].name = g_intern_string(info->props[i].name);
            props[i].blurb = g_intern_string(info->props[i].blurb);
            props[i].default_string = info->props[i].default_string ? g_strdup(info->props[i].default_string) : NULL;
        }
        data->info.props = props;
        data->sink_caps = gst_caps_from_string(info->sink_caps);
        if (!data->sink_caps) { g_free(type_name); return FALSE; }
        GTypeInfo type_info = {
            .class_size = sizeof(SLStageClass), .class_init = sl_class_init, .class_data = data,
            .instance_size = sizeof(SLStage), .instance_init = sl_instance_init,
        };
        type = g_type_register_static(GST_TYPE_BIN, type_name, &type_info, 0);
        g_type_set_qdata(type, sl_stage_quark, GINT_TO_POINTER(1));
    }
    g_free(type_name);
    return gst_element_register(plugin, info->name, GST_RANK_NONE, type);
}

GstAppSink *sl_stage_appsink(GstElement *stage) { return GST_APP_SINK(((SLStage *)stage)->appsink); }
GstAppSrc *sl_stage_appsrc(GstElement *stage) {
    SLStage *self = (SLStage *)stage;
    return self->appsrc ? GST_APP_SRC(self->appsrc) : NULL;
}

void sl_stage_set_context(GstElement *stage, gpointer context, GDestroyNotify release) {
    SLStage *self = (SLStage *)stage;
    pthread_mutex_lock(&self->lock);
    gpointer old = self->context; GDestroyNotify old_release = self->release;
    self->context = context; self->release = release;
    pthread_mutex_unlock(&self->lock);
    if (old && old_release) old_release(old);
}

gpointer sl_stage_get_context(GstElement *stage) {
    SLStage *self = (SLStage *)stage;
    pthread_mutex_lock(&self->lock);
    gpointer context = self->context;
    pthread_mutex_unlock(&self->lock);
    return context;
}

#define SL_VALUE_GETTER(ret, name, getter) \
    ret name(GstElement *stage, guint index) { \
        SLStage *self = (SLStage *)stage; \
        if (index >= self->n_values) return 0; \
        pthread_mutex_lock(&self->lock); \
        ret value = getter(&self->values[index]); \
        pthread_mutex_unlock(&self->lock); \
        return value; \
    }
SL_VALUE_GETTER(gboolean, sl_stage_get_bool, g_value_get_boolean)
SL_VALUE_GETTER(gint64, sl_stage_get_int, g_value_get_int)
SL_VALUE_GETTER(double, sl_stage_get_double, g_value_get_double)
SL_VALUE_GETTER(char *, sl_stage_dup_string, g_value_dup_string)

gboolean sl_stage_internals_intact(GstElement *stage) {
    SLStage *self = (SLStage *)stage;
    gboolean live = FALSE, block = FALSE, async = TRUE, sync = TRUE, emit = TRUE;
    GstFormat format = GST_FORMAT_UNDEFINED;
    g_object_get(self->appsink, "async", &async, "sync", &sync, "emit-signals", &emit, NULL);
    if (!self->appsrc) return !async && !sync && !emit;
    g_object_get(self->appsrc, "is-live", &live, "block", &block, "format", &format, NULL);
    return live && block && format == GST_FORMAT_TIME && !async && !sync && !emit;
}

void sl_stage_configure_queue(GstElement *stage, gboolean live) {
    SLStage *self = (SLStage *)stage;
    g_object_set(self->appsink, "max-buffers", live ? 1 : SL_LOSSLESS_QUEUE, "drop", live, NULL);
}

void sl_stage_set_latency(GstElement *stage, GstClockTime latency) {
    __atomic_store_n(&((SLStage *)stage)->latency, latency, __ATOMIC_RELAXED);
}

gboolean sl_stage_upstream_is_live(GstElement *stage) {
    SLStage *self = (SLStage *)stage;
    GstPad *inner = gst_element_get_static_pad(self->appsink, "sink");
    GstQuery *query = gst_query_new_latency();
    gboolean live = FALSE;
    if (gst_pad_peer_query(inner, query)) gst_query_parse_latency(query, &live, NULL, NULL);
    gst_query_unref(query);
    gst_object_unref(inner);
    return live;
}

guint64 sl_stage_buffers_arrived(GstElement *stage) {
    return __atomic_load_n(&((SLStage *)stage)->arrived, __ATOMIC_RELAXED);
}

guint64 sl_stage_buffers_refused(GstElement *stage) {
    return __atomic_load_n(&((SLStage *)stage)->refused, __ATOMIC_RELAXED);
}
