// CGstShim: what Swift cannot import from GStreamer directly (macros, variadic functions,
// g_signal_connect) and the GObject type that makes a Swift stage a GStreamer element.
// Everything here is prefixed `sl_`. Only StreamLensGst imports this module.
// Each section names the C file that implements it; what those files share, and Swift does not
// see, is in shim_private.h beside them.
#pragma once
#include <gst/gst.h>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/video/video.h>

// ---- Output files (outputs.c) ---------------------------------------------------------
// Points `filesink` at `temporary`. A new file (`replace_at_end` FALSE) is renamed onto `target`
// when the first buffer reaches the sink; an existing one only by sl_output_file_replace, which
// the host calls after the pipeline stopped, once the output was finished. FALSE if it has no
// sink pad. The temporary name is remembered for sl_output_files_remove_pending until moved.
gboolean sl_output_file_guard(GstElement *filesink, const char *temporary, const char *target, gboolean replace_at_end);
enum {
    SL_OUTPUT_NOTHING = 0,  // no buffer yet: the temporary file is still there, empty
    SL_OUTPUT_MOVED = 1,    // renamed onto the target
    SL_OUTPUT_WRITING = 2,  // data in the temporary file, to replace the existing target at the end
};
// SL_OUTPUT_*, or -errno: the rename failed (the data is in the temporary file).
int sl_output_file_state(GstElement *filesink);
// End-of-stream reached the sink: the file is complete once the sink stopped.
gboolean sl_output_file_ended(GstElement *filesink);
// Renames the temporary file onto the target now: 0 or errno.
int sl_output_file_replace(GstElement *filesink);
// Forgets the filesink's record (its temporary name no longer pending).
void sl_output_file_release(GstElement *filesink);
// For a pipeline left to a stuck state change (the host no longer waits for it): from now on the
// filesink's probes move nothing and let no buffer through. The record stays with the element
// (the probes borrow it), instead of sl_output_file_release.
void sl_output_file_abandon(GstElement *filesink);
// Removes every temporary file not moved yet. Async-signal-safe: for an interrupt's handler
// that ends the process at once.
void sl_output_files_remove_pending(void);

// ---- Elements (elements.c) ---------------------------------------------------------------
// Macros and variadics as functions, and small element helpers.
gboolean sl_is_bin(GstElement *element);
gboolean sl_is_element(gpointer object);
// The factory name ("videotestsrc", "lenspass"), or NULL. Owned by the factory.
const char *sl_element_factory_name(GstElement *element);
GstElement *sl_pipeline_parse(const char *description, GError **error);

// The element's class ("Codec/Muxer", "Sink/File", …), or "".
const char *sl_element_klass(GstElement *element);
// Sends EOS to whatever each of the element's src pads is linked to: after the element failed,
// the rest of the pipeline can still finish (encoders flush, muxers write their index).
void sl_element_send_eos_downstream(GstElement *element);
// TRUE when one of the element's sink pads is linked to nothing (a `demux.audio_0 ! queue`
// whose pad never appeared leaves the queue waiting for ever).
gboolean sl_element_has_unlinked_sink_pad(GstElement *element);

// ---- Properties by name (properties.c) ---------------------------------------------------
// Parses `name=value` into the property named (GStreamer's own conversion, as gst-launch does).
gboolean sl_object_set_from_string(gpointer object, const char *name, const char *value);
// For the control channel. Flags of a property: 0 when there is none, else SL_PROPERTY_EXISTS
// plus WRITABLE and MUTABLE_PLAYING when they apply (MUTABLE_PLAYING: GStreamer marks it
// changeable while playing, or controllable).
enum { SL_PROPERTY_EXISTS = 1, SL_PROPERTY_WRITABLE = 2, SL_PROPERTY_MUTABLE_PLAYING = 4 };
guint sl_object_property_flags(gpointer object, const char *name);
// Whether `value` parses as the property's type and lies in its range (nothing is set).
gboolean sl_object_value_valid(gpointer object, const char *name, const char *value);
// Converts `value` to the property's type (GStreamer's syntax) and sets it; FALSE, leaving the
// property alone, when the text is not a value of that type.
gboolean sl_object_set_checked(gpointer object, const char *name, const char *value);
// A property's value as text; g_free the result.
char *sl_object_get_as_string(gpointer object, const char *name);

