// See streamlens_gst.h, "Output files". A filesink opens its file at NULL→READY, before anything
// upstream has started: a run that then fails to start (a model that is missing, an input that
// is not there, caps that do not meet) would leave the user's existing file truncated to nothing.
// The host points such a filesink at a temporary name beside the target and this probe moves it
// onto the target when the first buffer arrives, i.e. once there is something to keep.
#include "streamlens_gst.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define SL_COMMITTED "streamlens-output-committed"

typedef struct {
    gchar *temporary;
    gchar *target;
} SLOutputFile;

static void sl_output_file_free(gpointer data) {
    SLOutputFile *file = data;
    g_free(file->temporary);
    g_free(file->target);
    g_free(file);
}

static GstPadProbeReturn sl_output_first_data(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    (void)info;
    SLOutputFile *file = data;
    GstObject *sink = gst_pad_get_parent(pad);
    // The new file keeps the permissions of the one it replaces.
    struct stat st;
    if (stat(file->target, &st) == 0) chmod(file->temporary, st.st_mode & 07777);
    int result = rename(file->temporary, file->target) == 0 ? 0 : errno;
    if (sink) {
        g_object_set_data(G_OBJECT(sink), SL_COMMITTED, GINT_TO_POINTER(result == 0 ? 1 : -result));
        gst_object_unref(sink);
    }
    return GST_PAD_PROBE_REMOVE;
}

gboolean sl_output_file_guard(GstElement *filesink, const char *temporary, const char *target) {
    GstPad *pad = gst_element_get_static_pad(filesink, "sink");
    if (!pad) return FALSE;
    SLOutputFile *file = g_new0(SLOutputFile, 1);
    file->temporary = g_strdup(temporary);
    file->target = g_strdup(target);
    g_object_set(filesink, "location", temporary, NULL);
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST, sl_output_first_data, file,
                      sl_output_file_free);
    gst_object_unref(pad);
    return TRUE;
}

int sl_output_file_state(GstElement *filesink) {
    return GPOINTER_TO_INT(g_object_get_data(G_OBJECT(filesink), SL_COMMITTED));
}
