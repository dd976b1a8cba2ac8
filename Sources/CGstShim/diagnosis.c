// Negotiation diagnosis: see the "negotiation diagnosis" section of include/streamlens_gst.h.
// C because it walks GstStructure fields and GValue lists (macros) and the element registry.
#include "streamlens_gst.h"
#include <string.h>

GstElement *sl_pipeline_parse_keeping_elements(const char *description, GError **error) {
    GstElement *element = gst_parse_launch_full(description, NULL, GST_PARSE_FLAG_NONE, error);
    if (!element) return NULL;
    gst_object_ref_sink(element); // a floating reference
    if (GST_IS_PIPELINE(element)) return element;
    GstElement *pipeline = gst_pipeline_new(NULL);
    gst_object_ref_sink(pipeline);
    gst_bin_add(GST_BIN(pipeline), element);
    gst_object_unref(element);
    return pipeline;
}

// ---- describing caps ---------------------------------------------------------------------

// Adds each string of a "format" field (a string or a list of strings) to `formats`, once.
static void sl_collect_strings(const GValue *value, GPtrArray *formats) {
    if (!value) return;
    if (G_VALUE_HOLDS_STRING(value)) {
        const char *s = g_value_get_string(value);
        for (guint i = 0; i < formats->len; i++) if (strcmp(formats->pdata[i], s) == 0) return;
        g_ptr_array_add(formats, (gpointer)s);
    } else if (GST_VALUE_HOLDS_LIST(value)) {
        for (guint i = 0; i < gst_value_list_get_size(value); i++) sl_collect_strings(gst_value_list_get_value(value, i), formats);
    }
}

// A fixed int field, the same in every structure of that name; -1 otherwise.
static gint sl_common_int(const GstCaps *caps, const char *name, const char *field) {
    gint result = -1;
    for (guint i = 0; i < gst_caps_get_size(caps); i++) {
        const GstStructure *s = gst_caps_get_structure(caps, i);
        if (!gst_structure_has_name(s, name)) continue;
        const GValue *v = gst_structure_get_value(s, field);
        if (!v || !G_VALUE_HOLDS_INT(v)) return -1;
        gint x = g_value_get_int(v);
        if (result >= 0 && result != x) return -1;
        result = x;
    }
    return result;
}

static gboolean sl_common_fraction(const GstCaps *caps, const char *name, const char *field, gint *num, gint *den) {
    gboolean found = FALSE;
    for (guint i = 0; i < gst_caps_get_size(caps); i++) {
        const GstStructure *s = gst_caps_get_structure(caps, i);
        if (!gst_structure_has_name(s, name)) continue;
        const GValue *v = gst_structure_get_value(s, field);
        if (!v || !GST_VALUE_HOLDS_FRACTION(v)) return FALSE;
        gint n = gst_value_get_fraction_numerator(v), d = gst_value_get_fraction_denominator(v);
        if (found && (n != *num || d != *den)) return FALSE;
        *num = n; *den = d; found = TRUE;
    }
    return found;
}

// Structures in system memory only, unless there are none (GL, DMABuf… would double every line).
static gboolean sl_use_structure(const GstCaps *caps, guint i, gboolean any_system) {
    GstCapsFeatures *f = gst_caps_get_features(caps, i);
    gboolean system = !f || gst_caps_features_is_equal(f, GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY);
    return system || !any_system;
}

