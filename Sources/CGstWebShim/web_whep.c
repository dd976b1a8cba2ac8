// WHEP on a tap (see include/streamlens_web.h): the WebRTC pipeline (one VP8 encoder, a tee),
// a branch and a webrtcbin for each viewer, the offer and answer, and the sessions' ends.
#include "web_private.h"
#include <gst/sdp/sdp.h>
#include <gst/video/video.h>
#define GST_USE_UNSTABLE_API
#include <gst/webrtc/webrtc.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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
    GstElement *p = sl_web_play_pipeline(sl_web_build_pipeline(launch, error, error_size), error, error_size);
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

void sl_web_end_sessions(SLWebTap *t, unsigned which, gboolean all, gboolean reap) {
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
    sl_web_stop_pipeline(stop);
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
        sl_web_copy_error(error, error_size, text);
        g_free(text);
        if (err) g_error_free(err);
        return FALSE;
    }
    return TRUE;
}

// The offer, if it is one the tap can answer: its VP8 payload type in *pt. NULL (400) otherwise.
static GstSDPMessage *parse_offer(const char *offer_text, int *pt, char *error, size_t error_size) {
    GstSDPMessage *sdp = NULL;
    if (gst_sdp_message_new_from_text(offer_text, &sdp) != GST_SDP_OK || gst_sdp_message_medias_len(sdp) == 0) {
        if (sdp) gst_sdp_message_free(sdp);
        sl_web_copy_error(error, error_size, "the body is not an SDP offer (Content-Type: application/sdp, from RTCPeerConnection.createOffer)");
        return NULL;
    }
    *pt = vp8_payload(sdp);
    if (*pt < 0) {
        gst_sdp_message_free(sdp);
        sl_web_copy_error(error, error_size, "the offer has no VP8 video (the stream is VP8: offer a video transceiver, recvonly)");
        return NULL;
    }
    return sdp;
}

// The WebRTC pipeline, started for the first viewer: references of our own to it and its tee.
// `structure` held. FALSE (*status says why) when the tap is full or it cannot start.
static gboolean rtc_for_a_viewer(SLWebTap *t, GstElement **rtc, GstElement **tee, int *status, char *error, size_t error_size) {
    pthread_mutex_lock(&t->lock);
    gboolean full = t->sessions->len >= t->config.max_viewers, need = t->rtc == NULL;
    pthread_mutex_unlock(&t->lock);
    if (full) {
        *status = 503;
        char *text = g_strdup_printf("%u viewers already watch this point (the most there may be)", t->config.max_viewers);
        sl_web_copy_error(error, error_size, text);
        g_free(text);
        return FALSE;
    }
    *status = 500;
    if (need) {
        GstElement *p = start_rtc(t, error, error_size);
        if (!p) return FALSE;
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
        sl_web_stop_pipeline(p); // another request built one first
    }
    pthread_mutex_lock(&t->lock);
    *rtc = t->rtc ? gst_object_ref(t->rtc) : NULL;
    *tee = t->rtc_tee ? gst_object_ref(t->rtc_tee) : NULL;
    pthread_mutex_unlock(&t->lock);
    if (*rtc && *tee) return TRUE;
    if (*rtc) gst_object_unref(*rtc);
    if (*tee) gst_object_unref(*tee);
    sl_web_copy_error(error, error_size, "the video for browsers stopped");
    return FALSE;
}