// The pipeline is ending on purpose (an interrupt, a closed window, a removed source): a
// watchdog must not take that end of stream for an outage. Kept on the top-level bin, so that
// several pipelines in one process (streamlens serve) end one at a time.
void sl_pipeline_set_ending(GstElement *pipeline, gboolean ending);
// Whether the top-level bin holding `element` is ending (FALSE outside a pipeline).
gboolean sl_element_pipeline_ending(GstElement *element);
// The name of the source a pipeline runs for (streamlens serve: one pipeline per source), kept
// on the top-level bin like the ending flag; its stages label their metrics with it.
void sl_pipeline_set_source_name(GstElement *pipeline, const char *name);
// The source name of the top-level bin holding `element` (a copy: g_free it), or NULL.
char *sl_element_pipeline_source_name(GstElement *element);
// What the stages of one pipeline share (PipelineShared in Swift), kept on the top-level bin
// holding `element`: made by `make` the first time any of them asks, freed by `release` with
// the bin. Borrowed: valid while the bin lives (the caller takes a reference of its own).
void *sl_element_pipeline_shared(GstElement *element, void *(*make)(void), void (*release)(void *));

// ---- Buffers (buffers.c) -----------------------------------------------------------------
GstClockTime sl_buffer_pts(GstBuffer *buffer);
GstClockTime sl_buffer_duration(GstBuffer *buffer);
// Sets PTS (and clears DTS) of a writable buffer.
void sl_buffer_set_pts(GstBuffer *buffer, GstClockTime pts);
// Running time now on the pipeline clock, or GST_CLOCK_TIME_NONE without a clock.
GstClockTime sl_element_running_time_now(GstElement *element);
GstBuffer *sl_buffer_make_writable(GstBuffer *buffer);
// TRUE when writing into the buffer's pixels would copy them first: its memory is held elsewhere
// too (a tee's other branch, a shallow copy) or read-only.
gboolean sl_buffer_pixels_shared(GstBuffer *buffer);
/// A buffer handed to GStreamer (release, before the push) and taken from it (acquire, after the
/// pull), for ThreadSanitizer: GLib's futex-based locks are invisible to it. Empty otherwise.
void sl_handoff_release(const void *object);
void sl_handoff_acquire(const void *object);
// The bytes the planes of a buffer's GstVideoMeta reach to (offset + stride × plane height, the
// largest), or 0 when it has no video meta (the caps' frame size applies then).
gsize sl_buffer_video_meta_size(GstBuffer *buffer);

// ---- Bus messages (messages.c) -----------------------------------------------------------
GstMessageType sl_message_type(GstMessage *message);
void sl_stage_post_error(GstElement *stage, const char *message, const char *debug);
// What a source's streaming task says when downstream refused its frames for good (not linked,
// not negotiated): "Internal data stream error", "streaming stopped, reason …".
void sl_stage_post_flow_error(GstElement *stage, GstFlowReturn flow);
// An element message named "streamlens" with string fields kind and text, for the host's log.
void sl_stage_post_info(GstElement *stage, const char *kind, const char *text);
// An event a stage found on a frame (FrameEvent), for applications: an element message
// "streamlens-event" with type, zone, label, object-id (int), direction (when given), time and
// dwell (seconds, when >= 0) and json (the event as lensmetadata writes it).
void sl_stage_post_event(GstElement *stage, const char *type, const char *zone, const char *label, gint object_id,
                         const char *direction, double time, double dwell, const char *json);