char *sl_caps_describe(const GstCaps *caps) {
    if (!caps || gst_caps_is_empty(caps)) return g_strdup("nothing");
    if (gst_caps_is_any(caps)) return g_strdup("anything");
    guint n = gst_caps_get_size(caps);
    gboolean any_system = FALSE;
    for (guint i = 0; i < n; i++) {
        GstCapsFeatures *f = gst_caps_get_features(caps, i);
        if (!f || gst_caps_features_is_equal(f, GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY)) any_system = TRUE;
    }
    GPtrArray *names = g_ptr_array_new();
    for (guint i = 0; i < n; i++) {
        if (!sl_use_structure(caps, i, any_system)) continue;
        const char *name = gst_structure_get_name(gst_caps_get_structure(caps, i));
        gboolean seen = FALSE;
        for (guint j = 0; j < names->len; j++) seen |= strcmp(names->pdata[j], name) == 0;
        if (!seen) g_ptr_array_add(names, (gpointer)name);
    }
    GString *out = g_string_new(NULL);
    const guint shown = MIN(names->len, 4);
    for (guint k = 0; k < shown; k++) {
        const char *name = names->pdata[k];
        if (k > 0) g_string_append(out, k + 1 == shown && shown == names->len ? " or " : ", ");
        g_string_append(out, name);
        GPtrArray *formats = g_ptr_array_new();
        gboolean every_structure_has_format = TRUE;
        for (guint i = 0; i < n; i++) {
            const GstStructure *s = gst_caps_get_structure(caps, i);
            if (!sl_use_structure(caps, i, any_system) || !gst_structure_has_name(s, name)) continue;
            const GValue *v = gst_structure_get_value(s, "format");
            if (!v) every_structure_has_format = FALSE;
            sl_collect_strings(v, formats);
        }
        // A structure without a format field takes any format: listing the others would mislead.
        if (every_structure_has_format && formats->len > 0) {
            if (formats->len == 1) {
                g_string_append_printf(out, " %s", (const char *)formats->pdata[0]);
            } else if (formats->len <= 8) {
                g_string_append(out, " {");
                for (guint j = 0; j < formats->len; j++) g_string_append_printf(out, "%s%s", j ? ", " : "", (const char *)formats->pdata[j]);
                g_string_append(out, "}");
            } else {
                g_string_append_printf(out, " (any of %u formats)", formats->len);
            }
        }
        g_ptr_array_free(formats, TRUE);
        gint w = sl_common_int(caps, name, "width"), h = sl_common_int(caps, name, "height");
        if (w > 0 && h > 0) g_string_append_printf(out, " %dx%d", w, h);
        gint num = 0, den = 1;
        if (sl_common_fraction(caps, name, "framerate", &num, &den) && num > 0) {
            if (den == 1) g_string_append_printf(out, " %d fps", num);
            else g_string_append_printf(out, " %d/%d fps", num, den);
        }
        gint rate = sl_common_int(caps, name, "rate"), channels = sl_common_int(caps, name, "channels");
        if (rate > 0) g_string_append_printf(out, " %d Hz", rate);
        if (channels > 0) g_string_append_printf(out, " %d channel%s", channels, channels == 1 ? "" : "s");
    }
    if (names->len > shown) g_string_append_printf(out, " or %u other types", names->len - shown);
    g_ptr_array_free(names, TRUE);
    return g_string_free(out, FALSE);
}


static const char *sl_structure_kind(const GstStructure *s) {
    const char *name = gst_structure_get_name(s);
    if (g_str_has_prefix(name, "video/")) return "video";
    if (g_str_has_prefix(name, "audio/")) return "audio";
    if (g_str_has_prefix(name, "image/")) return "image";
    return "data";
}

GstCaps *sl_caps_of_kind(const GstCaps *caps, const char *kind) {
    if (!kind || !*kind || gst_caps_is_any(caps)) return gst_caps_copy(caps);
    GstCaps *result = gst_caps_new_empty();
    for (guint i = 0; i < gst_caps_get_size(caps); i++) {
        const char *k = sl_structure_kind(gst_caps_get_structure(caps, i));
        // Images are pictures too: a video link may end in an image encoder's caps.
        gboolean same = strcmp(k, kind) == 0 || (strcmp(kind, "video") == 0 && strcmp(k, "image") == 0);
        if (!same) continue;
        GstCapsFeatures *f = gst_caps_get_features(caps, i);
        gst_caps_append_structure_full(result, gst_structure_copy(gst_caps_get_structure(caps, i)), f ? gst_caps_features_copy(f) : NULL);
    }
    if (gst_caps_is_empty(result)) {
        gst_caps_unref(result);
        return gst_caps_copy(caps);
    }
    return result;
}

