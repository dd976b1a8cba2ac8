// See include/streamlens_web.h. One tap per (pipeline, point). The probe hands each frame (a
// shallow copy of its buffer: metas and memory references, no pixels) to the appsrc of each
// pipeline that exists because someone watches; both pipelines are built for their first
// viewer and torn down after their last. Sessions that die without a DELETE (a tab closed, a
// network gone) are reaped by the tap's janitor thread, which also carries out every teardown
// that a GStreamer callback asks for (a streaming thread must not stop its own pipeline).
#include "streamlens_web.h"
#include <gst/gst.h>
#include <gst/app/gstappsrc.h>
#include <gst/app/gstappsink.h>
#include <gst/video/video.h>
#include <gst/sdp/sdp.h>
#define GST_USE_UNSTABLE_API
#include <gst/webrtc/webrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

// A session whose ICE connection is not up this long after its answer, or has been down
// (disconnected, failed) this long, is ended.
#define SL_WEB_CONNECT_SECONDS 20
#define SL_WEB_DOWN_SECONDS 8
#define SL_WEB_MAX_JPEG_SUBSCRIBERS 64

typedef struct {
    unsigned id;
    GstElement *branch;   // queue ! rtpvp8pay ! capsfilter (a bin with ghost pads)
    GstElement *webrtc;
    GstPad *tee_pad;
    gint64 created, down_since; // monotonic µs; down_since 0 while up or never up
    gboolean connected_once, up;
    gboolean dead;              // ended by its peer: the janitor removes it
} Session;

typedef struct {
    unsigned id, fps;
    gint64 last;                // monotonic µs of the last frame given
    SLWebJPEGCallback callback;
    void *context;
} Subscriber;

struct SLWebTap {
    SLWebConfig config;
    GstPad *pad;
    gulong probe;
    char *point;

    // `structure` is held while the WebRTC pipeline or its sessions are built or taken apart (a
    // viewer joining while the last one leaves must not link into a pipeline being stopped);
    // taken before `lock`, never after it.
    pthread_mutex_t structure;
    // `lock` guards everything below except what `callbacks` guards. Never held while a
    // pipeline changes state (its streaming threads take it in the probe and callbacks).
    pthread_mutex_t lock;
    GstElement *rtc, *rtc_src, *rtc_tee; // the WebRTC pipeline, while it has sessions
    GPtrArray *sessions;                 // Session*
    unsigned next_session;
    GstElement *jpeg, *jpeg_src;         // the JPEG pipeline, while it has subscribers
    gint64 jpeg_last;                    // monotonic µs of the last frame pushed into it
    unsigned jpeg_fps;                   // the highest subscriber's rate
    guint64 encoded, jpegs;              // frames out of the VP8 and JPEG encoders, ever
    unsigned frame_waiters;              // callers of sl_web_tap_next_frame waiting now
    GstSample *frame;                    // the last frame taken for them
    guint64 frame_generation;            // frames taken for them, ever
    pthread_cond_t frame_taken;          // signalled with `lock` when one is

    // Held while subscribers are called and while the list changes.
    pthread_mutex_t callbacks;
    GArray *subscribers;                 // Subscriber
    unsigned next_subscriber;

    // The janitor: wakes every second or when told, reaps dead sessions.
    pthread_t janitor;
    pthread_mutex_t janitor_lock;
    pthread_cond_t janitor_wake;
    gboolean stopping;
};