// The json field of a "streamlens-event" element message (owned by the message); NULL otherwise.
const char *sl_message_parse_event(GstMessage *message);
// A warning from the stage (the pipeline goes on).
void sl_stage_post_warning(GstElement *stage, const char *message);
// Reads such a message; returns FALSE for any other message. Strings stay owned by message.
gboolean sl_message_parse_info(GstMessage *message, const char **kind, const char **text);

// ---- Preview windows (preview_window.c) --------------------------------------------------
// The key of a key-press navigation message (a video sink posts one for every
// key no element upstream handled), newly allocated, or NULL for any other message.
gchar *sl_navigation_key_press(GstMessage *message);
// An error from a video window sink saying its window was closed (ximagesink "Output window was
// closed", glimagesink "Quit requested": RESOURCE_ERROR_NOT_FOUND from a GstVideoOverlay).
gboolean sl_error_is_window_closed(GstMessage *message);
// A video window sink's frames shown and dropped as late (GstBaseSink "stats"); FALSE for any
// other element.
gboolean sl_window_sink_stats(GstElement *element, guint64 *rendered, guint64 *dropped);
// A live pipeline's latency: how long after capture a clock-synced sink shows each frame
// (GST_CLOCK_TIME_NONE when the pipeline is not live or cannot say).
GstClockTime sl_live_latency(GstElement *pipeline);

// ---- Stage elements (stage_element.c) ----------------------------------------------------
// A stage element is a GstBin holding its input (a sink of the project's own, stage_sink.c) and
// its output (stage_src.c), not linked to each other: Swift takes frames from the first and
// pushes them out of the second — on the stage's worker thread, or in lossless mode on the
// upstream streaming thread itself (`frame_arrived`). Properties are declared once, in a table
// handed over at registration.

typedef enum { SL_PROP_BOOL = 0, SL_PROP_INT = 1, SL_PROP_DOUBLE = 2, SL_PROP_STRING = 3 } SLPropKind;

typedef struct {
    const char *name;
    const char *blurb;
    SLPropKind kind;
    double default_number;     // bool/int/double (ranges are checked in Swift)
    const char *default_string;               // string (may be NULL)
    gboolean mutable_playing;
    gboolean read_only;        // a reading the stage publishes (sl_stage_publish_string)
} SLPropSpec;

typedef struct {
    const char *name;          // element factory name, e.g. "lenspass"
    const char *longname;
    const char *description;
    const char *sink_caps;     // caps the stage accepts, e.g. "video/x-raw"
    gboolean caps_passthrough; // output caps equal input caps: answer caps queries downstream
    gboolean is_sink;          // a sink stage: only the input and a sink pad (it ends the pipeline)
    const char *audio_caps;    // non-NULL: the stage also takes audio of these caps on a sink pad named
                               // "audio" (it ends there: nothing is passed on), handed to audio_arrived
    guint type_id;             // handed back to `start`
    const SLPropSpec *props;
    guint n_props;
} SLStageInfo;

// Calls from the element into Swift. Function pointers set once; they capture nothing, the
// Swift side finds its state through sl_stage_get_context.
typedef struct {
    // READY→PAUSED, after the children are PAUSED. Return FALSE after sl_stage_post_error.
    gboolean (*start)(GstElement *stage, guint type_id);
    // PAUSED→READY, after the children are READY (pulls and pushes return at once): join here.
    void (*stop)(GstElement *stage);
    // A property was set (on the setter's thread) while a context exists.
    void (*property_changed)(GstElement *stage, guint index);
    // A frame was queued at the stage's input (on the upstream streaming thread, no lock held):
    // a stage running in-line takes and processes it now and returns what downstream answered;
    // otherwise GST_FLOW_OK (its worker takes it).
    GstFlowReturn (*frame_arrived)(GstElement *stage);
    // A buffer reached the stage's audio input (on the audio's streaming thread, no lock held),
    // as a sample with the pad's caps and segment; the callee takes its own reference to keep it.
    void (*audio_arrived)(GstElement *stage, GstSample *sample);
    // End-of-stream reached the audio input.
    void (*audio_ended)(GstElement *stage);
} SLStageCallbacks;

