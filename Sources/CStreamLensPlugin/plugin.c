// libgststreamlens.so: every StreamLens stage as an element of the plugin "streamlens", for
// gst-launch-1.0, gst-inspect-1.0, Python and any GStreamer application
// (GST_PLUGIN_PATH=<dir> or `make install-plugin`). GStreamer 1.22 looks for the exported
// gst_plugin_streamlens_get_desc, so the file name must be libgststreamlens.so.
// The registration itself is Swift (Sources/StreamLensPlugin), found at link time.
#include <gst/gst.h>
#include "streamlens_plugin.h"

extern gboolean streamlens_plugin_register(GstPlugin *plugin);

static gboolean plugin_init(GstPlugin *plugin) {
    return streamlens_plugin_register(plugin);
}

#define PACKAGE "streamlens"
GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, streamlens,
                  "StreamLens stages: face detection, style transfer, RTSP output, source watchdog",
                  plugin_init, "0.1", "Proprietary", "StreamLens", "https://example.invalid/streamlens")
