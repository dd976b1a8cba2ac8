// See include/streamlens_gst.h, "Stage elements": the GObject type that makes a Swift stage a
// GStreamer element (class and instance, properties, state changes, registration, the Swift
// side's context). What its pads answer is in stage_pads.c; its source restart in stage_restart.c.
#include "shim_private.h"

typedef struct {
    SLStageInfo info;   // deep copy, kept for the life of the process (types are never unloaded)
    GstCaps *sink_caps;
    GstCaps *audio_caps;  // NULL: no audio input
} SLStageClassData;

typedef struct {
    GstBinClass parent_class;
    SLStageClassData *data;
} SLStageClass;

static SLStageCallbacks sl_callbacks;
static GstElementClass *sl_bin_class;    // every stage type derives from GstBin directly
static GQuark sl_stage_quark;

void sl_stage_set_callbacks(SLStageCallbacks callbacks) { sl_callbacks = callbacks; }

GstFlowReturn sl_stage_frame_arrived(GstElement *stage) {
    return sl_callbacks.frame_arrived ? sl_callbacks.frame_arrived(stage) : GST_FLOW_OK;
}

void sl_stage_audio_arrived(GstElement *stage, GstSample *sample) {
    if (sl_callbacks.audio_arrived) sl_callbacks.audio_arrived(stage, sample);
}

void sl_stage_audio_ended(GstElement *stage) {
    if (sl_callbacks.audio_ended) sl_callbacks.audio_ended(stage);
}

gboolean sl_is_stage(GstElement *element) {
    return element && sl_stage_quark && g_type_get_qdata(G_OBJECT_TYPE(element), sl_stage_quark) != NULL;
}

static SLStageClass *sl_class_of(gpointer instance) { return (SLStageClass *)G_OBJECT_GET_CLASS(instance); }

static void sl_set_property(GObject *object, guint id, const GValue *value, GParamSpec *pspec) {
    SLStage *self = (SLStage *)object;
    guint index = id - 1;
    if (index >= self->n_values) { G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec); return; }
    // A reading is the stage's to publish. It is declared writable so that a spec setting it
    // (`lenszone counts=5`) reaches here instead of a GLib critical that gst_parse ignores; the
    // stage then refuses to start, naming it (sl_change_state).
    if (sl_class_of(object)->data->info.props[index].read_only) { self->reading_set = index + 1; return; }
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
    for (guint i = 0; i < self->n_values; i++) g_value_unset(&self->values[i]);
    g_free(self->values);
    pthread_mutex_destroy(&self->lock);
    G_OBJECT_CLASS(sl_bin_class)->finalize(object);
}

static GstStateChangeReturn sl_change_state(GstElement *element, GstStateChange transition) {
    SLStage *self = (SLStage *)element;
    GstStateChangeReturn ret = sl_bin_class->change_state(element, transition);
    if (ret == GST_STATE_CHANGE_FAILURE) return ret;
    switch (transition) {
    case GST_STATE_CHANGE_READY_TO_PAUSED:
        if (self->reading_set) {
            char *text = g_strdup_printf("property %s is a reading the stage publishes (get %s %s on the control channel); it cannot be set",
                                         sl_class_of(element)->data->info.props[self->reading_set - 1].name, GST_OBJECT_NAME(element),
                                         sl_class_of(element)->data->info.props[self->reading_set - 1].name);
            sl_stage_post_error(element, text, NULL);
            g_free(text);
            return GST_STATE_CHANGE_FAILURE;
        }
        if (sl_callbacks.start && !sl_callbacks.start(element, sl_class_of(element)->data->info.type_id))
            return GST_STATE_CHANGE_FAILURE;
        break;
    case GST_STATE_CHANGE_PAUSED_TO_READY:
        if (sl_callbacks.stop) sl_callbacks.stop(element);
        break;
    default:
        break;
    }
    // A stage with an output is a live source to the pipeline (as its appsrc, is-live, was): in
    // PAUSED the pipeline does not wait for a frame to come through it (its input does not
    // preroll either, stage_sink.c), so a stage that takes its time on its first frame (a model
    // compiling) does not hold the pipeline's way to PLAYING.
    if (self->src && ret == GST_STATE_CHANGE_SUCCESS &&
        (transition == GST_STATE_CHANGE_READY_TO_PAUSED || transition == GST_STATE_CHANGE_PLAYING_TO_PAUSED))
        return GST_STATE_CHANGE_NO_PREROLL;
    return ret;
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

    // The pair is unlinked; the Swift worker carries frames across. The input is the project's
    // own sink (stage_sink.c: no reference kept to a frame once pulled, no clock sync, no
    // preroll wait), the output the project's own element (stage_src.c: frames pushed by the
    // thread that processed them, no queue, no thread of its own).
    self->sink = sl_stage_sink_new(data->sink_caps, SL_LOSSLESS_QUEUE);
    gst_bin_add(GST_BIN(self), self->sink);
    GstPad *sinkpad = gst_element_get_static_pad(self->sink, "sink");
    GstElementClass *klass = GST_ELEMENT_CLASS(g_class);
    self->sinkpad = gst_ghost_pad_new_from_template("sink", sinkpad, gst_element_class_get_pad_template(klass, "sink"));
    gst_pad_add_probe(sinkpad, GST_PAD_PROBE_TYPE_BUFFER, sl_count_buffer, self, NULL);
    gst_object_unref(sinkpad);
    if (data->info.caps_passthrough && !data->info.is_sink) gst_pad_set_query_function(self->sinkpad, sl_sink_query);
    gst_element_add_pad(GST_ELEMENT(self), self->sinkpad);
    if (data->audio_caps) {
        self->audiopad = sl_stage_audio_pad_new(gst_element_class_get_pad_template(klass, "audio"));
        gst_element_add_pad(GST_ELEMENT(self), self->audiopad);
    }
    // A sink stage ends the pipeline: the frames go wherever its worker sends them.
    if (data->info.is_sink) return;

    self->src = sl_stage_src_new();
    gst_bin_add(GST_BIN(self), self->src);
    GstPad *srcpad = gst_element_get_static_pad(self->src, "src");
    self->srcpad = gst_ghost_pad_new_from_template("src", srcpad, gst_element_class_get_pad_template(klass, "src"));
    gst_object_unref(srcpad);
    sinkpad = gst_element_get_static_pad(self->sink, "sink");
    gst_pad_add_probe(sinkpad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, sl_forward_tags, self, NULL);
    gst_object_unref(sinkpad);
    // A stage with an output is one of the pipeline's sources, as it was with appsrc inside: an
    // end-of-stream sent to the pipeline (Ctrl-C) reaches it (sl_send_event).
    GST_OBJECT_FLAG_SET(self, GST_ELEMENT_FLAG_SOURCE);
    gst_pad_set_query_function(self->srcpad, sl_src_query);
    gst_element_add_pad(GST_ELEMENT(self), self->srcpad);
}