void sl_stage_set_callbacks(SLStageCallbacks callbacks);
// Registers the stage type (once per process) and its element factory: in-process (plugin NULL,
// the CLI) or as a feature of a loaded plugin (libgststreamlens.so).
gboolean sl_stage_register(const SLStageInfo *info, GstPlugin *plugin);
// Removes a plugin of that name from the registry (the CLI registers the same stages in-process).
void sl_registry_forget_plugin(const char *name);
gboolean sl_is_stage(GstElement *element);

// The next frame of the stage's input, within `timeout`: a sample of its own (its caps and
// segment as they stood for it) holding the only reference the stage keeps to the buffer, so the
// worker writes into a frame nobody else holds without a copy. NULL on timeout, at the end of
// the stream, or when the stage is not running (READY: at once).
GstSample *sl_stage_pull(GstElement *stage, GstClockTime timeout);
// TRUE once the input received end-of-stream and every frame before it was pulled.
gboolean sl_stage_input_ended(GstElement *stage);
// In-line: from now on (until the stage stops) the upstream streaming thread, having queued a
// frame, calls `frame_arrived`, which takes it (and any queued before) with sl_stage_take and
// processes it there: no hand-over to the worker, no wake-up.
void sl_stage_set_in_line(GstElement *stage);
// The oldest queued frame as sl_stage_pull gives it, or NULL at once when none is queued.
GstSample *sl_stage_take(GstElement *stage);
// Whether the stage runs in-line (sl_stage_set_in_line, until it stops).
gboolean sl_stage_in_line(GstElement *stage);
// Waits within `timeout` for end-of-stream at the input, without taking frames (frames queued
// before it may remain: sl_stage_take); TRUE once it came. For a worker whose frames are taken
// in-line.
gboolean sl_stage_wait_input_end(GstElement *stage, GstClockTime timeout);
// Whether the stage has an output (a sink stage has none: its frames end with it).
gboolean sl_stage_has_output(GstElement *stage);
// ---- The stage's output (stage_src.c)
// Pushes a frame downstream (the buffer is taken), with stream-start first, and its caps and
// segment (NULL: TIME from 0, kept) sent before it when they differ from the last ones; tags
// that reached the input since go first. One thread at a time. Returns what downstream answered.
GstFlowReturn sl_stage_push(GstElement *stage, GstBuffer *buffer, GstCaps *caps, const GstSegment *segment);
// Frames downstream took from the stage's output since it started (0 for a sink stage).
guint64 sl_stage_frames_pushed(GstElement *stage);
// Ends the output: end-of-stream downstream (stream-start and a segment first, if nothing was sent).
void sl_stage_push_end_of_stream(GstElement *stage);
// Context owned by the element: released with `release` at the next set or in finalize.
void sl_stage_set_context(GstElement *stage, gpointer context, GDestroyNotify release);
gpointer sl_stage_get_context(GstElement *stage);

// Property values (thread-safe copies).
gboolean sl_stage_get_bool(GstElement *stage, guint index);
gint64 sl_stage_get_int(GstElement *stage, guint index);
double sl_stage_get_double(GstElement *stage, guint index);
char *sl_stage_dup_string(GstElement *stage, guint index); // g_free the result
// Sets a reading's value (a read-only string property) without telling the stage.
void sl_stage_publish_string(GstElement *stage, guint index, const char *value);

// FALSE when the spec changed the stage's inner input through the child proxy
// (`lenspass stage_sink::sync=true`), which would hang or break the bridge.
gboolean sl_stage_internals_intact(GstElement *stage);
// Worker mode: lossless = back-pressure, nothing dropped; live = newest frame wins.
/// The stage's input queue: at most `frames` frames; when full, `drop`: the oldest goes (live:
/// the newest frame wins, upstream never waits), else upstream waits (lossless). Lossless holds
/// SL_LOSSLESS_QUEUE frames; SL_SETUP_QUEUE at most while the stage sets up on its first frame.
#define SL_LOSSLESS_QUEUE 4
#define SL_SETUP_QUEUE 30
void sl_stage_configure_queue(GstElement *stage, guint frames, gboolean drop);