static void copy_error(char *error, size_t size, const char *text) {
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
            copy_error(error, error_size, text);
            g_free(text);
            return NULL;
        }
        GstPad *pad = gst_element_get_static_pad(element, "src");
        gst_object_unref(element);
        if (!pad) {
            char *text = g_strdup_printf("%s has no src pad to watch (a sink? name the element before it)", at);
            copy_error(error, error_size, text);
            g_free(text);
            return NULL;
        }
        GstCaps *caps = gst_pad_get_current_caps(pad);
        if (caps && !is_raw_video(pad)) {
            char *shown = gst_caps_to_string(caps);
            char *text = g_strdup_printf("%s's output is not raw video in system memory (%s): name a point before the encoder", at, shown);
            copy_error(error, error_size, text);
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
    if (!found) copy_error(error, error_size, "the pipeline has no raw video before its sinks to show (is it playing? name a point with ?at=ELEMENT)");
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

static GstElement *build_pipeline(const char *launch, char *error, size_t error_size) {
    GError *err = NULL;
    GstElement *p = gst_parse_launch(launch, &err);
    if (!p || err) {
        copy_error(error, error_size, err ? err->message : "could not build the pipeline");
        if (err) g_error_free(err);
        if (p) gst_object_unref(p);
        return NULL;
    }
    return p;
}

// Plays a built pipeline; on failure frees it and returns NULL.
static GstElement *play_pipeline(GstElement *p, char *error, size_t error_size) {
    if (!p) return NULL;
    if (gst_element_set_state(p, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
        copy_error(error, error_size, "the pipeline did not start");
        gst_element_set_state(p, GST_STATE_NULL);
        gst_object_unref(p);
        return NULL;
    }
    return p;
}

static void stop_pipeline(GstElement *p) {
    if (!p) return;
    gst_element_set_state(p, GST_STATE_NULL);
    gst_object_unref(p);
}

// VP8: every browser's WebRTC decodes it (H.264 needs a plugin in some Firefox builds). Real
// time, fastest speed, no look-ahead: a frame leaves the encoder as it enters.
static GstElement *start_rtc(SLWebTap *t, char *error, size_t error_size) {
    unsigned threads = 1; // cpu-used=16: 720p at ~200 fps on one core here; a second thread adds latency, not speed
    char *launch = g_strdup_printf(
        "appsrc name=src is-live=true format=time do-timestamp=false block=false max-buffers=1 leaky-type=downstream "
        "! queue max-size-buffers=1 max-size-bytes=0 max-size-time=0 leaky=downstream "
        "! videoconvert ! video/x-raw,format=I420 "
        "! vp8enc name=enc deadline=1 cpu-used=16 threads=%u end-usage=cbr target-bitrate=%u lag-in-frames=0 "
        "keyframe-mode=disabled keyframe-max-dist=%u error-resilient=default buffer-size=500 buffer-initial-size=300 buffer-optimal-size=400 "
        "! tee name=t allow-not-linked=true",
        threads, t->config.bitrate * 1000, t->config.key_seconds * 30);
    GstElement *p = play_pipeline(build_pipeline(launch, error, error_size), error, error_size);
    g_free(launch);
    return p;
}

static GstPadProbeReturn count_encoded(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    (void)pad; (void)info;
    SLWebTap *t = data;
    pthread_mutex_lock(&t->lock);
    t->encoded++;
    pthread_mutex_unlock(&t->lock);
    return GST_PAD_PROBE_OK;
}

// ---- Sessions ---------------------------------------------------------------------------------

static void wake_janitor(SLWebTap *t) {
    pthread_mutex_lock(&t->janitor_lock);
    pthread_cond_signal(&t->janitor_wake);
    pthread_mutex_unlock(&t->janitor_lock);
}

static void on_ice_state(GObject *webrtc, GParamSpec *spec, gpointer data) {
    (void)spec;
    SLWebTap *t = data;
    GstWebRTCICEConnectionState state;
    g_object_get(webrtc, "ice-connection-state", &state, NULL);
    gboolean up = state == GST_WEBRTC_ICE_CONNECTION_STATE_CONNECTED || state == GST_WEBRTC_ICE_CONNECTION_STATE_COMPLETED;
    gboolean closed = state == GST_WEBRTC_ICE_CONNECTION_STATE_CLOSED;
    pthread_mutex_lock(&t->lock);
    for (guint i = 0; i < t->sessions->len; i++) {
        Session *s = g_ptr_array_index(t->sessions, i);
        if ((GObject *)s->webrtc != webrtc) continue;
        if (up) { s->up = TRUE; s->connected_once = TRUE; s->down_since = 0; }
        else if (s->up || s->connected_once) { s->up = FALSE; if (!s->down_since) s->down_since = g_get_monotonic_time(); }
        if (closed) s->dead = TRUE;
    }
    pthread_mutex_unlock(&t->lock);
    if (closed) wake_janitor(t);
}

// What a WHEP request waits on while webrtcbin gathers candidates. On the heap and counted: a
// "notify" emission may still be running on webrtcbin's thread when the request disconnects
// its handler and returns; the handler's reference goes when its closure does, after that.
typedef struct {
    gint refs;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
} Gathering;

static Gathering *gathering_new(void) {
    Gathering *g = g_new0(Gathering, 1);
    g->refs = 1;
    pthread_mutex_init(&g->mutex, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cond, &attr);
    pthread_condattr_destroy(&attr);
    return g;
}

static void gathering_unref(gpointer data, GClosure *closure) {
    (void)closure;
    Gathering *g = data;
    if (!g_atomic_int_dec_and_test(&g->refs)) return;
    pthread_mutex_destroy(&g->mutex);
    pthread_cond_destroy(&g->cond);
    g_free(g);
}

static void on_gathering(GObject *webrtc, GParamSpec *spec, gpointer data) {
    (void)webrtc; (void)spec;
    Gathering *g = data;
    pthread_mutex_lock(&g->mutex);
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mutex);
}

// Takes the session's branch out of the running WebRTC pipeline and frees it. With `lock`
// not held. The tee (allow-not-linked) goes on pushing to the others meanwhile.
static void remove_session(SLWebTap *t, GstElement *rtc, GstElement *tee, Session *s) {
    if (s->tee_pad) {
        GstPad *peer = gst_pad_get_peer(s->tee_pad);
        if (peer) { gst_pad_unlink(s->tee_pad, peer); gst_object_unref(peer); }
        gst_element_release_request_pad(tee, s->tee_pad);
        gst_object_unref(s->tee_pad);
    }
    g_signal_handlers_disconnect_by_data(s->webrtc, t);
    gst_element_set_state(s->webrtc, GST_STATE_NULL);
    gst_element_set_state(s->branch, GST_STATE_NULL);
    gst_bin_remove(GST_BIN(rtc), s->branch);
    gst_bin_remove(GST_BIN(rtc), s->webrtc);
    gst_object_unref(s->branch);
    gst_object_unref(s->webrtc);
    g_free(s);
}

// Sessions matching `which` (or all when `which` is 0 and `all`) and, when none is left, the
// WebRTC pipeline, out of the tap and torn down.
static void end_sessions(SLWebTap *t, unsigned which, gboolean all, gboolean reap) {
    pthread_mutex_lock(&t->structure);
    gint64 now = g_get_monotonic_time();
    GPtrArray *gone = g_ptr_array_new();
    pthread_mutex_lock(&t->lock);
    for (guint i = 0; i < t->sessions->len;) {
        Session *s = g_ptr_array_index(t->sessions, i);
        gboolean end = all || (which && s->id == which);
        if (reap && !end) {
            end = s->dead
                  || (!s->connected_once && now - s->created > (gint64)SL_WEB_CONNECT_SECONDS * 1000000)
                  || (s->down_since && now - s->down_since > (gint64)SL_WEB_DOWN_SECONDS * 1000000);
        }
        if (end) { g_ptr_array_add(gone, s); g_ptr_array_remove_index(t->sessions, i); }
        else i++;
    }
    GstElement *rtc = t->rtc ? gst_object_ref(t->rtc) : NULL, *tee = t->rtc_tee ? gst_object_ref(t->rtc_tee) : NULL;
    GstElement *stop = NULL, *stop_src = NULL, *stop_tee = NULL;
    if (t->rtc && t->sessions->len == 0 && gone->len > 0) {
        stop = t->rtc; stop_src = t->rtc_src; stop_tee = t->rtc_tee;
        t->rtc = t->rtc_src = t->rtc_tee = NULL;
    }
    pthread_mutex_unlock(&t->lock);
    for (guint i = 0; i < gone->len; i++) remove_session(t, rtc, tee, g_ptr_array_index(gone, i));
    g_ptr_array_free(gone, TRUE);
    if (rtc) gst_object_unref(rtc);
    if (tee) gst_object_unref(tee);
    if (stop_src) gst_object_unref(stop_src);
    if (stop_tee) gst_object_unref(stop_tee);
    stop_pipeline(stop);
    pthread_mutex_unlock(&t->structure);
}

// The payload type the offer gives VP8 at 90 kHz, or -1.
static int vp8_payload(const GstSDPMessage *sdp) {
    for (guint m = 0; m < gst_sdp_message_medias_len(sdp); m++) {
        const GstSDPMedia *media = gst_sdp_message_get_media(sdp, m);
        if (g_strcmp0(gst_sdp_media_get_media(media), "video") != 0) continue;
        for (guint a = 0; a < gst_sdp_media_attributes_len(media); a++) {
            const GstSDPAttribute *attr = gst_sdp_media_get_attribute(media, a);
            if (g_strcmp0(attr->key, "rtpmap") != 0 || !attr->value) continue;
            int pt = -1;
            char codec[32] = {0};
            unsigned rate = 0;
            if (sscanf(attr->value, "%d %31[^/]/%u", &pt, codec, &rate) == 3 && g_ascii_strcasecmp(codec, "VP8") == 0 && rate == 90000) return pt;
        }
    }
    return -1;
}

static gboolean wait_promise(GstPromise *promise, const char *what, char *error, size_t error_size) {
    GstPromiseResult r = gst_promise_wait(promise);
    const GstStructure *reply = r == GST_PROMISE_RESULT_REPLIED ? gst_promise_get_reply(promise) : NULL;
    GError *err = NULL;
    if (reply && gst_structure_has_field(reply, "error")) gst_structure_get(reply, "error", G_TYPE_ERROR, &err, NULL);
    if (r != GST_PROMISE_RESULT_REPLIED || err) {
        char *text = g_strdup_printf("%s: %s", what, err ? err->message : "no answer from webrtcbin");
        copy_error(error, error_size, text);
        g_free(text);
        if (err) g_error_free(err);
        return FALSE;
    }
    return TRUE;
}

unsigned sl_web_tap_whep(SLWebTap *t, const char *offer_text, unsigned timeout_ms, char **answer_text, int *status, char *error, size_t error_size) {
    *answer_text = NULL;
    *status = 400;
    GstSDPMessage *sdp = NULL;
    if (gst_sdp_message_new_from_text(offer_text, &sdp) != GST_SDP_OK || gst_sdp_message_medias_len(sdp) == 0) {
        if (sdp) gst_sdp_message_free(sdp);
        copy_error(error, error_size, "the body is not an SDP offer (Content-Type: application/sdp, from RTCPeerConnection.createOffer)");
        return 0;
    }
    int pt = vp8_payload(sdp);
    if (pt < 0) {
        gst_sdp_message_free(sdp);
        copy_error(error, error_size, "the offer has no VP8 video (the stream is VP8: offer a video transceiver, recvonly)");
        return 0;
    }
    *status = 503;
    pthread_mutex_lock(&t->structure);
    pthread_mutex_lock(&t->lock);
    gboolean full = t->sessions->len >= t->config.max_viewers;
    pthread_mutex_unlock(&t->lock);
    if (full) {
        pthread_mutex_unlock(&t->structure);
        gst_sdp_message_free(sdp);
        char *text = g_strdup_printf("%u viewers already watch this point (the most there may be)", t->config.max_viewers);
        copy_error(error, error_size, text);
        g_free(text);
        return 0;
    }
    *status = 500;
    // The pipeline, for the first viewer.
    pthread_mutex_lock(&t->lock);
    gboolean need = t->rtc == NULL;
    pthread_mutex_unlock(&t->lock);
    if (need) {
        GstElement *p = start_rtc(t, error, error_size);
        if (!p) { pthread_mutex_unlock(&t->structure); gst_sdp_message_free(sdp); return 0; }
        pthread_mutex_lock(&t->lock);
        if (t->rtc == NULL) {
            t->rtc = p;
            t->rtc_src = gst_bin_get_by_name(GST_BIN(p), "src");
            t->rtc_tee = gst_bin_get_by_name(GST_BIN(p), "t");
            GstPad *tee_sink = gst_element_get_static_pad(t->rtc_tee, "sink");
            gst_pad_add_probe(tee_sink, GST_PAD_PROBE_TYPE_BUFFER, count_encoded, t, NULL);
            gst_object_unref(tee_sink);
            p = NULL;
        }
        pthread_mutex_unlock(&t->lock);
        stop_pipeline(p); // another request built one first
    }
    pthread_mutex_lock(&t->lock);
    GstElement *rtc = t->rtc ? gst_object_ref(t->rtc) : NULL, *tee = t->rtc_tee ? gst_object_ref(t->rtc_tee) : NULL;
    pthread_mutex_unlock(&t->lock);
    if (!rtc) { pthread_mutex_unlock(&t->structure); gst_sdp_message_free(sdp); copy_error(error, error_size, "the video for browsers stopped"); return 0; }

    // This viewer's branch: its own payloader (the offer's payload type; Chromium and Firefox
    // number VP8 differently) after the shared encoder.
    Session *s = g_new0(Session, 1);
    char *branch = g_strdup_printf(
        "queue max-size-buffers=30 max-size-bytes=0 max-size-time=0 leaky=downstream ! rtpvp8pay pt=%d picture-id-mode=15-bit mtu=1200 "
        "! capsfilter caps=\"application/x-rtp,media=video,encoding-name=VP8,payload=%d,clock-rate=90000\"", pt, pt);
    GError *err = NULL;
    s->branch = gst_parse_bin_from_description(branch, TRUE, &err);
    g_free(branch);
    s->webrtc = gst_element_factory_make("webrtcbin", NULL);
    if (!s->branch || err || !s->webrtc) {
        copy_error(error, error_size, err ? err->message : "webrtcbin is not installed (gstreamer1.0-plugins-bad, gstreamer1.0-nice)");
        if (err) g_error_free(err);
        if (s->branch) gst_object_unref(s->branch);
        if (s->webrtc) gst_object_unref(s->webrtc);
        g_free(s);
        pthread_mutex_unlock(&t->structure);
        gst_sdp_message_free(sdp);
        gst_object_unref(rtc); gst_object_unref(tee);
        return 0;
    }
    gst_object_ref_sink(s->branch);
    gst_object_ref_sink(s->webrtc);
    gst_util_set_object_arg(G_OBJECT(s->webrtc), "bundle-policy", "max-bundle");
    gst_bin_add_many(GST_BIN(rtc), s->branch, s->webrtc, NULL);
    gboolean linked = gst_element_link(s->branch, s->webrtc);
    // Playing before the tee feeds it: a frame pushed into a branch still in NULL comes back
    // FLUSHING, which the tee hands up to the encoder's queue and the appsrc, whose tasks then
    // stop for good (no more frames for any viewer of the tap; the browser connects, gets none).
    gst_element_sync_state_with_parent(s->webrtc);
    gst_element_sync_state_with_parent(s->branch);
    GstPad *branch_sink = gst_element_get_static_pad(s->branch, "sink");
    s->tee_pad = gst_element_request_pad_simple(tee, "src_%u");
    linked = linked && s->tee_pad && gst_pad_link(s->tee_pad, branch_sink) == GST_PAD_LINK_OK;
    gst_object_unref(branch_sink);
    s->created = g_get_monotonic_time();
    g_signal_connect(s->webrtc, "notify::ice-connection-state", G_CALLBACK(on_ice_state), t);
    pthread_mutex_lock(&t->lock);
    s->id = ++t->next_session;
    g_ptr_array_add(t->sessions, s);
    pthread_mutex_unlock(&t->lock);
    unsigned id = s->id;
    // From here on the session belongs to the tap (it may be ended by another thread): only
    // these references of our own are used.
    GstElement *webrtc = gst_object_ref(s->webrtc);
    if (!linked) {
        pthread_mutex_unlock(&t->structure);
        gst_object_unref(webrtc);
        copy_error(error, error_size, "could not link a viewer to the encoder");
        gst_sdp_message_free(sdp);
        gst_object_unref(rtc); gst_object_unref(tee);
        end_sessions(t, id, FALSE, FALSE);
        return 0;
    }
    pthread_mutex_unlock(&t->structure);

    // Offer in, answer out, then the candidates gathered into it.
    Gathering *wait = gathering_new();
    g_atomic_int_inc(&wait->refs); // the handler's
    gulong gathering = g_signal_connect_data(webrtc, "notify::ice-gathering-state", G_CALLBACK(on_gathering), wait, gathering_unref, 0);
    gboolean ok = TRUE;
    GstWebRTCSessionDescription *offer = gst_webrtc_session_description_new(GST_WEBRTC_SDP_TYPE_OFFER, sdp);
    // An offer webrtcbin refuses, or cannot answer, is the peer's fault (400).
    *status = 400;
    GstPromise *promise = gst_promise_new();
    g_signal_emit_by_name(webrtc, "set-remote-description", offer, promise);
    ok = wait_promise(promise, "the offer was not accepted", error, error_size);
    gst_promise_unref(promise);
    gst_webrtc_session_description_free(offer);
    GstWebRTCSessionDescription *answer = NULL;
    if (ok) {
        promise = gst_promise_new();
        g_signal_emit_by_name(webrtc, "create-answer", NULL, promise);
        ok = wait_promise(promise, "no answer to the offer", error, error_size);
        if (ok) {
            const GstStructure *reply = gst_promise_get_reply(promise);
            gst_structure_get(reply, "answer", GST_TYPE_WEBRTC_SESSION_DESCRIPTION, &answer, NULL);
            if (!answer) { ok = FALSE; copy_error(error, error_size, "no answer to the offer"); }
        }
        gst_promise_unref(promise);
    }
    if (ok) {
        *status = 500;
        promise = gst_promise_new();
        g_signal_emit_by_name(webrtc, "set-local-description", answer, promise);
        ok = wait_promise(promise, "the answer was not taken", error, error_size);
        gst_promise_unref(promise);
    }
    if (answer) gst_webrtc_session_description_free(answer);
    if (ok) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) { until.tv_sec += 1; until.tv_nsec -= 1000000000L; }
        pthread_mutex_lock(&wait->mutex);
        for (;;) {
            GstWebRTCICEGatheringState state;
            g_object_get(webrtc, "ice-gathering-state", &state, NULL);
            if (state == GST_WEBRTC_ICE_GATHERING_STATE_COMPLETE) break;
            if (pthread_cond_timedwait(&wait->cond, &wait->mutex, &until) != 0) break;
        }
        pthread_mutex_unlock(&wait->mutex);
        GstWebRTCSessionDescription *local = NULL;
        g_object_get(webrtc, "local-description", &local, NULL);
        if (local) {
            *answer_text = gst_sdp_message_as_text(local->sdp);
            gst_webrtc_session_description_free(local);
        } else {
            ok = FALSE;
            copy_error(error, error_size, "webrtcbin has no local description");
        }
    }
    g_signal_handler_disconnect(webrtc, gathering);
    gathering_unref(wait, NULL);
    if (ok) {
        // A new viewer needs a key frame now, not at the next interval.
        GstElement *enc = gst_bin_get_by_name(GST_BIN(rtc), "enc");
        if (enc) {
            GstPad *src = gst_element_get_static_pad(enc, "src");
            gst_pad_send_event(src, gst_video_event_new_upstream_force_key_unit(GST_CLOCK_TIME_NONE, TRUE, 0));
            gst_object_unref(src);
            gst_object_unref(enc);
        }
    }
    gst_object_unref(rtc);
    gst_object_unref(tee);
    gst_object_unref(webrtc);
    if (!ok) {
        end_sessions(t, id, FALSE, FALSE);
        g_free(*answer_text);
        *answer_text = NULL;
        return 0;
    }
    *status = 201;
    return id;
}

