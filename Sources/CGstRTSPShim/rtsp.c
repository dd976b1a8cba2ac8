// See include/streamlens_rtsp.h. An RTSP server with one mount: a shared media factory whose
// pipeline starts with an appsrc. The server builds a new media (and so a new appsrc) for the
// first client after nobody was watching; `media-configure` swaps it into the slot the stage's
// worker pushes to, and the media's `unprepared` empties the slot. The slot follows the media's
// own life, not the pushes: a push that fails (the media paused or flushing between clients)
// leaves it, since the factory may hand that same prepared media to the next client, which
// emits no new `media-configure` (stop 60: a player joining after one was killed mid-start
// waited out the server's 20 s preroll for frames that went nowhere). The server's GMainLoop runs on a thread of its own with its own context, so
// nothing here depends on the host having a main loop.
#include "streamlens_rtsp.h"
#include <gst/gst.h>
#include <gst/app/gstappsrc.h>
#include <gst/video/video.h>
#include <gst/rtsp-server/rtsp-server.h>
#include <string.h>
// Our own locks are pthread mutexes, not GMutex: GLib's are futexes that ThreadSanitizer cannot
// see (`make test-tsan` would report every access they guard as a race).
#include <pthread.h>

// UDP ports for RTP/RTCP come from the address pool, in this range (below Linux's ephemeral
// range). A pair that fails to bind (another server has it) is skipped: gst-rtsp-server takes
// the next one from the pool.
#define SL_RTSP_UDP_PORT_MIN 20000
#define SL_RTSP_UDP_PORT_MAX 29999
// Sessions of UDP clients that vanished without a TEARDOWN are reaped this often (TCP clients
// are cleaned up when their connection closes).
#define SL_RTSP_CLEANUP_SECONDS 2
#define SL_RTSP_ROLE "viewer"

struct SLRtspServer {
    GMainContext *context;
    GMainLoop *loop;
    GThread *thread;
    GstRTSPServer *server;
    GstRTSPMediaFactory *factory;  // our own reference, to disconnect media-configure at the end
    GSource *listen;               // the listening socket's source (stop accepting first)
    GSource *cleanup;              // session reaper
    char *launch;

    pthread_mutex_t lock;                   // guards media, appsrc and payloader
    GstRTSPMedia *media;           // the current media (a reference), or NULL when none is prepared
    GstElement *appsrc;            // its appsrc
    GstElement *payloader;         // its pay0 (key frames on request)
    gboolean stopping;             // sl_rtsp_server_stop began: no more frames will come
};

static void sl_copy_error(char *error, size_t size, const char *text) {
    if (error && size > 0) g_strlcpy(error, text, size);
}

static char *sl_encoder_fragment(const SLRtspConfig *c) {
    switch (c->encoder) {
    case SL_RTSP_ENCODER_OPENH264:
        // bit/s; complexity=low is openh264's fastest mode.
        return g_strdup_printf("openh264enc bitrate=%u gop-size=%u rate-control=bitrate%s",
                               c->bitrate * 1000, c->key_int, c->low_latency ? " complexity=low" : "");
    case SL_RTSP_ENCODER_X264:
    default:
        // zerolatency: no look-ahead and no B-frames, so a frame leaves the encoder as it enters.
        return g_strdup_printf("x264enc bitrate=%u key-int-max=%u%s", c->bitrate, c->key_int,
                               c->low_latency ? " tune=zerolatency speed-preset=ultrafast" : "");
    }
}

// appsrc: live, timestamps set by sl_rtsp_server_push; never blocks the worker and keeps at most
// two frames, dropping the oldest when the encoder falls behind. I420 before the encoder: from
// RGB input videoconvert would otherwise pick Y444, a profile (High 4:4:4) few players decode.
static char *sl_launch_line(const SLRtspConfig *c) {
    char *encoder = sl_encoder_fragment(c);
    char *launch = g_strdup_printf(
        "( appsrc name=src is-live=true format=time do-timestamp=false block=false max-buffers=2 leaky-type=downstream "
        "! videoconvert ! video/x-raw,format=I420 ! %s "
        "! rtph264pay name=pay0 pt=96 config-interval=1 )", encoder);
    g_free(encoder);
    return launch;
}

