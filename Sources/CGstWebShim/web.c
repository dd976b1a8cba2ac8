// See include/streamlens_web.h. One tap per (pipeline, point). The probe hands each frame (a
// shallow copy of its buffer: metas and memory references, no pixels) to the appsrc of each
// pipeline that exists because someone watches; both pipelines are built for their first
// viewer and torn down after their last. Sessions that die without a DELETE (a tab closed, a
// network gone) are reaped by the tap's janitor thread, which also carries out every teardown
// that a GStreamer callback asks for (a streaming thread must not stop its own pipeline).
#include "web_private.h"
#include <gst/app/gstappsrc.h>
#include <gst/video/video.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void sl_web_copy_error(char *error, size_t size, const char *text) {
    if (error && size) g_strlcpy(error, text, size);
}

void sl_web_free(void *pointer) { g_free(pointer); }

// ---- Finding the point ------------------------------------------------------------------------

static gboolean is_raw_video(GstPad *pad) {
    GstCaps *caps = gst_pad_get_current_caps(pad);
    if (!caps) return FALSE;
    gboolean raw = gst_caps_get_size(caps) > 0 && gst_structure_has_name(gst_caps_get_structure(caps, 0), "video/x-raw")
                   && gst_caps_features_is_equal(gst_caps_get_features(caps, 0), GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY);
    gst_caps_unref(caps);
    return raw;
}

static GstPad *first_pad(GstElement *element, GstPadDirection direction) {
    GstPad *found = NULL;
    GstIterator *it = direction == GST_PAD_SINK ? gst_element_iterate_sink_pads(element) : gst_element_iterate_src_pads(element);
    GValue item = G_VALUE_INIT;
    if (gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
        found = gst_object_ref(g_value_get_object(&item));
        g_value_reset(&item);
    }
    g_value_unset(&item);
    gst_iterator_free(it);
    return found;
}

static gboolean has_linked_src_pad(GstElement *element) {
    gboolean linked = FALSE;
    GstIterator *it = gst_element_iterate_src_pads(element);
    GValue item = G_VALUE_INIT;
    while (!linked && gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
        linked = gst_pad_is_linked(g_value_get_object(&item));
        g_value_reset(&item);
    }
    g_value_unset(&item);
    gst_iterator_free(it);
    return linked;
}

// From a last element upstream: the first sink pad that carries raw video (a reference), or NULL.
// Only through pads whose caps are settled: a pad not negotiated yet ends the walk (NULL), so
// that a pipeline still starting is never tapped upstream of its stages.
static GstPad *raw_video_upstream_of(GstElement *last) {
    GstElement *element = gst_object_ref(last);
    for (int hops = 0; element && hops < 64; hops++) {
        GstPad *sink = first_pad(element, GST_PAD_SINK);
        gst_object_unref(element);
        element = NULL;
        if (!sink) return NULL;
        if (is_raw_video(sink)) return sink;
        GstCaps *caps = gst_pad_get_current_caps(sink);
        if (!caps) { gst_object_unref(sink); return NULL; }
        gst_caps_unref(caps);
        GstPad *peer = gst_pad_get_peer(sink);
        gst_object_unref(sink);
        if (!peer) return NULL;
        element = gst_pad_get_parent_element(peer);
        gst_object_unref(peer);
    }
    if (element) gst_object_unref(element);
    return NULL;
}

static GstPad *find_point(GstElement *pipeline, const char *at, char *error, size_t error_size) {
    if (at && *at) {
        GstElement *element = gst_bin_get_by_name(GST_BIN(pipeline), at);
        if (!element) {
            char *text = g_strdup_printf("the pipeline has no element named %s (name one with name=…, e.g. lensdetect name=%s)", at, at);
            sl_web_copy_error(error, error_size, text);
            g_free(text);
            return NULL;
        }
        GstPad *pad = gst_element_get_static_pad(element, "src");
        gst_object_unref(element);
        if (!pad) {
            char *text = g_strdup_printf("%s has no src pad to watch (a sink? name the element before it)", at);
            sl_web_copy_error(error, error_size, text);
            g_free(text);
            return NULL;
        }
        GstCaps *caps = gst_pad_get_current_caps(pad);
        if (caps && !is_raw_video(pad)) {
            char *shown = gst_caps_to_string(caps);
            char *text = g_strdup_printf("%s's output is not raw video in system memory (%s): name a point before the encoder", at, shown);
            sl_web_copy_error(error, error_size, text);
            g_free(text);
            g_free(shown);
            gst_caps_unref(caps);
            gst_object_unref(pad);
            return NULL;
        }
        if (caps) gst_caps_unref(caps);
        return pad;
    }
    // The pipeline's last elements (no linked output), each walked upstream to raw video.
    GstPad *found = NULL;
    GstIterator *it = gst_bin_iterate_elements(GST_BIN(pipeline));
    GValue item = G_VALUE_INIT;
    while (!found && gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
        GstElement *element = g_value_get_object(&item);
        if (!has_linked_src_pad(element)) found = raw_video_upstream_of(element);
        g_value_reset(&item);
    }
    g_value_unset(&item);
    gst_iterator_free(it);
    if (!found) sl_web_copy_error(error, error_size, "the pipeline has no raw video before its sinks to show (is it playing? name a point with ?at=ELEMENT)");
    return found;
}

