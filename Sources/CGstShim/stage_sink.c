// See include/streamlens_gst.h, "The stage's input": the sink inside a stage's bin, a GstBaseSink
// of the project's own feeding a bounded queue the Swift worker pulls from.
//
// Why not appsink: GStreamer 1.22's appsink keeps the buffer it handed out in its own sample
// until the next pull, so every stage that wrote into a frame found it shared and copied it (and
// the upstream pool, its buffer still held, allocated another). Here a pulled frame is the
// worker's alone: a sample made for it, holding the only reference to the buffer. What appsink
// did and the bridge relies on is kept: GstBaseSink's event ordering, EOS message, flushing and
// state changes; caps and segments in stream order with the buffers; a bounded queue that makes
// upstream wait (lossless) or drops its oldest frame (live). Buffers bypass GstBaseSink
// (sl_chain): it has nothing to do for them here (no sync, no preroll, no last sample).
#include "shim_private.h"
#include <gst/base/gstbasesink.h>
#include <time.h>

typedef struct {
    GstBaseSink parent;
    pthread_mutex_t lock;
    pthread_cond_t changed;   // an item came, room was made, or the sink was unlocked or stopped
    pthread_cond_t ended;     // end-of-stream came, or the sink stopped (sl_stage_wait_input_end)
    GQueue items;             // GstBuffer, GstCaps or a SEGMENT GstEvent, in stream order
    guint buffers;            // GstBuffers among the items
    guint max_buffers;
    gboolean drop;            // full: drop the oldest frame (live) instead of making upstream wait
    gboolean started;
    gboolean eos;             // end-of-stream received: pulls end once the queue is empty
    gboolean in_line;         // frames taken on the upstream streaming thread (sl_stage_set_in_line)
    GstCaps *accepted;        // what the stage takes (its template caps)
    GstCaps *caps;            // the caps and segment of the next frame pulled (items applied as pulled)
    GstSegment segment;
} SLStageSink;

typedef struct {
    GstBaseSinkClass parent_class;
} SLStageSinkClass;

G_DEFINE_TYPE(SLStageSink, sl_stage_sink, GST_TYPE_BASE_SINK)

static GstStaticPadTemplate sl_stage_sink_template = GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);

// Applies a caps or segment item to what the next pulled frame carries; frees the item.
static void sl_apply_item(SLStageSink *self, GstMiniObject *item) {
    if (GST_IS_CAPS(item)) {
        gst_caps_replace(&self->caps, GST_CAPS_CAST(item));
    } else if (GST_IS_EVENT(item) && GST_EVENT_TYPE(item) == GST_EVENT_SEGMENT) {
        const GstSegment *segment = NULL;
        gst_event_parse_segment(GST_EVENT_CAST(item), &segment);
        gst_segment_copy_into(segment, &self->segment);
    }
    gst_mini_object_unref(item);
}

// The oldest buffer, the caps and segments before it applied; NULL when none is queued. Locked.
static GstBuffer *sl_take_oldest(SLStageSink *self) {
    if (self->buffers == 0) return NULL;
    GstMiniObject *item;
    while ((item = g_queue_pop_head(&self->items))) {
        if (GST_IS_BUFFER(item)) {
            self->buffers--;
            pthread_cond_broadcast(&self->changed);
            return GST_BUFFER_CAST(item);
        }
        sl_apply_item(self, item);
    }
    return NULL;
}

// The sample of a frame taken from the queue (lock held): its caps and segment as they stood
// for it, and the only reference to the buffer, so the stage writes into it without a copy.
static GstSample *sl_sample_of(SLStageSink *self, GstBuffer *buffer) {
    GstSample *sample = gst_sample_new(buffer, self->caps, &self->segment, NULL);
    gst_buffer_unref(buffer);
    return sample;
}

static void sl_clear(SLStageSink *self) {
    GstMiniObject *item;
    while ((item = g_queue_pop_head(&self->items))) gst_mini_object_unref(item);
    self->buffers = 0;
    pthread_cond_broadcast(&self->changed);
}