// A client's DESCRIBE or SETUP waits, on the server's thread, for its media to preroll, which
// takes a frame. Once the server is stopping none will come, and that wait (gst-rtsp-server gives
// up after 20 s) would hold the shutdown. An error on the media's bus ends it at once (the client
// is answered 503); posted before the media's bus is watched, it waits there for the watch.
static void sl_fail_media(GstElement *src) {
    GError *err = g_error_new_literal(GST_STREAM_ERROR, GST_STREAM_ERROR_FAILED, "the server is stopping: no more frames");
    gst_element_post_message(src, gst_message_new_error(GST_OBJECT(src), err, "StreamLens RTSP server stopping"));
    g_error_free(err);
}

// Empties the slot if it still holds `media` (the media was unprepared, or the server ends).
static void sl_forget_media(SLRtspServer *s, GstRTSPMedia *media) {
    pthread_mutex_lock(&s->lock);
    GstElement *src = NULL, *payloader = NULL;
    gboolean held = s->media == media;
    if (held) {
        src = s->appsrc;
        payloader = s->payloader;
        s->media = NULL;
        s->appsrc = NULL;
        s->payloader = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    if (!held) return;
    g_signal_handlers_disconnect_by_data(media, s);
    g_object_unref(media);
    if (src) gst_object_unref(src);
    if (payloader) gst_object_unref(payloader);
}

static void sl_on_media_unprepared(GstRTSPMedia *media, gpointer data) {
    sl_forget_media(data, media);
}

// A new media was built (the first client after nobody was watching): it and its appsrc become
// the slot. The previous media, if any, is gone or going; pushes to it would fail.
static void sl_on_media_configure(GstRTSPMediaFactory *factory, GstRTSPMedia *media, gpointer data) {
    (void)factory;
    SLRtspServer *s = data;
    GstElement *element = gst_rtsp_media_get_element(media);
    GstElement *src = gst_bin_get_by_name_recurse_up(GST_BIN(element), "src");
    GstElement *payloader = gst_bin_get_by_name_recurse_up(GST_BIN(element), "pay0");
    gst_object_unref(element);
    if (!src) {
        if (payloader) gst_object_unref(payloader);
        return;
    }
    g_signal_connect(media, "unprepared", G_CALLBACK(sl_on_media_unprepared), s);
    pthread_mutex_lock(&s->lock);
    GstElement *old_src = s->appsrc, *old_payloader = s->payloader;
    GstRTSPMedia *old_media = s->media;
    s->media = g_object_ref(media);
    s->appsrc = src;
    s->payloader = payloader;
    GstElement *failing = s->stopping ? gst_object_ref(src) : NULL;
    pthread_mutex_unlock(&s->lock);
    if (old_media) {
        g_signal_handlers_disconnect_by_data(old_media, s);
        g_object_unref(old_media);
    }
    if (old_src) gst_object_unref(old_src);
    if (old_payloader) gst_object_unref(old_payloader);
    if (failing) {
        sl_fail_media(failing);
        gst_object_unref(failing);
    }
}

// A client joining a shared media would wait for the encoder's next key frame (up to key-int
// frames): ask for one now. The event goes upstream from the payloader to the encoder.
static void sl_on_play_request(GstRTSPClient *client, GstRTSPContext *ctx, gpointer data) {
    (void)client; (void)ctx;
    SLRtspServer *s = data;
    pthread_mutex_lock(&s->lock);
    GstElement *payloader = s->payloader ? gst_object_ref(s->payloader) : NULL;
    pthread_mutex_unlock(&s->lock);
    if (!payloader) return;
    gst_element_send_event(payloader, gst_video_event_new_upstream_force_key_unit(GST_CLOCK_TIME_NONE, TRUE, 0));
    gst_object_unref(payloader);
}

// Clients are handled on the server's thread (its thread pool is told to make no threads of its
// own: the default, one pool thread, would run a late PLAY after sl_free), as is the shutdown
// that closes them, so `s` outlives every signal a client can emit.
static void sl_on_client_connected(GstRTSPServer *server, GstRTSPClient *client, gpointer data) {
    (void)server;
    g_signal_connect(client, "play-request", G_CALLBACK(sl_on_play_request), data);
}

bool sl_rtsp_server_push(SLRtspServer *s, void *sample_pointer) {
    GstSample *sample = sample_pointer;
    pthread_mutex_lock(&s->lock);
    GstElement *src = s->appsrc ? gst_object_ref(s->appsrc) : NULL;
    pthread_mutex_unlock(&s->lock);
    if (!src) return false;

    bool pushed = false;
    GstBuffer *buffer = gst_sample_get_buffer(sample);
    GstCaps *caps = gst_sample_get_caps(sample);
    // The media pipeline has a clock once it is PLAYING (live media go there while preparing).
    // Before that, there is nobody to push to.
    GstClock *clock = gst_element_get_clock(src);
    if (clock && buffer && caps) {
        GstCaps *current = gst_app_src_get_caps(GST_APP_SRC(src));
        if (current != caps && (!current || !gst_caps_is_equal(current, caps))) gst_app_src_set_caps(GST_APP_SRC(src), caps);
        if (current) gst_caps_unref(current);
        // Upstream's timestamps mean nothing in the media pipeline: the frame is stamped with
        // the media pipeline's running time now. The copy shares the memory (no pixel copy).
        GstClockTime now = gst_clock_get_time(clock), base = gst_element_get_base_time(src);
        GstBuffer *copy = gst_buffer_copy(buffer);
        GST_BUFFER_PTS(copy) = now > base ? now - base : 0;
        GST_BUFFER_DTS(copy) = GST_CLOCK_TIME_NONE;
        // (Flushing between clients: the frame is dropped; the slot stays until the media's
        // `unprepared`.)
        pushed = gst_app_src_push_buffer(GST_APP_SRC(src), copy) == GST_FLOW_OK; // takes the copy
    }
    if (clock) gst_object_unref(clock);
    gst_object_unref(src);
    return pushed;
}

unsigned sl_rtsp_server_client_count(SLRtspServer *s) {
    GList *clients = gst_rtsp_server_client_filter(s->server, NULL, NULL);
    unsigned n = g_list_length(clients);
    g_list_free_full(clients, g_object_unref);
    return n;
}

char *sl_rtsp_server_launch_line(SLRtspServer *s) { return g_strdup(s->launch); }
void sl_rtsp_free(void *pointer) { g_free(pointer); }

static gboolean sl_cleanup_sessions(gpointer data) {
    SLRtspServer *s = data;
    GstRTSPSessionPool *pool = gst_rtsp_server_get_session_pool(s->server);
    gst_rtsp_session_pool_cleanup(pool);
    g_object_unref(pool);
    return G_SOURCE_CONTINUE;
}

static gpointer sl_loop_thread(gpointer data) {
    SLRtspServer *s = data;
    g_main_context_push_thread_default(s->context);
    g_main_loop_run(s->loop);
    g_main_context_pop_thread_default(s->context);
    return NULL;
}

static GstRTSPFilterResult sl_remove_session(GstRTSPSessionPool *pool, GstRTSPSession *session, gpointer data) {
    (void)pool; (void)session; (void)data;
    return GST_RTSP_FILTER_REMOVE;
}

static GstRTSPFilterResult sl_close_client(GstRTSPServer *server, GstRTSPClient *client, gpointer data) {
    (void)server; (void)client; (void)data;
    return GST_RTSP_FILTER_REMOVE; // closes the connection
}

// Runs on the server's thread: stop accepting, drop every session (their media stop) and close
// every connection, then let the loop end.
static gboolean sl_shutdown_in_loop(gpointer data) {
    SLRtspServer *s = data;
    if (s->listen) g_source_destroy(s->listen);
    if (s->cleanup) g_source_destroy(s->cleanup);
    GstRTSPSessionPool *pool = gst_rtsp_server_get_session_pool(s->server);
    g_list_free_full(gst_rtsp_session_pool_filter(pool, sl_remove_session, NULL), g_object_unref);
    g_object_unref(pool);
    g_list_free_full(gst_rtsp_server_client_filter(s->server, sl_close_client, NULL), g_object_unref);
    g_main_loop_quit(s->loop);
    return G_SOURCE_REMOVE;
}

static void sl_free(SLRtspServer *s) {
    if (s->factory) {
        g_signal_handlers_disconnect_by_data(s->factory, s);
        g_object_unref(s->factory);
    }
    if (s->listen) g_source_unref(s->listen);
    if (s->cleanup) g_source_unref(s->cleanup);
    if (s->server) {
        g_signal_handlers_disconnect_by_data(s->server, s);
        g_object_unref(s->server);
    }
    if (s->media) {
        g_signal_handlers_disconnect_by_data(s->media, s);
        g_object_unref(s->media);
    }
    if (s->appsrc) gst_object_unref(s->appsrc);
    if (s->payloader) gst_object_unref(s->payloader);
    g_main_loop_unref(s->loop);
    g_main_context_unref(s->context);
    g_free(s->launch);
    pthread_mutex_destroy(&s->lock);
    g_free(s);
}

void sl_rtsp_server_stop(SLRtspServer *s) {
    if (!s) return;
    if (s->thread) {
        // The current media (maybe still preparing) fails now; one configured from here on
        // fails as it is configured (sl_on_media_configure reads the flag under the same lock).
        pthread_mutex_lock(&s->lock);
        s->stopping = TRUE;
        GstElement *src = s->appsrc ? gst_object_ref(s->appsrc) : NULL;
        pthread_mutex_unlock(&s->lock);
        if (src) {
            sl_fail_media(src);
            gst_object_unref(src);
        }
        // Before any client request still queued on the loop (it could start another media).
        GSource *idle = g_idle_source_new();
        g_source_set_priority(idle, G_PRIORITY_HIGH);
        g_source_set_callback(idle, sl_shutdown_in_loop, s, NULL);
        g_source_attach(idle, s->context);
        g_source_unref(idle);
        g_thread_join(s->thread);
    }
    sl_free(s);
}

SLRtspServer *sl_rtsp_server_start(const SLRtspConfig *c, char *error, size_t error_size) {
    gst_init(NULL, NULL); // idempotent: a server made outside any pipeline (a stage driven in memory) needs it too
    if (!c->address || !c->mount || c->port == 0 || c->port > 65535) {
        sl_copy_error(error, error_size, "an address, a port (1…65535) and a mount are needed");
        return NULL;
    }
    GInetAddress *inet = g_inet_address_new_from_string(c->address);
    if (!inet) {
        char *text = g_strdup_printf("address %s is not a numeric IPv4 or IPv6 address", c->address);
        sl_copy_error(error, error_size, text);
        g_free(text);
        return NULL;
    }
    gboolean any = g_inet_address_get_is_any(inet);
    g_object_unref(inet);
    const char *encoder = c->encoder == SL_RTSP_ENCODER_OPENH264 ? "openh264enc" : "x264enc";
    GstElementFactory *encoder_factory = gst_element_factory_find(encoder);
    if (!encoder_factory) {
        char *text = g_strdup_printf("encoder %s is not installed (gst-inspect-1.0 %s)", encoder, encoder);
        sl_copy_error(error, error_size, text);
        g_free(text);
        return NULL;
    }
    gst_object_unref(encoder_factory);

    SLRtspServer *s = g_new0(SLRtspServer, 1);
    pthread_mutex_init(&s->lock, NULL);
    s->context = g_main_context_new();
    s->loop = g_main_loop_new(s->context, FALSE);
    s->launch = sl_launch_line(c);

    // The launch line is parsed only when the first client asks: parse it once now, so a
    // pipeline that cannot be built is an error at start rather than a 503 for every client.
    GError *err = NULL;
    GstElement *check = gst_parse_launch(s->launch, &err);
    if (check) gst_object_unref(gst_object_ref_sink(check));
    if (err) {
        char *text = g_strdup_printf("cannot build the stream's pipeline (%s): %s", s->launch, err->message);
        sl_copy_error(error, error_size, text);
        g_free(text);
        g_error_free(err);
        sl_free(s);
        return NULL;
    }

    s->server = gst_rtsp_server_new();
    gst_rtsp_server_set_address(s->server, c->address);
    char *service = g_strdup_printf("%u", c->port);
    gst_rtsp_server_set_service(s->server, service);
    g_free(service);
    GstRTSPThreadPool *threads = gst_rtsp_thread_pool_new();
    gst_rtsp_thread_pool_set_max_threads(threads, 0); // clients on the server's own loop thread
    gst_rtsp_server_set_thread_pool(s->server, threads);
    g_object_unref(threads);

    s->factory = gst_rtsp_media_factory_new();
    gst_rtsp_media_factory_set_launch(s->factory, s->launch);
    gst_rtsp_media_factory_set_shared(s->factory, TRUE);
    if (c->tcp_only) gst_rtsp_media_factory_set_protocols(s->factory, GST_RTSP_LOWER_TRANS_TCP);
    // RTP/RTCP UDP sockets bind to the any-address even when the server has an address; an
    // address pool holding only the bind address makes them bind there.
    if (!any) {
        GstRTSPAddressPool *pool = gst_rtsp_address_pool_new();
        if (!gst_rtsp_address_pool_add_range(pool, c->address, c->address, SL_RTSP_UDP_PORT_MIN, SL_RTSP_UDP_PORT_MAX, 0)) {
            g_object_unref(pool);
            sl_copy_error(error, error_size, "cannot make an RTP address pool for the bind address");
            sl_free(s);
            return NULL;
        }
        gst_rtsp_media_factory_set_address_pool(s->factory, pool);
        g_object_unref(pool);
    }
    g_signal_connect(s->factory, "media-configure", G_CALLBACK(sl_on_media_configure), s);
    g_signal_connect(s->server, "client-connected", G_CALLBACK(sl_on_client_connected), s);

    if (c->user && c->user[0]) {
        // Basic authentication: one user whose token carries the viewer role; only that role
        // may access and construct the mount's media, so anonymous requests get 401.
        GstRTSPAuth *auth = gst_rtsp_auth_new();
        GstRTSPToken *token = gst_rtsp_token_new(GST_RTSP_TOKEN_MEDIA_FACTORY_ROLE, G_TYPE_STRING, SL_RTSP_ROLE, NULL);
        char *basic = gst_rtsp_auth_make_basic(c->user, c->password ? c->password : "");
        gst_rtsp_auth_add_basic(auth, basic, token);
        g_free(basic);
        gst_rtsp_token_unref(token);
        gst_rtsp_server_set_auth(s->server, auth);
        g_object_unref(auth);
        gst_rtsp_media_factory_add_role(s->factory, SL_RTSP_ROLE,
                                        GST_RTSP_PERM_MEDIA_FACTORY_ACCESS, G_TYPE_BOOLEAN, TRUE,
                                        GST_RTSP_PERM_MEDIA_FACTORY_CONSTRUCT, G_TYPE_BOOLEAN, TRUE, NULL);
    }

    GstRTSPMountPoints *mounts = gst_rtsp_server_get_mount_points(s->server);
    gst_rtsp_mount_points_add_factory(mounts, c->mount, g_object_ref(s->factory)); // takes a reference
    g_object_unref(mounts);

    // create_source (not attach) to get the GError: a busy port is the common failure.
    s->listen = gst_rtsp_server_create_source(s->server, NULL, &err);
    if (!s->listen) {
        gboolean busy = err && (g_error_matches(err, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE) ||
                                strstr(err->message, "Address already in use"));
        char *text = busy ? g_strdup_printf("port %u on %s is in use (another server is listening there; choose another port=)", c->port, c->address)
                          : g_strdup_printf("cannot listen on %s port %u: %s", c->address, c->port, err ? err->message : "unknown error");
        sl_copy_error(error, error_size, text);
        g_free(text);
        if (err) g_error_free(err);
        sl_free(s);
        return NULL;
    }
    g_source_attach(s->listen, s->context);
    s->cleanup = g_timeout_source_new_seconds(SL_RTSP_CLEANUP_SECONDS);
    g_source_set_callback(s->cleanup, sl_cleanup_sessions, s, NULL);
    g_source_attach(s->cleanup, s->context);

    s->thread = g_thread_try_new("streamlens-rtsp", sl_loop_thread, s, &err);
    if (!s->thread) {
        char *text = g_strdup_printf("cannot start the RTSP server's thread: %s", err ? err->message : "unknown error");
        sl_copy_error(error, error_size, text);
        g_free(text);
        if (err) g_error_free(err);
        g_source_destroy(s->listen);
        g_source_destroy(s->cleanup);
        sl_free(s);
        return NULL;
    }
    return s;
}