// This viewer's branch (its own payloader for the offer's payload type: Chromium and Firefox
// number VP8 differently) and webrtcbin, playing, then linked to the tee. `structure` held.
// The session's id, in the tap from now on, and *webrtc once linked; 0 when none was made.
static unsigned add_session(SLWebTap *t, GstElement *rtc, GstElement *tee, int pt, GstElement **webrtc, char *error, size_t error_size) {
    Session *s = g_new0(Session, 1);
    char *branch = g_strdup_printf(
        "queue max-size-buffers=30 max-size-bytes=0 max-size-time=0 leaky=downstream ! rtpvp8pay pt=%d picture-id-mode=15-bit mtu=1200 "
        "! capsfilter caps=\"application/x-rtp,media=video,encoding-name=VP8,payload=%d,clock-rate=90000\"", pt, pt);
    GError *err = NULL;
    s->branch = gst_parse_bin_from_description(branch, TRUE, &err);
    g_free(branch);
    s->webrtc = gst_element_factory_make("webrtcbin", NULL);
    if (!s->branch || err || !s->webrtc) {
        sl_web_copy_error(error, error_size, err ? err->message : "webrtcbin is not installed (gstreamer1.0-plugins-bad, gstreamer1.0-nice)");
        if (err) g_error_free(err);
        if (s->branch) gst_object_unref(s->branch);
        if (s->webrtc) gst_object_unref(s->webrtc);
        g_free(s);
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
    // From here on the session belongs to the tap (it may be ended by another thread): only a
    // reference of our own to its webrtcbin is used, and none when it could not be linked.
    if (linked) *webrtc = gst_object_ref(s->webrtc);
    return s->id;
}

// The offer in, the answer out with every candidate gathered into it (at most `timeout_ms`).
// FALSE with *status and the error when webrtcbin refuses the offer (400) or fails (500).
static gboolean negotiate(GstElement *webrtc, GstSDPMessage *sdp, unsigned timeout_ms, char **answer_text, int *status,
                          char *error, size_t error_size) {
    Gathering *wait = gathering_new();
    g_atomic_int_inc(&wait->refs); // the handler's
    gulong gathering = g_signal_connect_data(webrtc, "notify::ice-gathering-state", G_CALLBACK(on_gathering), wait, gathering_unref, 0);
    GstWebRTCSessionDescription *offer = gst_webrtc_session_description_new(GST_WEBRTC_SDP_TYPE_OFFER, sdp); // takes the SDP
    // An offer webrtcbin refuses, or cannot answer, is the peer's fault (400).
    *status = 400;
    GstPromise *promise = gst_promise_new();
    g_signal_emit_by_name(webrtc, "set-remote-description", offer, promise);
    gboolean ok = wait_promise(promise, "the offer was not accepted", error, error_size);
    gst_promise_unref(promise);
    gst_webrtc_session_description_free(offer);
    GstWebRTCSessionDescription *answer = NULL;
    if (ok) {
        promise = gst_promise_new();
        g_signal_emit_by_name(webrtc, "create-answer", NULL, promise);
        ok = wait_promise(promise, "no answer to the offer", error, error_size);
        if (ok) {
            gst_structure_get(gst_promise_get_reply(promise), "answer", GST_TYPE_WEBRTC_SESSION_DESCRIPTION, &answer, NULL);
            if (!answer) { ok = FALSE; sl_web_copy_error(error, error_size, "no answer to the offer"); }
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
            sl_web_copy_error(error, error_size, "webrtcbin has no local description");
        }
    }
    g_signal_handler_disconnect(webrtc, gathering);
    gathering_unref(wait, NULL);
    return ok;
}

// A new viewer needs a key frame now, not at the next interval.
static void force_key_frame(GstElement *rtc) {
    GstElement *enc = gst_bin_get_by_name(GST_BIN(rtc), "enc");
    if (!enc) return;
    GstPad *src = gst_element_get_static_pad(enc, "src");
    gst_pad_send_event(src, gst_video_event_new_upstream_force_key_unit(GST_CLOCK_TIME_NONE, TRUE, 0));
    gst_object_unref(src);
    gst_object_unref(enc);
}

unsigned sl_web_tap_whep(SLWebTap *t, const char *offer_text, unsigned timeout_ms, char **answer_text, int *status, char *error, size_t error_size) {
    *answer_text = NULL;
    *status = 400;
    int pt = -1;
    GstSDPMessage *sdp = parse_offer(offer_text, &pt, error, error_size);
    if (!sdp) return 0;
    GstElement *rtc = NULL, *tee = NULL, *webrtc = NULL;
    pthread_mutex_lock(&t->structure);
    unsigned id = rtc_for_a_viewer(t, &rtc, &tee, status, error, error_size) ? add_session(t, rtc, tee, pt, &webrtc, error, error_size) : 0;
    pthread_mutex_unlock(&t->structure);
    if (id && !webrtc) sl_web_copy_error(error, error_size, "could not link a viewer to the encoder");
    gboolean ok = id && webrtc && negotiate(webrtc, sdp, timeout_ms, answer_text, status, error, error_size);
    if (!(id && webrtc)) gst_sdp_message_free(sdp); // negotiate took it otherwise
    if (ok) force_key_frame(rtc);
    if (rtc) gst_object_unref(rtc);
    if (tee) gst_object_unref(tee);
    if (webrtc) gst_object_unref(webrtc);
    if (!ok) {
        if (id) sl_web_end_sessions(t, id, FALSE, FALSE);
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
    if (found) sl_web_end_sessions(t, session, FALSE, FALSE);
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