bool sl_web_tap_whep_end(SLWebTap *t, unsigned session) {
    pthread_mutex_lock(&t->lock);
    gboolean found = FALSE;
    for (guint i = 0; i < t->sessions->len; i++) found |= ((Session *)g_ptr_array_index(t->sessions, i))->id == session;
    pthread_mutex_unlock(&t->lock);
    if (found) end_sessions(t, session, FALSE, FALSE);
    return found;
}

void sl_web_tap_frames(SLWebTap *t, uint64_t *encoded, uint64_t *jpegs) {
    pthread_mutex_lock(&t->lock);
    *encoded = t->encoded;
    *jpegs = t->jpegs;
    pthread_mutex_unlock(&t->lock);
}

unsigned sl_web_tap_viewers(SLWebTap *t, unsigned *connected) {
    pthread_mutex_lock(&t->lock);
    unsigned n = t->sessions->len, up = 0;
    for (guint i = 0; i < n; i++) up += ((Session *)g_ptr_array_index(t->sessions, i))->up ? 1 : 0;
    pthread_mutex_unlock(&t->lock);
    if (connected) *connected = up;
    return n;
}

// ---- JPEG -------------------------------------------------------------------------------------

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
    GstElement *p = build_pipeline(launch, error, error_size);
    g_free(launch);
    if (!p) return NULL;
    GstElement *sink = gst_bin_get_by_name(GST_BIN(p), "sink");
    GstAppSinkCallbacks callbacks = {0};
    callbacks.new_sample = on_jpeg;
    gst_app_sink_set_callbacks(GST_APP_SINK(sink), &callbacks, t, NULL);
    gst_object_unref(sink);
    return play_pipeline(p, error, error_size);
}

// The JPEG pipeline out of the tap and stopped (no subscriber left, or the tap ending).
static void stop_jpeg(SLWebTap *t) {
    pthread_mutex_lock(&t->lock);
    GstElement *p = t->jpeg, *src = t->jpeg_src;
    t->jpeg = t->jpeg_src = NULL;
    pthread_mutex_unlock(&t->lock);
    if (src) gst_object_unref(src);
    stop_pipeline(p);
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
            stop_pipeline(p);
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
    if (none) stop_jpeg(t);
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
        end_sessions(t, 0, FALSE, TRUE);
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
    end_sessions(t, 0, TRUE, FALSE);
    pthread_mutex_lock(&t->callbacks);
    g_array_set_size(t->subscribers, 0);
    pthread_mutex_unlock(&t->callbacks);
    stop_jpeg(t);
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