// ---- Stage pads (stage_pads.c) -----------------------------------------------------------
// What a stage's pads answer (latency, caps), count, and refuse; the tags they hand on.
// Latency this stage adds on top of upstream's (answered on its src pad's LATENCY query).
void sl_stage_set_latency(GstElement *stage, GstClockTime latency);
// Whether upstream of the stage is live (a LATENCY query through the sink pad's peer).
gboolean sl_stage_upstream_is_live(GstElement *stage);
// Buffers that reached the stage's input (pulled + dropped).
guint64 sl_stage_buffers_arrived(GstElement *stage);
// Buffers refused because downstream of the stage had ended the stream (a sink that wanted N
// frames): upstream had more to give.
guint64 sl_stage_buffers_refused(GstElement *stage);
// What the stage's input answers from now on: GST_FLOW_OK, or downstream's EOS/error (see stage_pads.c).
void sl_stage_set_downstream_flow(GstElement *stage, GstFlowReturn flow);
// Whether an EOS was sent to the stage from outside (the pipeline's, on Ctrl-C): its worker then
// delivers what it holds and ends its output (sl_send_event, stage_element.c).
gboolean sl_stage_end_requested(GstElement *stage);
GstFlowReturn sl_stage_downstream_flow(GstElement *stage);

// ---- Regions of interest (regions.c) -----------------------------------------------------
// Regions of interest (GstVideoRegionOfInterestMeta) on a buffer, in Intel DL Streamer's layout
// (regions.c): roi_type = the label; a "detection" parameter structure with x_min, y_min, x_max,
// y_max normalised to the frame, label_id and confidence; an "object_id" structure (field "id")
// once a tracker has given the region one; "keypoints" (field "points": x0, y0, x1, y1…
// normalised to the frame) and "attributes" (one string field per attribute) when present. The
// metas' own ids are 0, 1, 2… in the buffer. Coordinates in SLRegion are frame pixels.
typedef struct {
    char label[64];
    double x, y, width, height;
    double confidence;   // -1 when the meta has none
    gint label_id;       // -1 when unknown
    gint object_id;      // -1 until a tracker assigns one
    char estimate[16];   // "" measured on this frame; "held" or "predicted" otherwise
    guint classification_count; // classification structures (a second model's classes)
    guint landmark_count;       // points of the "landmarks" structure, landmark_dims (2, 3) values each
    guint landmark_dims;
    double landmark_presence;   // -1 when none
    guint keypoint_count;
    guint attribute_count;
    guint mask_width, mask_height; // the "mask" structure's size; 0 when the region has no mask
    gpointer meta;       // filled by sl_buffer_get_regions: the meta, for the two readers below
} SLRegion;
// What second models found on a region (lensclassify), for sl_buffer_add_region / set_region:
// one structure per classification, named by its attribute, with DL Streamer's fields label,
// label_id, confidence (and attribute_name); and a "landmarks" structure: "points" (x, y
// normalised to the frame, z divided by the frame's width, `dims` values a point), "dimensions",
// "presence" (when >= 0) and "attribute_name".
typedef struct {
    guint classification_count;
    const char *const *classification_names;
    const char *const *classification_labels;
    const gint *classification_ids;
    const double *classification_confidences;
    guint landmark_count;
    guint landmark_dims;
    const double *landmarks;     // frame pixels, landmark_dims values a point
    const char *landmark_name;
    double landmark_presence;
    // The object's outline (a "mask" structure: "width", "height", "format" "GRAY8", "data" a
    // GstBuffer of width x height coverage bytes, 255 = the object, row-major, stretched over the
    // region's rectangle). mask NULL: none.
    guint mask_width, mask_height;
    const guint8 *mask;
} SLRegionResults;
// Adds a region (keypoints: keypoint_count x, y pairs in frame pixels; names/values:
// attribute_count strings each; results may be NULL) for a frame of width x height pixels.
void sl_buffer_add_region(GstBuffer *buffer, guint frame_width, guint frame_height, const SLRegion *region,
                          const double *keypoints, const char *const *names, const char *const *values, const SLRegionResults *results);
