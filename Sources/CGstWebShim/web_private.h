// What web.c, web_whep.c and web_jpeg.c share: the tap's structure and the helpers each uses
// of the others. Not part of the module's header.
#ifndef STREAMLENS_WEB_PRIVATE_H
#define STREAMLENS_WEB_PRIVATE_H
#include "streamlens_web.h"
#include <gst/gst.h>
#include <pthread.h>

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

// web.c
void sl_web_copy_error(char *error, size_t size, const char *text);
GstElement *sl_web_build_pipeline(const char *launch, char *error, size_t error_size);
// Plays a built pipeline; on failure frees it and returns NULL.
GstElement *sl_web_play_pipeline(GstElement *p, char *error, size_t error_size);
void sl_web_stop_pipeline(GstElement *p);
// web_whep.c: sessions matching `which` (or all when `which` is 0 and `all`; with `reap`, the
// dead and the never-connected too) and, when none is left, the WebRTC pipeline, torn down.
void sl_web_end_sessions(SLWebTap *t, unsigned which, gboolean all, gboolean reap);
// web_jpeg.c: the JPEG pipeline out of the tap and stopped.
void sl_web_stop_jpeg(SLWebTap *t);

#endif
