// CGstShim's own: what its C files share and Swift never sees (include/ is the module's public
// header). The stage element's instance, which stage_element.c makes, stage_pads.c answers for
// and stage_restart.c flushes; and the pad functions stage_element.c installs.
#pragma once
#include "streamlens_gst.h"
// Our own locks are pthread mutexes, not GMutex: GLib's are futexes that ThreadSanitizer cannot
// see (`make test-tsan` would report every access they guard as a race).
#include <pthread.h>

typedef struct {
    GstBin parent;
    GstElement *sink, *src;   // the stage's input (stage_sink.c) and output (stage_src.c; NULL for a sink stage)
    GstPad *sinkpad, *srcpad; // ghost pads
    GstPad *audiopad;         // the audio input (stage_audio.c): a pad of the bin's own; NULL unless the stage takes audio
    pthread_mutex_t lock;              // guards values, context
    GValue *values;
    guint n_values;
    gpointer context;
    GDestroyNotify release;
    GstClockTime latency;     // atomic
    guint64 arrived;          // atomic
    gint downstream_flow;     // atomic: GST_FLOW_OK, or what downstream returned (EOS…)
    guint64 refused;          // atomic: buffers refused with downstream_flow (downstream ended first) or after input_closed
    gint input_closed;        // atomic: the stage takes no more input (its end was asked for); what came is still processed
    gint end_requested;       // atomic: an EOS was sent to the stage from outside (Ctrl-C)
    guint reading_set;        // 1 + the index of a reading (read-only property) someone tried to set; 0 none
} SLStage;

// stage_restart.c: whether another stage is upstream of this one (its output feeds this one).
G_GNUC_INTERNAL gboolean sl_stage_has_stage_upstream(GstElement *stage);

// stage_sink.c: the stage's input element (named "stage_sink"), accepting `accepted`, and its
// queue's bounds (max_buffers frames; drop: the oldest goes instead of upstream waiting).
G_GNUC_INTERNAL GstElement *sl_stage_sink_new(GstCaps *accepted, guint max_buffers);
G_GNUC_INTERNAL void sl_stage_sink_configure(GstElement *sink, guint max_buffers, gboolean drop);
// stage_element.c: tells Swift a frame was queued at the stage's input (SLStageCallbacks.frame_arrived).
G_GNUC_INTERNAL GstFlowReturn sl_stage_frame_arrived(GstElement *stage);
// stage_element.c: tells Swift audio reached the stage's audio input, or ended there.
G_GNUC_INTERNAL void sl_stage_audio_arrived(GstElement *stage, GstSample *sample);
G_GNUC_INTERNAL void sl_stage_audio_ended(GstElement *stage);
// stage_audio.c: the stage's audio input, a sink pad with no element behind it (so the bin has
// no second sink: the pipeline's preroll and end-of-stream do not wait for audio that may never come).
G_GNUC_INTERNAL GstPad *sl_stage_audio_pad_new(GstPadTemplate *templ);
// stage_src.c: the stage's output element (named "stage_src"), and a serialized event (tags) it
// sends before the next buffer.
G_GNUC_INTERNAL GstElement *sl_stage_src_new(void);
G_GNUC_INTERNAL void sl_stage_src_queue_event(GstElement *src, GstEvent *event);

// stage_pads.c, installed on each stage's pads by sl_instance_init. Internal: not exported from
// libgststreamlens.so.
// The src pad's query function (LATENCY).
G_GNUC_INTERNAL gboolean sl_src_query(GstPad *pad, GstObject *parent, GstQuery *query);
// The sink pad's query function of a pass-through stage (CAPS).
G_GNUC_INTERNAL gboolean sl_sink_query(GstPad *pad, GstObject *parent, GstQuery *query);
// Probes: buffers reaching the stage's input (data: the SLStage), tags reaching it.
G_GNUC_INTERNAL GstPadProbeReturn sl_count_buffer(GstPad *pad, GstPadProbeInfo *info, gpointer data);
G_GNUC_INTERNAL GstPadProbeReturn sl_forward_tags(GstPad *pad, GstPadProbeInfo *info, gpointer data);