// ---- Frames in --------------------------------------------------------------------------------

// A shallow copy of the frame, stamped with `src`'s pipeline's running time, into it. Never
// blocks: the appsrc keeps one frame and drops the older one.
static void push_frame(GstElement *src, GstBuffer *buffer, GstCaps *caps) {
    GstClock *clock = gst_element_get_clock(src);
    if (!clock) return; // not playing yet
    GstClockTime now = gst_clock_get_time(clock), base = gst_element_get_base_time(src);
    gst_object_unref(clock);
    GstAppSrc *app = GST_APP_SRC(src);
    GstCaps *current = gst_app_src_get_caps(app);
    if (!current || !gst_caps_is_equal(current, caps)) gst_app_src_set_caps(app, caps);
    if (current) gst_caps_unref(current);
    GstBuffer *copy = gst_buffer_copy(buffer);
    GST_BUFFER_PTS(copy) = now > base ? now - base : 0;
    GST_BUFFER_DTS(copy) = GST_CLOCK_TIME_NONE;
    GST_BUFFER_DURATION(copy) = GST_CLOCK_TIME_NONE;
    gst_app_src_push_buffer(app, copy);
}

static GstPadProbeReturn on_frame(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    SLWebTap *t = data;
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    if (!buffer) return GST_PAD_PROBE_OK;
    gint64 now = g_get_monotonic_time();
    pthread_mutex_lock(&t->lock);
    GstElement *rtc = t->rtc_src ? gst_object_ref(t->rtc_src) : NULL, *jpeg = NULL;
    if (t->jpeg_src && t->jpeg_fps && now - t->jpeg_last >= 1000000 / t->jpeg_fps - 2000) {
        jpeg = gst_object_ref(t->jpeg_src);
        t->jpeg_last = now;
    }
    gboolean wanted = t->frame_waiters > 0;
    pthread_mutex_unlock(&t->lock);
    if (!rtc && !jpeg && !wanted) return GST_PAD_PROBE_OK; // nobody watching: a lock and three checks
    GstCaps *caps = gst_pad_get_current_caps(pad);
    if (caps) {
        if (rtc) push_frame(rtc, buffer, caps);
        if (jpeg) push_frame(jpeg, buffer, caps);
        if (wanted) {
            GstSample *sample = gst_sample_new(buffer, caps, NULL, NULL); // a reference, no copy
            pthread_mutex_lock(&t->lock);
            GstSample *old = t->frame;
            t->frame = sample;
            t->frame_generation++;
            pthread_cond_broadcast(&t->frame_taken);
            pthread_mutex_unlock(&t->lock);
            if (old) gst_sample_unref(old);
        }
        gst_caps_unref(caps);
    }
    if (rtc) gst_object_unref(rtc);
    if (jpeg) gst_object_unref(jpeg);
    return GST_PAD_PROBE_OK;
}

// ---- Pipelines --------------------------------------------------------------------------------

GstElement *sl_web_build_pipeline(const char *launch, char *error, size_t error_size) {
    GError *err = NULL;
    GstElement *p = gst_parse_launch(launch, &err);
    if (!p || err) {
        sl_web_copy_error(error, error_size, err ? err->message : "could not build the pipeline");
        if (err) g_error_free(err);
        if (p) gst_object_unref(p);
        return NULL;
    }
    return p;
}