static void sl_push_item(SLStageSink *self, GstMiniObject *item) {
    pthread_mutex_lock(&self->lock);
    g_queue_push_tail(&self->items, item);
    if (GST_IS_BUFFER(item)) self->buffers++;
    pthread_cond_broadcast(&self->changed);
    pthread_mutex_unlock(&self->lock);
}

// The sink pad's chain function, in place of GstBaseSink's: the buffer is taken (its reference
// is the queue's, none stays with the element), so the worker's pulled frame is nobody else's.
// GstBaseSink's render path would unref its own reference only after render returned, while the
// worker may already have pulled the frame. No clock sync and no preroll here: the stage is
// live, and the pipeline's state changes do not wait for the stage (as appsink's async=false):
// the stage's output sends its frames on, where downstream prerolls.
static GstFlowReturn sl_chain(GstPad *pad, GstObject *parent, GstBuffer *buffer) {
    SLStageSink *self = (SLStageSink *)parent;
    pthread_mutex_lock(&self->lock);
    GstFlowReturn flow = GST_FLOW_OK;
    for (;;) {
        // Flushing (a FLUSH_START, or the pad deactivated on the way to READY): GstBaseSink
        // calls unlock, which wakes this wait.
        if (GST_PAD_IS_FLUSHING(pad)) { flow = GST_FLOW_FLUSHING; break; }
        if (self->eos) { flow = GST_FLOW_EOS; break; }
        if (self->buffers < self->max_buffers) break;
        if (self->drop) {
            // The newest frame wins: the oldest goes (live mode; counted by the host as arrivals
            // never pulled).
            GstBuffer *old = sl_take_oldest(self);
            if (old) gst_buffer_unref(old);
            continue;
        }
        pthread_cond_wait(&self->changed, &self->lock);
    }
    gboolean in_line = self->in_line;
    if (flow == GST_FLOW_OK) {
        g_queue_push_tail(&self->items, buffer);
        self->buffers++;
        if (!in_line) pthread_cond_broadcast(&self->changed);
    }
    pthread_mutex_unlock(&self->lock);
    if (flow != GST_FLOW_OK) {
        gst_buffer_unref(buffer);
        return flow;
    }
    // A stage running in-line takes the frame now, on this thread (sl_stage_take).
    GstElement *stage = GST_ELEMENT_PARENT(self);
    return in_line && stage ? sl_stage_frame_arrived(stage) : GST_FLOW_OK;
}

static gboolean sl_set_caps(GstBaseSink *sink, GstCaps *caps) {
    sl_push_item((SLStageSink *)sink, GST_MINI_OBJECT_CAST(gst_caps_ref(caps)));
    return TRUE;
}

static GstCaps *sl_get_caps(GstBaseSink *sink, GstCaps *filter) {
    SLStageSink *self = (SLStageSink *)sink;
    if (!self->accepted) return filter ? gst_caps_ref(filter) : gst_caps_new_any();
    return filter ? gst_caps_intersect_full(filter, self->accepted, GST_CAPS_INTERSECT_FIRST) : gst_caps_ref(self->accepted);
}

static gboolean sl_event(GstBaseSink *sink, GstEvent *event) {
    SLStageSink *self = (SLStageSink *)sink;
    switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_SEGMENT:
        sl_push_item(self, GST_MINI_OBJECT_CAST(gst_event_ref(event)));
        break;
    case GST_EVENT_EOS:
        pthread_mutex_lock(&self->lock);
        self->eos = TRUE;
        pthread_cond_broadcast(&self->changed);
        pthread_cond_broadcast(&self->ended);
        pthread_mutex_unlock(&self->lock);
        break;
    case GST_EVENT_FLUSH_START:
    case GST_EVENT_FLUSH_STOP:
        pthread_mutex_lock(&self->lock);
        sl_clear(self);
        self->eos = FALSE;
        pthread_mutex_unlock(&self->lock);
        break;
    default:
        break;
    }
    return GST_BASE_SINK_CLASS(sl_stage_sink_parent_class)->event(sink, event);
}