const char *sl_caps_media_kind(const GstCaps *caps) {
    if (!caps || gst_caps_is_any(caps) || gst_caps_is_empty(caps)) return "";
    return sl_structure_kind(gst_caps_get_structure(caps, 0));
}

// ---- facts for the advice on a link (the advice itself: CapsAdvice.swift) -----------------

guint sl_caps_classes(const GstCaps *caps) {
    if (!caps || gst_caps_is_any(caps)) return SL_CAPS_RAW_VIDEO | SL_CAPS_RAW_AUDIO | SL_CAPS_CODED_VIDEO | SL_CAPS_CODED_AUDIO | SL_CAPS_OTHER;
    guint classes = 0;
    for (guint i = 0; i < gst_caps_get_size(caps); i++) {
        const char *name = gst_structure_get_name(gst_caps_get_structure(caps, i));
        if (strcmp(name, "video/x-raw") == 0) classes |= SL_CAPS_RAW_VIDEO;
        else if (strcmp(name, "audio/x-raw") == 0) classes |= SL_CAPS_RAW_AUDIO;
        else if (g_str_has_prefix(name, "video/") || g_str_has_prefix(name, "image/")) classes |= SL_CAPS_CODED_VIDEO;
        else if (g_str_has_prefix(name, "audio/")) classes |= SL_CAPS_CODED_AUDIO;
        else classes |= SL_CAPS_OTHER;
    }
    return classes;
}

// A copy of the caps without the fields named in `fields` (comma-separated).
static GstCaps *sl_caps_without(const GstCaps *caps, char **fields) {
    GstCaps *copy = gst_caps_copy(caps);
    for (guint i = 0; i < gst_caps_get_size(copy); i++) {
        GstStructure *s = gst_caps_get_structure(copy, i);
        for (char **f = fields; *f; f++) gst_structure_remove_field(s, *f);
    }
    return copy;
}

gboolean sl_caps_meet_without(const GstCaps *a, const GstCaps *b, const char *fields) {
    if (!a || !b) return FALSE;
    char **names = g_strsplit(fields ? fields : "", ",", -1);
    GstCaps *x = sl_caps_without(a, names), *y = sl_caps_without(b, names);
    gboolean meet = gst_caps_can_intersect(x, y);
    gst_caps_unref(x);
    gst_caps_unref(y);
    g_strfreev(names);
    return meet;
}

char *sl_encoder_making(const GstCaps *wants, gboolean video) {
    if (!wants || gst_caps_is_empty(wants)) return NULL;
    GList *encoders = gst_element_factory_list_get_elements(
        GST_ELEMENT_FACTORY_TYPE_ENCODER | (video ? GST_ELEMENT_FACTORY_TYPE_MEDIA_VIDEO | GST_ELEMENT_FACTORY_TYPE_MEDIA_IMAGE
                                                  : GST_ELEMENT_FACTORY_TYPE_MEDIA_AUDIO),
        GST_RANK_MARGINAL);
    encoders = g_list_sort(encoders, gst_plugin_feature_rank_compare_func);
    char *result = NULL;
    for (GList *l = encoders; l && !result; l = l->next) {
        GstElementFactory *factory = l->data;
        for (const GList *t = gst_element_factory_get_static_pad_templates(factory); t && !result; t = t->next) {
            GstStaticPadTemplate *tmpl = t->data;
            if (tmpl->direction != GST_PAD_SRC) continue;
            GstCaps *caps = gst_static_caps_get(&tmpl->static_caps);
            if (gst_caps_can_intersect(caps, wants)) result = g_strdup(GST_OBJECT_NAME(factory));
            gst_caps_unref(caps);
        }
    }
    gst_plugin_feature_list_free(encoders);
    return result;
}