GstElement *sl_web_play_pipeline(GstElement *p, char *error, size_t error_size) {
    if (!p) return NULL;
    if (gst_element_set_state(p, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
        sl_web_copy_error(error, error_size, "the pipeline did not start");
        gst_element_set_state(p, GST_STATE_NULL);
        gst_object_unref(p);
        return NULL;
    }
    return p;
}

void sl_web_stop_pipeline(GstElement *p) {
    if (!p) return;
    gst_element_set_state(p, GST_STATE_NULL);
    gst_object_unref(p);
}

// ---- The tap ----------------------------------------------------------------------------------

static void *janitor_main(void *data) {
    SLWebTap *t = data;
    pthread_mutex_lock(&t->janitor_lock);
    while (!t->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&t->janitor_wake, &t->janitor_lock, &until);
        if (t->stopping) break;
        pthread_mutex_unlock(&t->janitor_lock);
        sl_web_end_sessions(t, 0, FALSE, TRUE);
        pthread_mutex_lock(&t->janitor_lock);
    }
    pthread_mutex_unlock(&t->janitor_lock);
    return NULL;
}

SLWebTap *sl_web_tap_new(void *pipeline, const char *at, const SLWebConfig *config, char *error, size_t error_size) {
    GstPad *pad = find_point(GST_ELEMENT(pipeline), at, error, error_size);
    if (!pad) return NULL;
    SLWebTap *t = g_new0(SLWebTap, 1);
    t->config = *config;
    if (!t->config.max_viewers) t->config.max_viewers = 16;
    if (!t->config.key_seconds) t->config.key_seconds = 2;
    if (!t->config.bitrate) t->config.bitrate = 2000;
    if (!t->config.jpeg_quality) t->config.jpeg_quality = 80;
    t->pad = pad;
    GstElement *parent = gst_pad_get_parent_element(pad);
    t->point = g_strdup_printf("%s:%s", parent ? GST_OBJECT_NAME(parent) : "?", GST_PAD_NAME(pad));
    if (parent) gst_object_unref(parent);
    pthread_mutex_init(&t->structure, NULL);
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_init(&t->callbacks, NULL);
    pthread_mutex_init(&t->janitor_lock, NULL);
    pthread_cond_init(&t->janitor_wake, NULL);
    pthread_cond_init(&t->frame_taken, NULL);
    t->sessions = g_ptr_array_new();
    t->subscribers = g_array_new(FALSE, TRUE, sizeof(Subscriber));
    pthread_create(&t->janitor, NULL, janitor_main, t);
    t->probe = gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, on_frame, t, NULL);
    return t;
}

const char *sl_web_tap_point(SLWebTap *t) { return t->point; }

void *sl_web_tap_next_frame(SLWebTap *t, unsigned timeout_ms) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&t->lock);
    t->frame_waiters++;
    guint64 generation = t->frame_generation;
    while (t->frame_generation == generation)
        if (pthread_cond_timedwait(&t->frame_taken, &t->lock, &deadline) != 0) break;
    GstSample *sample = t->frame_generation != generation && t->frame ? gst_sample_ref(t->frame) : NULL;
    GstSample *drop = NULL;
    if (--t->frame_waiters == 0) { drop = t->frame; t->frame = NULL; } // nobody waits: hold no frame
    pthread_mutex_unlock(&t->lock);
    if (drop) gst_sample_unref(drop);
    return sample;
}

void sl_web_tap_free(SLWebTap *t) {
    if (!t) return;
    // gst_pad_remove_probe waits for a probe callback running now to return.
    gst_pad_remove_probe(t->pad, t->probe);
    pthread_mutex_lock(&t->janitor_lock);
    t->stopping = TRUE;
    pthread_cond_signal(&t->janitor_wake);
    pthread_mutex_unlock(&t->janitor_lock);
    pthread_join(t->janitor, NULL);
    sl_web_end_sessions(t, 0, TRUE, FALSE);
    pthread_mutex_lock(&t->callbacks);
    g_array_set_size(t->subscribers, 0);
    pthread_mutex_unlock(&t->callbacks);
    sl_web_stop_jpeg(t);
    gst_object_unref(t->pad);
    g_ptr_array_free(t->sessions, TRUE);
    g_array_free(t->subscribers, TRUE);
    pthread_mutex_destroy(&t->structure);
    pthread_mutex_destroy(&t->lock);
    pthread_mutex_destroy(&t->callbacks);
    pthread_mutex_destroy(&t->janitor_lock);
    pthread_cond_destroy(&t->janitor_wake);
    pthread_cond_destroy(&t->frame_taken);
    if (t->frame) gst_sample_unref(t->frame);
    g_free(t->point);
    g_free(t);
}