// GstBaseSink's way of waking a streaming thread blocked in the element (flushing, leaving
// PLAYING, stopping): the chain function looks again at the pad's flushing flag.
static gboolean sl_unlock(GstBaseSink *sink) {
    SLStageSink *self = (SLStageSink *)sink;
    pthread_mutex_lock(&self->lock);
    pthread_cond_broadcast(&self->changed);
    pthread_mutex_unlock(&self->lock);
    return TRUE;
}

// Starting (READY→PAUSED): no end-of-stream yet, a TIME segment until one comes. Stopping:
// the queue emptied (a pull returns at once), the caps forgotten.
static gboolean sl_set_running(GstBaseSink *sink, gboolean running) {
    SLStageSink *self = (SLStageSink *)sink;
    pthread_mutex_lock(&self->lock);
    self->started = running;
    if (running) {
        self->eos = FALSE;
        gst_segment_init(&self->segment, GST_FORMAT_TIME);
    } else {
        sl_clear(self);
        self->in_line = FALSE;
        gst_caps_replace(&self->caps, NULL);
        pthread_cond_broadcast(&self->ended);
    }
    pthread_mutex_unlock(&self->lock);
    return TRUE;
}

static gboolean sl_start(GstBaseSink *sink) { return sl_set_running(sink, TRUE); }
static gboolean sl_stop(GstBaseSink *sink) { return sl_set_running(sink, FALSE); }

static void sl_stage_sink_finalize(GObject *object) {
    SLStageSink *self = (SLStageSink *)object;
    sl_clear(self);
    gst_caps_replace(&self->caps, NULL);
    gst_caps_replace(&self->accepted, NULL);
    pthread_cond_destroy(&self->changed);
    pthread_cond_destroy(&self->ended);
    pthread_mutex_destroy(&self->lock);
    G_OBJECT_CLASS(sl_stage_sink_parent_class)->finalize(object);
}

static void sl_stage_sink_class_init(SLStageSinkClass *klass) {
    G_OBJECT_CLASS(klass)->finalize = sl_stage_sink_finalize;
    GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
    gst_element_class_add_static_pad_template(element_class, &sl_stage_sink_template);
    gst_element_class_set_static_metadata(element_class, "StreamLens stage input", "Sink/Video",
                                          "A stage's input: frames queued for its worker, no reference kept once pulled", "StreamLens");
    GstBaseSinkClass *base = GST_BASE_SINK_CLASS(klass);
    base->set_caps = sl_set_caps;
    base->get_caps = sl_get_caps;
    base->event = sl_event;
    base->unlock = sl_unlock;
    base->start = sl_start;
    base->stop = sl_stop;
}

static void sl_stage_sink_init(SLStageSink *self) {
    pthread_mutex_init(&self->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&self->changed, &attr);
    pthread_cond_init(&self->ended, &attr);
    pthread_condattr_destroy(&attr);
    g_queue_init(&self->items);
    self->max_buffers = 1;
    gst_segment_init(&self->segment, GST_FORMAT_TIME);
    // No clock sync (real sinks downstream sync), no QoS, no preroll wait for the pipeline's
    // state changes (the sinks downstream preroll), no last-sample reference.
    gst_base_sink_set_sync(GST_BASE_SINK(self), FALSE);
    gst_base_sink_set_async_enabled(GST_BASE_SINK(self), FALSE);
    gst_base_sink_set_qos_enabled(GST_BASE_SINK(self), FALSE);
    gst_base_sink_set_last_sample_enabled(GST_BASE_SINK(self), FALSE);
    GstPad *pad = GST_BASE_SINK_PAD(self);
    gst_pad_set_chain_function(pad, sl_chain);
    gst_pad_set_chain_list_function(pad, NULL); // lists come buffer by buffer to sl_chain
}