// ---- pads and neighbours -------------------------------------------------------------------

// The caps of an element's pads on one side, merged: each pad's current caps, else what it can
// do; `unlinked_only`: only the pads linked to nothing. *any tells whether a pad was merged.
static GstCaps *merged_pad_caps(GstElement *element, GstPadDirection direction, gboolean unlinked_only, gboolean *any) {
    GstCaps *result = gst_caps_new_empty();
    *any = FALSE;
    GstIterator *it = direction == GST_PAD_SRC ? gst_element_iterate_src_pads(element) : gst_element_iterate_sink_pads(element);
    GValue value = G_VALUE_INIT;
    while (gst_iterator_next(it, &value) == GST_ITERATOR_OK) {
        GstPad *pad = g_value_get_object(&value);
        if (!unlinked_only || !gst_pad_is_linked(pad)) {
            GstCaps *caps = gst_pad_get_current_caps(pad);
            if (!caps) caps = gst_pad_query_caps(pad, NULL);
            result = gst_caps_merge(result, caps);
            *any = TRUE;
        }
        g_value_reset(&value);
    }
    g_value_unset(&value);
    gst_iterator_free(it);
    return result;
}

GstCaps *sl_element_side_caps(GstElement *element, GstPadDirection direction, gboolean unlinked_only) {
    gboolean any = FALSE;
    if (unlinked_only) {
        // Pads linked to nothing; none → all pads.
        GstCaps *unlinked = merged_pad_caps(element, direction, TRUE, &any);
        if (any) return unlinked;
        gst_caps_unref(unlinked);
    }
    GstCaps *result = merged_pad_caps(element, direction, FALSE, &any);
    if (any) return result;
    for (const GList *l = gst_element_class_get_pad_template_list(GST_ELEMENT_GET_CLASS(element)); l; l = l->next) {
        GstPadTemplate *tmpl = l->data;
        if (GST_PAD_TEMPLATE_DIRECTION(tmpl) != direction) continue;
        result = gst_caps_merge(result, gst_pad_template_get_caps(tmpl));
    }
    return result;
}

static GQuark sl_offered_quark;

static GstPadProbeReturn sl_record_offered_caps(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    (void)pad;
    GstElement *stage = data;
    GstCaps *caps = NULL;
    if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM) {
        // A decoder asks ACCEPT_CAPS with the format it must give before it sends any caps.
        GstQuery *query = GST_PAD_PROBE_INFO_QUERY(info);
        if (GST_QUERY_TYPE(query) != GST_QUERY_ACCEPT_CAPS) return GST_PAD_PROBE_OK;
        gst_query_parse_accept_caps(query, &caps);
    } else {
        GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
        if (GST_EVENT_TYPE(event) != GST_EVENT_CAPS) return GST_PAD_PROBE_OK;
        gst_event_parse_caps(event, &caps);
    }
    if (!caps) return GST_PAD_PROBE_OK;
    GST_OBJECT_LOCK(stage);
    g_object_set_qdata_full(G_OBJECT(stage), sl_offered_quark, gst_caps_ref(caps), (GDestroyNotify)gst_caps_unref);
    GST_OBJECT_UNLOCK(stage);
    return GST_PAD_PROBE_OK;
}

void sl_stage_watch_offered_caps(GstElement *stage) {
    if (!sl_offered_quark) sl_offered_quark = g_quark_from_static_string("streamlens-offered-caps");
    static GQuark watched;
    if (!watched) watched = g_quark_from_static_string("streamlens-offered-caps-watched");
    if (g_object_get_qdata(G_OBJECT(stage), watched)) return;
    g_object_set_qdata(G_OBJECT(stage), watched, GINT_TO_POINTER(1));
    GstPad *pad = gst_element_get_static_pad(stage, "sink");
    if (!pad) return;
    // On the outer (ghost) pad: its probes run before the pad checks the caps against what the
    // stage accepts, so refused caps are seen too.
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM | GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM, sl_record_offered_caps, stage, NULL);
    gst_object_unref(pad);
}

