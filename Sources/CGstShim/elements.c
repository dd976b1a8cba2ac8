// See include/streamlens_gst.h, "Elements": type checks, names and small element helpers that
// Swift cannot write itself (a macro, a variadic function, a GstIterator callback). The rest of
// the module, one concern a file: buffers.c, messages.c, properties.c, preview_window.c,
// stage_element.c, stage_pads.c, stage_restart.c, regions.c, outputs.c, diagnosis.c.
#include "streamlens_gst.h"

gboolean sl_is_bin(GstElement *element) { return GST_IS_BIN(element); }
gboolean sl_is_element(gpointer object) { return GST_IS_ELEMENT(object); }
const char *sl_element_factory_name(GstElement *element) {
    GstElementFactory *factory = gst_element_get_factory(element);
    return factory ? GST_OBJECT_NAME(factory) : NULL;
}

const char *sl_element_klass(GstElement *element) {
    const char *klass = gst_element_class_get_metadata(GST_ELEMENT_GET_CLASS(element), GST_ELEMENT_METADATA_KLASS);
    return klass ? klass : "";
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

#define SL_ENDING_KEY "streamlens-ending"

void sl_pipeline_set_ending(GstElement *pipeline, gboolean ending) {
    g_object_set_data(G_OBJECT(pipeline), SL_ENDING_KEY, GINT_TO_POINTER(ending ? 1 : 0));
}

// The top-level bin holding `element` (or the element itself), with a reference.
static GstObject *sl_element_top(GstElement *element) {
    GstObject *top = gst_object_ref(GST_OBJECT(element));
    for (GstObject *parent; (parent = gst_object_get_parent(top)) != NULL;) {
        gst_object_unref(top);
        top = parent;
    }
    return top;
}

gboolean sl_element_pipeline_ending(GstElement *element) {
    GstObject *top = sl_element_top(element);
    gboolean ending = GPOINTER_TO_INT(g_object_get_data(G_OBJECT(top), SL_ENDING_KEY)) != 0;
    gst_object_unref(top);
    return ending;
}

#define SL_SOURCE_KEY "streamlens-source"

void sl_pipeline_set_source_name(GstElement *pipeline, const char *name) {
    g_object_set_data_full(G_OBJECT(pipeline), SL_SOURCE_KEY, g_strdup(name), g_free);
}

char *sl_element_pipeline_source_name(GstElement *element) {
    GstObject *top = sl_element_top(element);
    char *name = g_strdup(g_object_get_data(G_OBJECT(top), SL_SOURCE_KEY));
    gst_object_unref(top);
    return name;
}

#define SL_SHARED_KEY "streamlens-shared"

void *sl_element_pipeline_shared(GstElement *element, void *(*make)(void), void (*release)(void *)) {
    GstObject *top = sl_element_top(element);
    GST_OBJECT_LOCK(top);
    void *shared = g_object_get_data(G_OBJECT(top), SL_SHARED_KEY);
    if (!shared) {
        shared = make();
        g_object_set_data_full(G_OBJECT(top), SL_SHARED_KEY, shared, release);
    }
    GST_OBJECT_UNLOCK(top);
    gst_object_unref(top);
    return shared;
}
