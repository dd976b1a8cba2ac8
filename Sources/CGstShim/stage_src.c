// See include/streamlens_gst.h, "The stage's output": the element inside a stage's bin that
// frames leave by, pushed downstream on the pushing thread itself (the stage's worker, or the
// upstream streaming thread when the stage runs in-line), with no queue and no thread of its own.
// It replaced appsrc, whose task thread cost every frame a hand-over (bench-bridge).
//
// The stream's sticky events are sent as a source sends them: stream-start once, then caps and
// segment before the first buffer and whenever they change; tags that reached the stage's input
// before the next buffer. Upstream events from downstream (seeks, QoS, navigation) stop here, as
// they stopped at appsrc. One thread pushes at a time (the Swift worker holds its stage's lock).
#include "shim_private.h"

typedef struct {
    GstElement parent;
    GstPad *srcpad;
    pthread_mutex_t lock;     // guards pending
    GList *pending;           // serialized events (tags) to send before the next buffer
    // Touched only by the pushing thread:
    gboolean started;         // stream-start sent
    GstCaps *caps;            // the caps sent last
    GstSegment segment;       // the segment sent last
    gboolean has_segment;
    gint pushed;              // frames downstream took since the stage started (atomic)
} SLStageSrc;

typedef struct {
    GstElementClass parent_class;
} SLStageSrcClass;

G_DEFINE_TYPE(SLStageSrc, sl_stage_src, GST_TYPE_ELEMENT)

static GstStaticPadTemplate sl_stage_src_template = GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);

// CAPS from downstream: the caps sent, once there are some (appsrc answered its caps too).
static gboolean sl_src_pad_query(GstPad *pad, GstObject *parent, GstQuery *query) {
    if (GST_QUERY_TYPE(query) == GST_QUERY_CAPS) {
        GstCaps *caps = gst_pad_get_current_caps(pad);
        if (caps) {
            GstCaps *filter = NULL;
            gst_query_parse_caps(query, &filter);
            GstCaps *result = filter ? gst_caps_intersect_full(filter, caps, GST_CAPS_INTERSECT_FIRST) : gst_caps_ref(caps);
            gst_query_set_caps_result(query, result);
            gst_caps_unref(result);
            gst_caps_unref(caps);
            return TRUE;
        }
    }
    return gst_pad_query_default(pad, parent, query);
}

// Events from downstream stop here; a RECONFIGURE is taken (nothing to renegotiate: the caps
// are upstream's).
static gboolean sl_src_pad_event(GstPad *pad, GstObject *parent, GstEvent *event) {
    (void)pad; (void)parent;
    gboolean taken = GST_EVENT_TYPE(event) == GST_EVENT_RECONFIGURE;
    gst_event_unref(event);
    return taken;
}

static void sl_forget(SLStageSrc *self) {
    self->started = FALSE;
    self->has_segment = FALSE;
    gst_caps_replace(&self->caps, NULL);
    pthread_mutex_lock(&self->lock);
    g_list_free_full(self->pending, (GDestroyNotify)gst_event_unref);
    self->pending = NULL;
    pthread_mutex_unlock(&self->lock);
}

static GstStateChangeReturn sl_stage_src_change_state(GstElement *element, GstStateChange transition) {
    GstStateChangeReturn ret = GST_ELEMENT_CLASS(sl_stage_src_parent_class)->change_state(element, transition);
    if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) sl_forget((SLStageSrc *)element);
    if (transition == GST_STATE_CHANGE_READY_TO_PAUSED) g_atomic_int_set(&((SLStageSrc *)element)->pushed, 0);
    return ret;
}

static void sl_stage_src_finalize(GObject *object) {
    SLStageSrc *self = (SLStageSrc *)object;
    sl_forget(self);
    pthread_mutex_destroy(&self->lock);
    G_OBJECT_CLASS(sl_stage_src_parent_class)->finalize(object);
}

