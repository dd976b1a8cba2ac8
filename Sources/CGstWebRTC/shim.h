#include <gst/webrtc/webrtc.h>
#include <gst/sdp/sdp.h>