GstCaps *sl_stage_offered_caps(GstElement *stage) {
    if (!sl_offered_quark) return NULL;
    GST_OBJECT_LOCK(stage);
    GstCaps *caps = g_object_get_qdata(G_OBJECT(stage), sl_offered_quark);
    if (caps) gst_caps_ref(caps);
    GST_OBJECT_UNLOCK(stage);
    return caps;
}

gboolean sl_element_has_negotiated_sink_pad(GstElement *element) {
    gboolean found = FALSE;
    GST_OBJECT_LOCK(element);
    for (GList *l = element->sinkpads; l && !found; l = l->next) found = gst_pad_has_current_caps(GST_PAD(l->data));
    GST_OBJECT_UNLOCK(element);
    return found;
}

GstElement *sl_element_neighbour(GstElement *element, const char *pad_name) {
    GstPad *pad = gst_element_get_static_pad(element, pad_name);
    if (!pad) return NULL;
    GstPad *peer = gst_pad_get_peer(pad);
    gst_object_unref(pad);
    if (!peer) return NULL;
    // A ghost pad's inner proxy pad belongs to no element; its parent is the ghost pad.
    GstObject *parent = gst_object_get_parent(GST_OBJECT(peer));
    gst_object_unref(peer);
    while (parent && !GST_IS_ELEMENT(parent)) {
        GstObject *up = gst_object_get_parent(parent);
        gst_object_unref(parent);
        parent = up;
    }
    return parent ? GST_ELEMENT(parent) : NULL;
}

GList *sl_element_downstream_sinks(GstElement *element) {
    GList *sinks = NULL, *seen = NULL, *queue = g_list_append(NULL, gst_object_ref(element));
    while (queue) {
        GstElement *e = queue->data;
        queue = g_list_delete_link(queue, queue);
        if (e != element && GST_OBJECT_FLAG_IS_SET(e, GST_ELEMENT_FLAG_SINK) && !GST_IS_BIN(e)) {
            sinks = g_list_append(sinks, gst_object_ref(e));
        }
        GstIterator *it = gst_element_iterate_src_pads(e);
        GValue value = G_VALUE_INIT;
        while (gst_iterator_next(it, &value) == GST_ITERATOR_OK) {
            GstPad *peer = gst_pad_get_peer(g_value_get_object(&value));
            GstElement *next = peer ? gst_pad_get_parent_element(peer) : NULL;
            if (peer) gst_object_unref(peer);
            if (next && !g_list_find(seen, next)) {
                seen = g_list_append(seen, next);
                queue = g_list_append(queue, gst_object_ref(next));
            } else if (next) {
                gst_object_unref(next);
            }
            g_value_reset(&value);
        }
        g_value_unset(&value);
        gst_iterator_free(it);
        gst_object_unref(e);
    }
    g_list_free_full(seen, gst_object_unref);
    return sinks;
}

GstObject *sl_message_forwarded_eos_source(GstMessage *message) {
    if (GST_MESSAGE_TYPE(message) != GST_MESSAGE_ELEMENT) return NULL;
    const GstStructure *s = gst_message_get_structure(message);
    if (!s || !gst_structure_has_name(s, "GstBinForwarded")) return NULL;
    GstMessage *inner = NULL;
    if (!gst_structure_get(s, "message", GST_TYPE_MESSAGE, &inner, NULL) || !inner) return NULL;
    GstObject *source = GST_MESSAGE_TYPE(inner) == GST_MESSAGE_EOS && GST_MESSAGE_SRC(inner) ? gst_object_ref(GST_MESSAGE_SRC(inner)) : NULL;
    gst_message_unref(inner);
    return source;
}