// Replaces region `index` (its rectangle, label and parameters) in place; FALSE when there is none.
gboolean sl_buffer_set_region(GstBuffer *buffer, guint index, guint frame_width, guint frame_height, const SLRegion *region,
                              const double *keypoints, const char *const *names, const char *const *values, const SLRegionResults *results);
// Fills up to `max` regions (regions may be NULL with max 0); returns how many the buffer has.
guint sl_buffer_get_regions(GstBuffer *buffer, guint frame_width, guint frame_height, SLRegion *regions, guint max);
// A region's keypoints (up to `max` pairs, frame pixels) and attribute `n` (strings owned by the
// meta), for a region sl_buffer_get_regions filled, while its buffer lives: no second walk of
// the buffer's metas.
guint sl_region_keypoints(const SLRegion *region, guint frame_width, guint frame_height, double *xy, guint max);
gboolean sl_region_attribute(const SLRegion *region, guint n, const char **name, const char **value);
// Classification `n` (strings owned by the meta) and the landmarks (up to `max` points of
// landmark_dims values, frame pixels; the name owned by the meta) of such a region.
gboolean sl_region_classification(const SLRegion *region, guint n, const char **name, const char **label, gint *label_id, double *confidence);
guint sl_region_landmarks(const SLRegion *region, guint frame_width, guint frame_height, double *values, guint max, const char **name);
// Copies the region's mask (mask_width x mask_height bytes) into `out` (room for `max`); FALSE
// when it has none or it does not fit.
gboolean sl_region_mask(const SLRegion *region, guint8 *out, gsize max);

// Records about the whole frame (a zone's events, its counts), as JSON text in one custom meta
// "StreamLensFrameMeta" (structure "streamlens-frame", one string field per kind). The buffer
// must be writable to set; the string a getter returns belongs to the meta.
void sl_buffer_set_frame_field(GstBuffer *buffer, const char *name, const char *json);
const char *sl_buffer_frame_field(GstBuffer *buffer, const char *name);

// ---- Source restart (stage_restart.c) ----------------------------------------------------
// The watchdog (a stage that restarts its source part). The source part: the elements beside the
// stage in its bin that are not downstream of it, nearest to the stage first (elements not
// linked to it yet, such as an rtspsrc whose pads never came, last). A GList of references:
// free with g_list_free_full(list, gst_object_unref).
GList *sl_stage_upstream_elements(GstElement *stage);
// TRUE when `object` (any element, or something inside one) belongs to the stage's source part.
gboolean sl_stage_is_upstream(GstElement *stage, GstObject *object);
// Flushes the stage's input: queued frames and a received end-of-stream are dropped, so a
// restarted source can deliver again.
void sl_stage_flush_input(GstElement *stage);
// Closes the stage's input (its end was asked for: Ctrl-C, a source removed): new frames are
// refused with EOS, the ones that came already stay queued for the worker, and an end-of-stream
// sent behind them into the stage's input (from a thread of its own, so the worker, which must
// keep draining, never waits for the stream lock) ends the input once they are pulled: the
// pipeline counts that input among its sinks, and a source that is down never sends one.
void sl_stage_close_input(GstElement *stage);
// Stops the element (NULL), or starts it (PLAYING, with a fresh base time). The source part of a
// watchdog is locked (sl_stage_lock_upstream) so the pipeline's own state changes pass it by:
// the watchdog starts it once the pipeline plays, and again after each outage.
void sl_element_restart(GstElement *element, gboolean stop);
void sl_stage_lock_upstream(GstElement *stage, gboolean locked);
// Records the source part's links of dynamic pads while they exist (a failing source may have
// removed its pads by the time it is stopped).
void sl_stage_record_upstream_links(GstElement *stage);
// TRUE once the element's parent has a clock (the pipeline chose it on its way to PLAYING).
gboolean sl_element_parent_has_clock(GstElement *element);

