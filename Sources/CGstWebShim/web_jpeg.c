// MJPEG on a tap (see include/streamlens_web.h): one JPEG pipeline for every subscriber, each
// given the pictures at the rate it asked for.
#include "web_private.h"
#include <gst/app/gstappsink.h>
#include <string.h>

static GstFlowReturn on_jpeg(GstAppSink *sink, gpointer data) {
    SLWebTap *t = data;
    GstSample *sample = gst_app_sink_pull_sample(sink);
    if (!sample) return GST_FLOW_EOS;
    GstBuffer *buffer = gst_sample_get_buffer(sample);
    GstMapInfo map;
    pthread_mutex_lock(&t->lock);
    t->jpegs++;
    pthread_mutex_unlock(&t->lock);
    if (buffer && gst_buffer_map(buffer, &map, GST_MAP_READ)) {
        gint64 now = g_get_monotonic_time();
        pthread_mutex_lock(&t->callbacks);
        for (guint i = 0; i < t->subscribers->len; i++) {
            Subscriber *s = &g_array_index(t->subscribers, Subscriber, i);
            if (now - s->last < 1000000 / s->fps - 5000) continue; // this one asked for fewer
            s->last = now;
            s->callback(s->context, map.data, map.size);
        }
        pthread_mutex_unlock(&t->callbacks);
        gst_buffer_unmap(buffer, &map);
    }
    gst_sample_unref(sample);
    return GST_FLOW_OK;
}

static GstElement *start_jpeg(SLWebTap *t, char *error, size_t error_size) {
    char *launch = g_strdup_printf(
        "appsrc name=src is-live=true format=time do-timestamp=false block=false max-buffers=1 leaky-type=downstream "
        "! videoconvert ! video/x-raw,format=I420 ! jpegenc quality=%u ! appsink name=sink sync=false max-buffers=1 drop=true",
        t->config.jpeg_quality);
    GstElement *p = sl_web_build_pipeline(launch, error, error_size);
    g_free(launch);
    if (!p) return NULL;
    GstElement *sink = gst_bin_get_by_name(GST_BIN(p), "sink");
    GstAppSinkCallbacks callbacks = {0};
    callbacks.new_sample = on_jpeg;
    gst_app_sink_set_callbacks(GST_APP_SINK(sink), &callbacks, t, NULL);
    gst_object_unref(sink);
    return sl_web_play_pipeline(p, error, error_size);
}

void sl_web_stop_jpeg(SLWebTap *t) {
    pthread_mutex_lock(&t->lock);
    GstElement *p = t->jpeg, *src = t->jpeg_src;
    t->jpeg = t->jpeg_src = NULL;
    pthread_mutex_unlock(&t->lock);
    if (src) gst_object_unref(src);
    sl_web_stop_pipeline(p);
}

static void update_jpeg_rate(SLWebTap *t) {
    pthread_mutex_lock(&t->callbacks);
    unsigned fps = 0;
    for (guint i = 0; i < t->subscribers->len; i++) fps = MAX(fps, g_array_index(t->subscribers, Subscriber, i).fps);
    pthread_mutex_unlock(&t->callbacks);
    pthread_mutex_lock(&t->lock);
    t->jpeg_fps = fps;
    pthread_mutex_unlock(&t->lock);
}

unsigned sl_web_tap_jpeg_subscribe(SLWebTap *t, unsigned fps, SLWebJPEGCallback callback, void *context) {
    pthread_mutex_lock(&t->callbacks);
    if (t->subscribers->len >= SL_WEB_MAX_JPEG_SUBSCRIBERS) { pthread_mutex_unlock(&t->callbacks); return 0; }
    Subscriber s = {.id = ++t->next_subscriber, .fps = CLAMP(fps, 1, 30), .last = 0, .callback = callback, .context = context};
    g_array_append_val(t->subscribers, s);
    pthread_mutex_unlock(&t->callbacks);
    update_jpeg_rate(t);
    pthread_mutex_lock(&t->lock);
    gboolean need = t->jpeg == NULL;
    pthread_mutex_unlock(&t->lock);
    if (need) {
        char error[256];
        GstElement *p = start_jpeg(t, error, sizeof error);
        if (p) {
            pthread_mutex_lock(&t->lock);
            if (!t->jpeg) { t->jpeg = p; t->jpeg_src = gst_bin_get_by_name(GST_BIN(p), "src"); p = NULL; }
            pthread_mutex_unlock(&t->lock);
            sl_web_stop_pipeline(p);
        } else {
            g_warning("StreamLens: MJPEG: %s", error);
        }
    }
    return s.id;
}

void sl_web_tap_jpeg_unsubscribe(SLWebTap *t, unsigned subscription) {
    pthread_mutex_lock(&t->callbacks);
    for (guint i = 0; i < t->subscribers->len; i++) {
        if (g_array_index(t->subscribers, Subscriber, i).id == subscription) { g_array_remove_index(t->subscribers, i); break; }
    }
    gboolean none = t->subscribers->len == 0;
    pthread_mutex_unlock(&t->callbacks);
    update_jpeg_rate(t);
    if (none) sl_web_stop_jpeg(t);
}