// An EOS sent to the pipeline (Ctrl-C, a window closed) reaches every element flagged as a
// source — and a stage with an output is flagged so (sl_instance_init). Let through to its
// output, it would end the stream at once, before the frames the worker still held (waiting for
// their inference) were pushed: the last frames of a lossless run would be lost. Instead the first stage of a chain
// asks its worker to end: it delivers what it holds, ends its output, and refuses more input
// with EOS (upstream then stops, as for a sink that wanted N frames). A stage behind another
// stage ignores it: the EOS reaches it in the stream, behind the frames.
static gboolean sl_send_event(GstElement *element, GstEvent *event) {
    if (GST_EVENT_TYPE(event) != GST_EVENT_EOS) return GST_ELEMENT_CLASS(sl_bin_class)->send_event(element, event);
    gst_event_unref(event);
    if (!sl_stage_has_stage_upstream(element)) __atomic_store_n(&((SLStage *)element)->end_requested, 1, __ATOMIC_RELEASE);
    return TRUE;
}

gboolean sl_stage_end_requested(GstElement *stage) {
    return __atomic_load_n(&((SLStage *)stage)->end_requested, __ATOMIC_ACQUIRE) != 0;
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
    element_class->send_event = sl_send_event;

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
    if (data->audio_caps) gst_element_class_add_pad_template(element_class,
        gst_pad_template_new("audio", GST_PAD_SINK, GST_PAD_ALWAYS, data->audio_caps));
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
        data->info.audio_caps = info->audio_caps ? g_strdup(info->audio_caps) : NULL;
        data->sink_caps = gst_caps_from_string(info->sink_caps);
        if (!data->sink_caps) { g_free(type_name); return FALSE; }
        if (info->audio_caps && !(data->audio_caps = gst_caps_from_string(info->audio_caps))) { g_free(type_name); return FALSE; }
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

gboolean sl_stage_has_output(GstElement *stage) { return ((SLStage *)stage)->src != NULL; }

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

void sl_stage_publish_string(GstElement *stage, guint index, const char *value) {
    SLStage *self = (SLStage *)stage;
    if (index >= self->n_values || !G_VALUE_HOLDS_STRING(&self->values[index])) return;
    pthread_mutex_lock(&self->lock);
    g_value_set_string(&self->values[index], value);
    pthread_mutex_unlock(&self->lock);
}

gboolean sl_stage_internals_intact(GstElement *stage) {
    SLStage *self = (SLStage *)stage;
    gboolean async = TRUE, sync = TRUE;
    g_object_get(self->sink, "async", &async, "sync", &sync, NULL);
    return !async && !sync;
}

void sl_stage_configure_queue(GstElement *stage, guint frames, gboolean drop) {
    sl_stage_sink_configure(((SLStage *)stage)->sink, frames, drop);
}