// ---- negotiation diagnosis (diagnosis.c) -------------------------------------------------
// What the host needs to say which caps met at a failed link and which element would fix it.

// Parses like sl_pipeline_parse, but without FATAL_ERRORS: when a link fails, the half-built
// pipeline comes back too (with *error set), so the host can ask the two elements' pads what
// they carry. Any *error is still a failed parse. The result is a pipeline (or NULL).
GstElement *sl_pipeline_parse_keeping_elements(const char *description, GError **error);
// Caps in a few words: media type, formats (listed up to 8, else counted), a fixed size, frame
// rate, sample rate and channels; "anything" for ANY, "nothing" for empty. g_free the result.
char *sl_caps_describe(const GstCaps *caps);
// What an element's pads of one direction can carry: for each pad its current caps, else its
// caps query; without pads of that direction (sometimes/request pads), its pad templates' caps.
// `unlinked_only`: only pads linked to nothing (falls back to all pads when every one is linked).
GstCaps *sl_element_side_caps(GstElement *element, GstPadDirection direction, gboolean unlinked_only);
// The kinds of stream a caps can carry (ANY: all of them), as a bit set.
enum { SL_CAPS_RAW_VIDEO = 1, SL_CAPS_RAW_AUDIO = 2, SL_CAPS_CODED_VIDEO = 4, SL_CAPS_CODED_AUDIO = 8, SL_CAPS_OTHER = 16 };
guint sl_caps_classes(const GstCaps *caps);
// Whether the two caps meet once the named fields (comma-separated: "width,height") are set aside
// on both sides: the fields a converter would change.
gboolean sl_caps_meet_without(const GstCaps *a, const GstCaps *b, const char *fields);
// The best-ranked installed encoder (video and image, or audio) whose output `wants` takes; NULL
// when none. g_free the result.
char *sl_encoder_making(const GstCaps *wants, gboolean video);
// "video", "audio", "image", … of the caps' first structure ("" for ANY or empty). Static string.
const char *sl_caps_media_kind(const GstCaps *caps);
// The structures of `caps` of that media kind (a muxer takes audio and video: only the part that
// matters to a video link), or all of them when none is. A new reference.
GstCaps *sl_caps_of_kind(const GstCaps *caps, const char *kind);
// Records the caps offered to the stage's sink pad by each CAPS event and ACCEPT_CAPS query,
// accepted or not (a decoder that can only give I420 asks even when the stage takes RGB): the
// host names them when negotiation fails. Idempotent.
void sl_stage_watch_offered_caps(GstElement *stage);
// The caps last offered to the stage's sink pad (a new reference), or NULL.
GstCaps *sl_stage_offered_caps(GstElement *stage);
// TRUE when one of the element's sink pads has negotiated caps (a stream reached it).
gboolean sl_element_has_negotiated_sink_pad(GstElement *element);
// The element linked to the stage's (or any element's) pad of that direction ("sink": upstream,
// "src": downstream), seen from outside bins (a decodebin's ghost pad gives the decodebin), or
// NULL. A new reference.
GstElement *sl_element_neighbour(GstElement *element, const char *pad_name);
// The sinks a muxer's output reaches (filesink, through queues or a tee): references, free with
// g_list_free_full(list, gst_object_unref).
GList *sl_element_downstream_sinks(GstElement *element);
// With the pipeline's "message-forward" on, each sink's own EOS arrives wrapped in an element
// message ("GstBinForwarded"): the sink it came from (a new reference), else NULL.
GstObject *sl_message_forwarded_eos_source(GstMessage *message);