GstElement *sl_stage_sink_new(GstCaps *accepted, guint max_buffers) {
    SLStageSink *self = g_object_new(sl_stage_sink_get_type(), "name", "stage_sink", NULL);
    self->accepted = gst_caps_ref(accepted);
    self->max_buffers = max_buffers;
    return GST_ELEMENT(self);
}

void sl_stage_sink_configure(GstElement *sink, guint max_buffers, gboolean drop) {
    SLStageSink *self = (SLStageSink *)sink;
    pthread_mutex_lock(&self->lock);
    self->max_buffers = max_buffers > 0 ? max_buffers : 1;
    self->drop = drop;
    pthread_cond_broadcast(&self->changed);
    pthread_mutex_unlock(&self->lock);
}

// `timeout` from now on the monotonic clock (the conditions' clock).
static struct timespec sl_deadline(GstClockTime timeout) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    guint64 ns = (guint64)deadline.tv_nsec + (timeout % GST_SECOND);
    deadline.tv_sec += (time_t)(timeout / GST_SECOND + ns / GST_SECOND);
    deadline.tv_nsec = (long)(ns % GST_SECOND);
    return deadline;
}

GstSample *sl_stage_pull(GstElement *stage, GstClockTime timeout) {
    SLStageSink *self = (SLStageSink *)((SLStage *)stage)->sink;
    struct timespec deadline = sl_deadline(timeout);
    pthread_mutex_lock(&self->lock);
    GstSample *sample = NULL;
    while (self->started) {
        GstBuffer *buffer = sl_take_oldest(self);
        if (buffer) {
            sample = sl_sample_of(self, buffer);
            break;
        }
        // Caps and segments behind the last buffer (before an end-of-stream) apply too.
        GstMiniObject *item;
        while ((item = g_queue_pop_head(&self->items))) sl_apply_item(self, item);
        if (self->eos) break;
        if (pthread_cond_timedwait(&self->changed, &self->lock, &deadline) != 0) break;
    }
    pthread_mutex_unlock(&self->lock);
    return sample;
}

gboolean sl_stage_input_ended(GstElement *stage) {
    SLStageSink *self = (SLStageSink *)((SLStage *)stage)->sink;
    pthread_mutex_lock(&self->lock);
    gboolean ended = self->eos && self->buffers == 0;
    pthread_mutex_unlock(&self->lock);
    return ended;
}

GstSample *sl_stage_take(GstElement *stage) {
    SLStageSink *self = (SLStageSink *)((SLStage *)stage)->sink;
    pthread_mutex_lock(&self->lock);
    GstBuffer *buffer = self->started ? sl_take_oldest(self) : NULL;
    GstSample *sample = buffer ? sl_sample_of(self, buffer) : NULL;
    pthread_mutex_unlock(&self->lock);
    return sample;
}

void sl_stage_set_in_line(GstElement *stage) {
    SLStageSink *self = (SLStageSink *)((SLStage *)stage)->sink;
    pthread_mutex_lock(&self->lock);
    self->in_line = TRUE;
    pthread_mutex_unlock(&self->lock);
}

gboolean sl_stage_in_line(GstElement *stage) {
    SLStageSink *self = (SLStageSink *)((SLStage *)stage)->sink;
    pthread_mutex_lock(&self->lock);
    gboolean in_line = self->in_line;
    pthread_mutex_unlock(&self->lock);
    return in_line;
}

gboolean sl_stage_wait_input_end(GstElement *stage, GstClockTime timeout) {
    SLStageSink *self = (SLStageSink *)((SLStage *)stage)->sink;
    struct timespec deadline = sl_deadline(timeout);
    pthread_mutex_lock(&self->lock);
    while (self->started && !self->eos) {
        if (pthread_cond_timedwait(&self->ended, &self->lock, &deadline) != 0) break;
    }
    gboolean ended = self->eos;
    pthread_mutex_unlock(&self->lock);
    return ended;
}