static void sl_stage_src_class_init(SLStageSrcClass *klass) {
    G_OBJECT_CLASS(klass)->finalize = sl_stage_src_finalize;
    GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
    element_class->change_state = sl_stage_src_change_state;
    gst_element_class_add_static_pad_template(element_class, &sl_stage_src_template);
    gst_element_class_set_static_metadata(element_class, "StreamLens stage output", "Source/Video",
                                          "A stage's output: frames pushed downstream by the thread that processed them", "StreamLens");
}

static void sl_stage_src_init(SLStageSrc *self) {
    pthread_mutex_init(&self->lock, NULL);
    self->srcpad = gst_pad_new_from_static_template(&sl_stage_src_template, "src");
    gst_pad_set_query_function(self->srcpad, sl_src_pad_query);
    gst_pad_set_event_function(self->srcpad, sl_src_pad_event);
    gst_pad_use_fixed_caps(self->srcpad);
    gst_element_add_pad(GST_ELEMENT(self), self->srcpad);
}

GstElement *sl_stage_src_new(void) {
    return g_object_new(sl_stage_src_get_type(), "name", "stage_src", NULL);
}

static SLStageSrc *sl_src_of(GstElement *stage) { return (SLStageSrc *)((SLStage *)stage)->src; }

// Stream-start, once, before anything else is sent.
static void sl_begin(SLStageSrc *self) {
    if (!self->started) {
        gchar *id = gst_pad_create_stream_id(self->srcpad, GST_ELEMENT(self), NULL);
        gst_pad_push_event(self->srcpad, gst_event_new_stream_start(id));
        g_free(id);
        self->started = TRUE;
    }
}

static void sl_send_segment(SLStageSrc *self, const GstSegment *segment) {
    GstSegment wanted;
    if (segment) gst_segment_copy_into(segment, &wanted); else gst_segment_init(&wanted, GST_FORMAT_TIME);
    if (self->has_segment && (!segment || gst_segment_is_equal(&wanted, &self->segment))) return;
    gst_pad_push_event(self->srcpad, gst_event_new_segment(&wanted));
    self->segment = wanted;
    self->has_segment = TRUE;
}

static void sl_send_pending(SLStageSrc *self) {
    pthread_mutex_lock(&self->lock);
    GList *events = self->pending;
    self->pending = NULL;
    pthread_mutex_unlock(&self->lock);
    for (GList *l = events; l; l = l->next) gst_pad_push_event(self->srcpad, l->data);
    g_list_free(events);
}

GstFlowReturn sl_stage_push(GstElement *stage, GstBuffer *buffer, GstCaps *caps, const GstSegment *segment) {
    SLStageSrc *self = sl_src_of(stage);
    if (!self) { gst_buffer_unref(buffer); return GST_FLOW_ERROR; }
    sl_begin(self);
    if (caps && (!self->caps || !gst_caps_is_equal(caps, self->caps))) {
        gst_pad_push_event(self->srcpad, gst_event_new_caps(caps));
        gst_caps_replace(&self->caps, caps);
    }
    sl_send_segment(self, segment);
    sl_send_pending(self);
    GstFlowReturn flow = gst_pad_push(self->srcpad, buffer);
    if (flow == GST_FLOW_OK) g_atomic_int_inc(&self->pushed);
    return flow;
}

guint64 sl_stage_frames_pushed(GstElement *stage) {
    SLStageSrc *self = sl_src_of(stage);
    return self ? (guint64)g_atomic_int_get(&self->pushed) : 0;
}

void sl_stage_push_end_of_stream(GstElement *stage) {
    SLStageSrc *self = sl_src_of(stage);
    if (!self) return;
    sl_begin(self);
    sl_send_segment(self, NULL);
    sl_send_pending(self);
    gst_pad_push_event(self->srcpad, gst_event_new_eos());
}

void sl_stage_src_queue_event(GstElement *src, GstEvent *event) {
    SLStageSrc *self = (SLStageSrc *)src;
    pthread_mutex_lock(&self->lock);
    self->pending = g_list_append(self->pending, event);
    pthread_mutex_unlock(&self->lock);
}
