// CGStreamer: Debian's GStreamer with webrtcbin (gstreamer-webrtc-1.0 pulls in gstreamer-1.0,
// gstreamer-sdp-1.0 and GLib). Only CWebRTCPeer's C shim includes it; Swift never sees GObject.
#pragma once
#define GST_USE_UNSTABLE_API 1
#include <gst/gst.h>
#include <gst/sdp/sdp.h>
#include <gst/webrtc/webrtc.h>
