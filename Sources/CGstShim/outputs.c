// See streamlens_gst.h, "Output files". A filesink opens its file at NULL→READY, before anything
// upstream has started: a run that then fails to start (a model that is missing, an input that
// is not there, caps that do not meet) would leave the user's existing file truncated to nothing.
// The host points such a filesink at a temporary name beside the target. A new file is moved
// onto its target when the first buffer arrives (once there is something to keep, and visible
// from then on, as filesink's would be); an existing file is replaced only by an output that was
// finished (end-of-stream reached the sink, no write failed), after the pipeline stopped, so a
// full disk or an aborted run leaves the earlier file as it was.
#include "streamlens_gst.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SL_OUTPUT "streamlens-output-file"

// The temporary files not yet moved onto their targets, for the second interrupt's handler to
// remove before the process ends (async-signal-safe: fixed storage, atomic slot states, unlink).
#define SL_PENDING_SLOTS 64
enum { SL_SLOT_FREE = 0, SL_SLOT_CLAIMED = 1, SL_SLOT_PENDING = 2 };
static int sl_pending_state[SL_PENDING_SLOTS];
static char sl_pending_path[SL_PENDING_SLOTS][4096];

typedef struct {
    gchar *temporary;
    gchar *target;
    gboolean replace_at_end;
    int slot;           // in sl_pending_*, or -1
    int state;          // SL_OUTPUT_* (atomic: set on the streaming thread, read by the host)
    int ended;          // end-of-stream reached the sink (atomic)
    int abandoned;      // the host left the pipeline behind: write and move nothing (atomic)
} SLOutputFile;

static int sl_pending_add(const char *path) {
    if (strlen(path) >= sizeof sl_pending_path[0]) return -1;
    for (int i = 0; i < SL_PENDING_SLOTS; i++) {
        int expected = SL_SLOT_FREE;
        if (__atomic_compare_exchange_n(&sl_pending_state[i], &expected, SL_SLOT_CLAIMED, FALSE, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            strcpy(sl_pending_path[i], path);
            __atomic_store_n(&sl_pending_state[i], SL_SLOT_PENDING, __ATOMIC_RELEASE);
            return i;
        }
    }
    return -1;
}

static void sl_pending_remove(int slot) {
    if (slot >= 0) __atomic_store_n(&sl_pending_state[slot], SL_SLOT_FREE, __ATOMIC_RELEASE);
}

void sl_output_files_remove_pending(void) {
    for (int i = 0; i < SL_PENDING_SLOTS; i++)
        if (__atomic_load_n(&sl_pending_state[i], __ATOMIC_ACQUIRE) == SL_SLOT_PENDING) unlink(sl_pending_path[i]);
}

static void sl_output_file_free(gpointer data) {
    SLOutputFile *file = data;
    sl_pending_remove(file->slot);
    g_free(file->temporary);
    g_free(file->target);
    g_free(file);
}

// Moves the temporary file onto the target, with the target's permissions when it exists: 0 or errno.
static int sl_output_move(SLOutputFile *file) {
    struct stat st;
    if (stat(file->target, &st) == 0) chmod(file->temporary, st.st_mode & 07777);
    if (rename(file->temporary, file->target) != 0) return errno;
    sl_pending_remove(file->slot);
    file->slot = -1;
    return 0;
}

static GstPadProbeReturn sl_output_first_data(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    (void)pad;
    (void)info;
    SLOutputFile *file = data;
    // Stays installed and drops every buffer: a source that opens after all must not write or
    // rename a file the host has already dealt with.
    if (__atomic_load_n(&file->abandoned, __ATOMIC_ACQUIRE)) return GST_PAD_PROBE_DROP;
    if (file->replace_at_end) {
        __atomic_store_n(&file->state, SL_OUTPUT_WRITING, __ATOMIC_RELEASE);
    } else {
        int result = sl_output_move(file);
        __atomic_store_n(&file->state, result == 0 ? SL_OUTPUT_MOVED : -result, __ATOMIC_RELEASE);
    }
    return GST_PAD_PROBE_REMOVE;
}

static GstPadProbeReturn sl_output_end(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    (void)pad;
    SLOutputFile *file = data;
    GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
    if (event && GST_EVENT_TYPE(event) == GST_EVENT_EOS) __atomic_store_n(&file->ended, 1, __ATOMIC_RELEASE);
    return GST_PAD_PROBE_OK;
}

gboolean sl_output_file_guard(GstElement *filesink, const char *temporary, const char *target, gboolean replace_at_end) {
    GstPad *pad = gst_element_get_static_pad(filesink, "sink");
    if (!pad) return FALSE;
    SLOutputFile *file = g_new0(SLOutputFile, 1);
    file->temporary = g_strdup(temporary);
    file->target = g_strdup(target);
    file->replace_at_end = replace_at_end;
    file->slot = sl_pending_add(temporary);
    g_object_set(filesink, "location", temporary, NULL);
    // The element owns the record; the probes borrow it (they go with the pad, before the element).
    g_object_set_data_full(G_OBJECT(filesink), SL_OUTPUT, file, sl_output_file_free);
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST, sl_output_first_data, file, NULL);
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, sl_output_end, file, NULL);
    gst_object_unref(pad);
    return TRUE;
}

int sl_output_file_state(GstElement *filesink) {
    SLOutputFile *file = g_object_get_data(G_OBJECT(filesink), SL_OUTPUT);
    return file ? __atomic_load_n(&file->state, __ATOMIC_ACQUIRE) : SL_OUTPUT_NOTHING;
}

gboolean sl_output_file_ended(GstElement *filesink) {
    SLOutputFile *file = g_object_get_data(G_OBJECT(filesink), SL_OUTPUT);
    return file && __atomic_load_n(&file->ended, __ATOMIC_ACQUIRE);
}

int sl_output_file_replace(GstElement *filesink) {
    SLOutputFile *file = g_object_get_data(G_OBJECT(filesink), SL_OUTPUT);
    if (!file) return ENOENT;
    int result = sl_output_move(file);
    __atomic_store_n(&file->state, result == 0 ? SL_OUTPUT_MOVED : -result, __ATOMIC_RELEASE);
    return result;
}

void sl_output_file_release(GstElement *filesink) {
    g_object_set_data(G_OBJECT(filesink), SL_OUTPUT, NULL);
}

void sl_output_file_abandon(GstElement *filesink) {
    SLOutputFile *file = g_object_get_data(G_OBJECT(filesink), SL_OUTPUT);
    if (file) __atomic_store_n(&file->abandoned, 1, __ATOMIC_RELEASE);
}
