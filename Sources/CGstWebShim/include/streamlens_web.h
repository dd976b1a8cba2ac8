// CGstWebShim: a pipeline's video for browsers. A tap on one pad of a running pipeline (a buffer
// probe: a reference to each frame, no pixel copy) feeds, only while someone watches,
//   - a WebRTC pipeline: appsrc ! videoconvert ! vp8enc ! tee, then per viewer
//     queue ! rtpvp8pay ! webrtcbin (encoded once whatever the number of viewers), its sessions
//     negotiated by WHEP (an SDP offer in, the answer with all the server's candidates out);
//   - a JPEG pipeline: appsrc ! videoconvert ! jpegenc ! appsink, at the highest rate a
//     subscriber asked for (MJPEG over HTTP).
// Only StreamLensWeb imports this module. The header is C only: GStreamer objects travel as
// `void *`, so Swift sees nothing of GStreamer, webrtcbin or SDP through this fence.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct SLWebTap SLWebTap;

typedef struct {
    unsigned bitrate;       // kbit/s of the VP8 stream
    unsigned key_seconds;   // at most this long between key frames (a new viewer also asks for one)
    unsigned max_viewers;   // WebRTC sessions at once; more are refused
    unsigned jpeg_quality;  // 1…100
} SLWebConfig;

// Taps `pipeline` (a GstElement*, playing) at the src pad of the element named `at`, or with
// `at` NULL or empty at the last raw video before a sink (the sink pad of the first element,
// walking upstream from the pipeline's last elements, that takes video/x-raw). NULL with a
// message when there is no such element or pad, or it does not carry raw video.
SLWebTap *sl_web_tap_new(void *pipeline, const char *at, const SLWebConfig *config, char *error, size_t error_size);
// Removes the probe, ends every session and subscription (no callback runs after it returns)
// and frees the tap. Not from a streaming thread of the tapped pipeline.
void sl_web_tap_free(SLWebTap *tap);
// The tapped point: "element:pad".
const char *sl_web_tap_point(SLWebTap *tap);
// The next frame to pass the point, waited for up to `timeout_ms`: a GstSample* (its buffer, by
// reference — metas, no pixel copy — and caps) the caller unrefs; NULL when none came in time.
void *sl_web_tap_next_frame(SLWebTap *tap, unsigned timeout_ms);

// WHEP: `offer` an SDP offer (recvonly video). On success returns a session number (> 0) and
// *answer (g-allocated, free with sl_web_free) the SDP answer with the server's candidates in
// it (gathering waited for, at most timeout_ms). 0 with a message otherwise; *status is the HTTP
// status that fits (400 a bad offer, 503 too many viewers, 500 else).
unsigned sl_web_tap_whep(SLWebTap *tap, const char *offer, unsigned timeout_ms, char **answer, int *status, char *error, size_t error_size);
// Ends a session; false when there is none of that number.
bool sl_web_tap_whep_end(SLWebTap *tap, unsigned session);
// WebRTC sessions open now, and of them those whose ICE connection is up.
unsigned sl_web_tap_viewers(SLWebTap *tap, unsigned *connected);
// Frames out of the VP8 encoder and the JPEG encoder since the tap was made (each encodes once
// for all its viewers).
void sl_web_tap_frames(SLWebTap *tap, uint64_t *encoded, uint64_t *jpegs);

// JPEG frames, at most `fps` a second (1…30), to `callback` (from the JPEG pipeline's thread,
// one call at a time; it must not block). Returns a subscription number (> 0).
typedef void (*SLWebJPEGCallback)(void *context, const uint8_t *jpeg, size_t length);
unsigned sl_web_tap_jpeg_subscribe(SLWebTap *tap, unsigned fps, SLWebJPEGCallback callback, void *context);
// No callback of this subscription runs after it returns.
void sl_web_tap_jpeg_unsubscribe(SLWebTap *tap, unsigned subscription);

void sl_web_free(void *pointer);
