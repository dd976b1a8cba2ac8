// CGstRTSPShim: an RTSP server (gst-rtsp-server) that serves frames pushed from a StreamLens
// stage. Everything gst-rtsp-server needs that Swift cannot do comfortably lives here: GObject
// signals (media-configure), variadic calls (tokens, roles), the GMainLoop on its own thread and
// context, and the appsrc slot that changes whenever the server builds a new media.
// Only StreamLensRTSP imports this module. The header is C-only (no GStreamer types): a sample
// travels as `void *` (a GstSample*), so Swift sees nothing of GStreamer through this fence.
#pragma once
#include <stdbool.h>
#include <stddef.h>

typedef struct SLRtspServer SLRtspServer;

typedef enum { SL_RTSP_ENCODER_X264 = 0, SL_RTSP_ENCODER_OPENH264 = 1 } SLRtspEncoder;

typedef struct {
    const char *address;     // numeric IPv4 or IPv6 address to bind (RTSP and RTP/RTCP)
    unsigned port;           // RTSP port, 1…65535
    const char *mount;       // "/stream"
    SLRtspEncoder encoder;
    unsigned bitrate;        // kbit/s
    unsigned key_int;        // frames between key frames
    bool low_latency;        // x264enc tune=zerolatency speed-preset=ultrafast (openh264enc: complexity=low)
    bool tcp_only;           // RTP interleaved on the RTSP connection only (no UDP sockets at all)
    const char *user;        // Basic authentication: NULL or "" for none
    const char *password;
} SLRtspConfig;

// Binds, configures and starts serving (the server's main loop runs on a thread of its own).
// NULL on failure, with a message in `error` (e.g. "port 8554 on 127.0.0.1 is in use").
SLRtspServer *sl_rtsp_server_start(const SLRtspConfig *config, char *error, size_t error_size);

// Hands one frame (a GstSample*: its buffer and caps) to the current media's appsrc: a shallow
// copy of the buffer (no pixel copy) stamped with the media pipeline's running time. Returns
// true when the frame was queued for clients, false when nobody is watching (dropped, cheaply).
// Call from one thread at a time (the stage's worker).
bool sl_rtsp_server_push(SLRtspServer *server, void *sample);

// RTSP connections open now (any thread).
unsigned sl_rtsp_server_client_count(SLRtspServer *server);

// The launch line of the mount's media factory (for messages and tests); g-allocated, free
// with sl_rtsp_free.
char *sl_rtsp_server_launch_line(SLRtspServer *server);
void sl_rtsp_free(void *pointer);

// Stops accepting, closes every client and session, stops the main loop and frees everything.
// Any thread except the server's own; the pointer is invalid afterwards.
void sl_rtsp_server_stop(SLRtspServer *server);
