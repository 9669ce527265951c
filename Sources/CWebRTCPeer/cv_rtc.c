// The GObject side of one audio-only WebRTC peer (see include/cv_rtc.h): the pipeline, webrtcbin's
// promises and signals, the decode branch added when the remote track appears, and the bus on a
// GLib main loop of the peer's own thread. Swift sees only plain callbacks.
#define GST_USE_UNSTABLE_API 1 /* webrtcbin's library is marked unstable; 1.22 is what Debian 12 ships */
#include "cv_rtc.h"
#include <gst/gst.h>
#include <gst/sdp/sdp.h>
#include <gst/webrtc/webrtc.h>
#include <string.h>

struct cv_rtc {
    GstElement *pipeline, *webrtc, *appsrc;
    GMainContext *context;
    GMainLoop *loop;
    GThread *thread;
    GSource *bus_source;
    cv_rtc_callbacks cb;
    int rate;
    /* Held while a callback runs; `closing` is set under it, so none runs after cv_rtc_close. */
    GMutex cb_lock;
    int closing;
    GMutex cand_lock;
    GString *candidates; /* "mline\tcandidate\n" lines, for an SDP that lacks them */
    gint sdp_delivered, remote_audio_seen, branch_added;
};

static char *dup_error(const char *what, GError *err) {
    return g_strdup_printf("%s%s%s", what, err ? ": " : "", err ? err->message : "");
}

int cv_rtc_global_init(char **error) {
    GError *err = NULL;
    if (!gst_init_check(NULL, NULL, &err)) { *error = dup_error("gst_init failed", err); g_clear_error(&err); return -1; }
    const char *needed[] = {"webrtcbin", "nicesrc", "opusenc", "opusdec", "rtpopuspay", "rtpopusdepay", "appsrc", "appsink",
                            "audioconvert", "audioresample", "dtlssrtpenc", NULL};
    for (int i = 0; needed[i]; i++) {
        GstElementFactory *f = gst_element_factory_find(needed[i]);
        if (!f) {
            *error = g_strdup_printf("GStreamer element %s is missing (install gstreamer1.0-plugins-bad, gstreamer1.0-nice, "
                                     "gstreamer1.0-plugins-base and gstreamer1.0-plugins-good)", needed[i]);
            return -1;
        }
        gst_object_unref(f);
    }
    return 0;
}

void cv_rtc_free_string(char *s) { g_free(s); }

static void emit_state(cv_rtc *rtc, int kind, int value, const char *detail) {
    g_mutex_lock(&rtc->cb_lock);
    if (!rtc->closing && rtc->cb.on_state) rtc->cb.on_state(rtc->cb.ctx, kind, value, detail);
    g_mutex_unlock(&rtc->cb_lock);
}

static void emit_sdp(cv_rtc *rtc, const char *sdp, const char *error) {
    if (!g_atomic_int_compare_and_exchange(&rtc->sdp_delivered, 0, 1)) return;
    g_mutex_lock(&rtc->cb_lock);
    if (!rtc->closing && rtc->cb.on_local_sdp) rtc->cb.on_local_sdp(rtc->cb.ctx, sdp, error);
    g_mutex_unlock(&rtc->cb_lock);
}

static gboolean on_bus(GstBus *bus, GstMessage *msg, gpointer data) {
    (void)bus;
    cv_rtc *rtc = data;
    if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
        GError *err = NULL;
        gchar *dbg = NULL;
        gst_message_parse_error(msg, &err, &dbg);
        gchar *detail = g_strdup_printf("%s: %s", GST_OBJECT_NAME(msg->src), err ? err->message : "error");
        emit_state(rtc, CV_RTC_ERROR, 0, detail);
        g_free(detail);
        g_clear_error(&err);
        g_free(dbg);
    } else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS) {
        emit_state(rtc, CV_RTC_END_OF_STREAM, 0, NULL);
    }
    return G_SOURCE_CONTINUE;
}

static gboolean quit_loop(gpointer loop) {
    g_main_loop_quit(loop);
    return G_SOURCE_REMOVE;
}

static gpointer loop_thread(gpointer data) {
    cv_rtc *rtc = data;
    g_main_context_push_thread_default(rtc->context);
    g_main_loop_run(rtc->loop);
    g_main_context_pop_thread_default(rtc->context);
    return NULL;
}

static GstFlowReturn on_new_sample(GstElement *sink, gpointer data) {
    cv_rtc *rtc = data;
    GstSample *sample = NULL;
    g_signal_emit_by_name(sink, "pull-sample", &sample);
    if (!sample) return GST_FLOW_EOS;
    GstBuffer *buf = gst_sample_get_buffer(sample);
    GstMapInfo map;
    if (buf && gst_buffer_map(buf, &map, GST_MAP_READ)) {
        if (g_atomic_int_compare_and_exchange(&rtc->remote_audio_seen, 0, 1)) emit_state(rtc, CV_RTC_REMOTE_AUDIO, 0, NULL);
        g_mutex_lock(&rtc->cb_lock);
        if (!rtc->closing && rtc->cb.on_audio) rtc->cb.on_audio(rtc->cb.ctx, (const int16_t *)map.data, map.size / 2);
        g_mutex_unlock(&rtc->cb_lock);
        gst_buffer_unmap(buf, &map);
    }
    gst_sample_unref(sample);
    return GST_FLOW_OK;
}

/* The remote track: depayload, decode, convert to our rate, hand out. One audio track only. */
static void on_pad_added(GstElement *webrtc, GstPad *pad, gpointer data) {
    (void)webrtc;
    cv_rtc *rtc = data;
    if (GST_PAD_DIRECTION(pad) != GST_PAD_SRC) return;
    if (!g_atomic_int_compare_and_exchange(&rtc->branch_added, 0, 1)) return;
    gchar *desc = g_strdup_printf("rtpopusdepay ! opusdec plc=true ! audioconvert ! audioresample ! "
                                  "audio/x-raw,format=S16LE,rate=%d,channels=1,layout=interleaved ! "
                                  "appsink name=pcmsink emit-signals=true sync=false max-buffers=100 drop=true", rtc->rate);
    GError *err = NULL;
    GstElement *bin = gst_parse_bin_from_description(desc, TRUE, &err);
    g_free(desc);
    if (!bin) {
        gchar *detail = dup_error("receive branch", err);
        emit_state(rtc, CV_RTC_ERROR, 0, detail);
        g_free(detail);
        g_clear_error(&err);
        return;
    }
    GstElement *sink = gst_bin_get_by_name(GST_BIN(bin), "pcmsink");
    g_signal_connect(sink, "new-sample", G_CALLBACK(on_new_sample), rtc);
    gst_object_unref(sink);
    gst_bin_add(GST_BIN(rtc->pipeline), bin);
    gst_element_sync_state_with_parent(bin);
    GstPad *sinkpad = gst_element_get_static_pad(bin, "sink");
    if (gst_pad_link(pad, sinkpad) != GST_PAD_LINK_OK) emit_state(rtc, CV_RTC_ERROR, 0, "could not link the remote track");
    gst_object_unref(sinkpad);
}

static void on_ice_candidate(GstElement *webrtc, guint mline, gchar *candidate, gpointer data) {
    (void)webrtc;
    cv_rtc *rtc = data;
    g_mutex_lock(&rtc->cand_lock);
    g_string_append_printf(rtc->candidates, "%u\t%s\n", mline, candidate);
    g_mutex_unlock(&rtc->cand_lock);
}

/* The SDP text with every candidate: webrtcbin writes gathered candidates into its local
   description; if a version does not, the ones seen in on-ice-candidate are added per m-line. */
static gchar *complete_sdp(cv_rtc *rtc, const gchar *text) {
    if (strstr(text, "a=candidate:")) return g_strdup(text);
    gchar **sections = g_strsplit(text, "\r\nm=", -1);
    GString *out = g_string_new(NULL);
    g_mutex_lock(&rtc->cand_lock);
    gchar **lines = g_strsplit(rtc->candidates->str, "\n", -1);
    g_mutex_unlock(&rtc->cand_lock);
    for (int s = 0; sections[s]; s++) {
        if (s > 0) g_string_append(out, "\r\nm=");
        g_string_append(out, sections[s]);
        if (s == 0) continue;
        gboolean trailing = g_str_has_suffix(sections[s], "\r\n");
        if (!trailing) g_string_append(out, "\r\n");
        for (int l = 0; lines[l]; l++) {
            gchar *tab = strchr(lines[l], '\t');
            if (!tab || (int)g_ascii_strtoull(lines[l], NULL, 10) != s - 1) continue;
            g_string_append_printf(out, "a=%s\r\n", tab + 1);
        }
        g_string_append(out, "a=end-of-candidates");
        if (trailing) g_string_append(out, "\r\n");
    }
    g_strfreev(lines);
    g_strfreev(sections);
    return g_string_free(out, FALSE);
}

static void on_gathering_state(GObject *webrtc, GParamSpec *pspec, gpointer data) {
    (void)pspec;
    cv_rtc *rtc = data;
    GstWebRTCICEGatheringState state;
    g_object_get(webrtc, "ice-gathering-state", &state, NULL);
    if (state != GST_WEBRTC_ICE_GATHERING_STATE_COMPLETE) return;
    GstWebRTCSessionDescription *desc = NULL;
    g_object_get(webrtc, "local-description", &desc, NULL);
    if (!desc) { emit_sdp(rtc, NULL, "gathering completed without a local description"); return; }
    gchar *text = gst_sdp_message_as_text(desc->sdp);
    gchar *full = complete_sdp(rtc, text);
    emit_sdp(rtc, full, NULL);
    g_free(full);
    g_free(text);
    gst_webrtc_session_description_free(desc);
}

static void on_connection_state(GObject *webrtc, GParamSpec *pspec, gpointer data) {
    (void)pspec;
    GstWebRTCPeerConnectionState state;
    g_object_get(webrtc, "connection-state", &state, NULL);
    emit_state(data, CV_RTC_CONNECTION_STATE, (int)state, NULL);
}

static void on_ice_state(GObject *webrtc, GParamSpec *pspec, gpointer data) {
    (void)pspec;
    GstWebRTCICEConnectionState state;
    g_object_get(webrtc, "ice-connection-state", &state, NULL);
    emit_state(data, CV_RTC_ICE_STATE, (int)state, NULL);
}

/* A promise's error, if its reply carries one (webrtcbin puts a GError in field "error"). */
static gchar *promise_error(GstPromise *promise, const char *what) {
    if (gst_promise_wait(promise) != GST_PROMISE_RESULT_REPLIED) return g_strdup_printf("%s: no reply", what);
    const GstStructure *reply = gst_promise_get_reply(promise);
    if (reply && gst_structure_has_field(reply, "error")) {
        GError *err = NULL;
        gst_structure_get(reply, "error", G_TYPE_ERROR, &err, NULL);
        gchar *msg = dup_error(what, err);
        g_clear_error(&err);
        return msg;
    }
    return NULL;
}

/* set-local-description runs on webrtcbin's own thread, the one this callback is on: so never wait for it there. */
static void on_local_set(GstPromise *promise, gpointer data) {
    const GstStructure *reply = gst_promise_get_reply(promise);
    if (reply && gst_structure_has_field(reply, "error")) {
        GError *err = NULL;
        gst_structure_get(reply, "error", G_TYPE_ERROR, &err, NULL);
        gchar *msg = dup_error("set-local-description", err);
        emit_sdp(data, NULL, msg);
        g_free(msg);
        g_clear_error(&err);
    }
    gst_promise_unref(promise);
}

static void on_description_created(GstPromise *promise, gpointer data) {
    cv_rtc *rtc = data;
    gboolean answer = g_object_get_data(G_OBJECT(rtc->webrtc), "cv-answering") != NULL;
    const char *field = answer ? "answer" : "offer";
    gchar *failure = promise_error(promise, answer ? "create-answer" : "create-offer");
    GstWebRTCSessionDescription *desc = NULL;
    if (!failure) {
        const GstStructure *reply = gst_promise_get_reply(promise);
        if (!reply || !gst_structure_get(reply, field, GST_TYPE_WEBRTC_SESSION_DESCRIPTION, &desc, NULL) || !desc)
            failure = g_strdup_printf("webrtcbin gave no %s", field);
    }
    gst_promise_unref(promise);
    if (failure) { emit_sdp(rtc, NULL, failure); g_free(failure); return; }
    GstPromise *set = gst_promise_new_with_change_func(on_local_set, rtc, NULL);
    g_signal_emit_by_name(rtc->webrtc, "set-local-description", desc, set);
    gst_webrtc_session_description_free(desc);
}

/* Our one transceiver sends and receives Opus (mono is in the payloader's caps: sprop-stereo=0). */
static void prepare_transceiver(cv_rtc *rtc) {
    GArray *transceivers = NULL;
    g_signal_emit_by_name(rtc->webrtc, "get-transceivers", &transceivers);
    if (!transceivers) return;
    GstCaps *prefs = gst_caps_from_string("application/x-rtp,media=audio,encoding-name=OPUS,clock-rate=48000,payload=111,"
                                          "encoding-params=(string)2,minptime=(string)10,useinbandfec=(string)1");
    for (guint i = 0; i < transceivers->len; i++) {
        GstWebRTCRTPTransceiver *t = g_array_index(transceivers, GstWebRTCRTPTransceiver *, i);
        g_object_set(t, "direction", GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_SENDRECV, "codec-preferences", prefs, NULL);
    }
    gst_caps_unref(prefs);
    g_array_unref(transceivers);
}

cv_rtc *cv_rtc_new(int sample_rate, const char *local_ip, cv_rtc_callbacks callbacks, char **error) {
    if (sample_rate < 8000 || sample_rate > 48000) { *error = g_strdup("sample rate must be 8000…48000 Hz"); return NULL; }
    gchar *desc = g_strdup_printf(
        "webrtcbin name=webrtc bundle-policy=max-bundle latency=40 "
        "appsrc name=pcmsrc is-live=true do-timestamp=true format=time leaky-type=downstream max-bytes=%d "
        "caps=audio/x-raw,format=S16LE,rate=%d,channels=1,layout=interleaved ! audioconvert ! audioresample ! "
        "queue leaky=downstream max-size-buffers=0 max-size-bytes=0 max-size-time=200000000 ! "
        "opusenc audio-type=voice frame-size=20 ! rtpopuspay pt=111 ! "
        "application/x-rtp,media=audio,encoding-name=OPUS,payload=111 ! webrtc.",
        sample_rate / 5 * 2, sample_rate);
    GError *err = NULL;
    GstElement *pipeline = gst_parse_launch(desc, &err);
    g_free(desc);
    if (!pipeline || err) {
        *error = dup_error("building the WebRTC pipeline", err);
        g_clear_error(&err);
        if (pipeline) gst_object_unref(pipeline);
        return NULL;
    }
    cv_rtc *rtc = g_new0(cv_rtc, 1);
    rtc->pipeline = pipeline;
    rtc->cb = callbacks;
    rtc->rate = sample_rate;
    g_mutex_init(&rtc->cb_lock);
    g_mutex_init(&rtc->cand_lock);
    rtc->candidates = g_string_new(NULL);
    rtc->webrtc = gst_bin_get_by_name(GST_BIN(pipeline), "webrtc");
    rtc->appsrc = gst_bin_get_by_name(GST_BIN(pipeline), "pcmsrc");

    GstWebRTCICE *ice = NULL;
    g_object_get(rtc->webrtc, "ice-agent", &ice, NULL);
    if (ice) {
        /* UDP only: the providers and the Watch's ICE-lite answers take UDP host candidates. */
        if (g_object_class_find_property(G_OBJECT_GET_CLASS(ice), "ice-tcp")) g_object_set(ice, "ice-tcp", FALSE, NULL);
        gboolean ok = TRUE;
        if (local_ip && *local_ip) g_signal_emit_by_name(ice, "add-local-ip-address", local_ip, &ok);
        gst_object_unref(ice);
        if (!ok) { *error = g_strdup_printf("ICE refused the local address %s", local_ip); cv_rtc_close(rtc); return NULL; }
    }
    g_signal_connect(rtc->webrtc, "pad-added", G_CALLBACK(on_pad_added), rtc);
    g_signal_connect(rtc->webrtc, "on-ice-candidate", G_CALLBACK(on_ice_candidate), rtc);
    g_signal_connect(rtc->webrtc, "notify::ice-gathering-state", G_CALLBACK(on_gathering_state), rtc);
    g_signal_connect(rtc->webrtc, "notify::connection-state", G_CALLBACK(on_connection_state), rtc);
    g_signal_connect(rtc->webrtc, "notify::ice-connection-state", G_CALLBACK(on_ice_state), rtc);
    prepare_transceiver(rtc);

    rtc->context = g_main_context_new();
    rtc->loop = g_main_loop_new(rtc->context, FALSE);
    GstBus *bus = gst_element_get_bus(pipeline);
    rtc->bus_source = gst_bus_create_watch(bus);
    g_source_set_callback(rtc->bus_source, (GSourceFunc)(void (*)(void))on_bus, rtc, NULL);
    g_source_attach(rtc->bus_source, rtc->context);
    gst_object_unref(bus);
    rtc->thread = g_thread_new("cv-rtc-loop", loop_thread, rtc);

    if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
        *error = g_strdup("the WebRTC pipeline would not start");
        cv_rtc_close(rtc);
        return NULL;
    }
    return rtc;
}

void cv_rtc_create_offer(cv_rtc *rtc) {
    GstPromise *promise = gst_promise_new_with_change_func(on_description_created, rtc, NULL);
    g_signal_emit_by_name(rtc->webrtc, "create-offer", NULL, promise);
}

static GstWebRTCSessionDescription *parse_description(const char *sdp, GstWebRTCSDPType type, char **error) {
    GstSDPMessage *msg = NULL;
    gst_sdp_message_new(&msg);
    if (gst_sdp_message_parse_buffer((const guint8 *)sdp, strlen(sdp), msg) != GST_SDP_OK || gst_sdp_message_medias_len(msg) == 0) {
        gst_sdp_message_free(msg);
        *error = g_strdup("the SDP does not parse or has no media");
        return NULL;
    }
    return gst_webrtc_session_description_new(type, msg);
}

static int set_remote(cv_rtc *rtc, const char *sdp, GstWebRTCSDPType type, char **error) {
    GstWebRTCSessionDescription *desc = parse_description(sdp, type, error);
    if (!desc) return -1;
    GstPromise *promise = gst_promise_new();
    g_signal_emit_by_name(rtc->webrtc, "set-remote-description", desc, promise);
    gchar *failure = promise_error(promise, "set-remote-description");
    gst_promise_unref(promise);
    gst_webrtc_session_description_free(desc);
    if (failure) { *error = failure; return -1; }
    return 0;
}

int cv_rtc_set_answer(cv_rtc *rtc, const char *sdp, char **error) { return set_remote(rtc, sdp, GST_WEBRTC_SDP_TYPE_ANSWER, error); }

int cv_rtc_accept_offer(cv_rtc *rtc, const char *sdp, char **error) {
    if (set_remote(rtc, sdp, GST_WEBRTC_SDP_TYPE_OFFER, error) != 0) return -1;
    g_object_set_data(G_OBJECT(rtc->webrtc), "cv-answering", GINT_TO_POINTER(1));
    GstPromise *promise = gst_promise_new_with_change_func(on_description_created, rtc, NULL);
    g_signal_emit_by_name(rtc->webrtc, "create-answer", NULL, promise);
    return 0;
}

int cv_rtc_push(cv_rtc *rtc, const int16_t *samples, size_t count) {
    if (g_atomic_int_get(&rtc->closing) || count == 0) return -1;
    GstBuffer *buf = gst_buffer_new_memdup(samples, count * 2);
    GstFlowReturn ret = GST_FLOW_OK;
    g_signal_emit_by_name(rtc->appsrc, "push-buffer", buf, &ret);
    gst_buffer_unref(buf);
    return ret == GST_FLOW_OK ? 0 : -1;
}

void cv_rtc_close(cv_rtc *rtc) {
    g_mutex_lock(&rtc->cb_lock);
    g_atomic_int_set(&rtc->closing, 1);
    g_mutex_unlock(&rtc->cb_lock);
    gst_element_set_state(rtc->pipeline, GST_STATE_NULL);
    if (rtc->bus_source) { g_source_destroy(rtc->bus_source); g_source_unref(rtc->bus_source); }
    /* Quit from inside the loop: a quit before g_main_loop_run starts would be lost. */
    if (rtc->loop) {
        GSource *quit = g_idle_source_new();
        g_source_set_callback(quit, quit_loop, rtc->loop, NULL);
        g_source_attach(quit, rtc->context);
        g_source_unref(quit);
    }
    if (rtc->thread) g_thread_join(rtc->thread);
    if (rtc->loop) g_main_loop_unref(rtc->loop);
    if (rtc->context) g_main_context_unref(rtc->context);
    if (rtc->appsrc) gst_object_unref(rtc->appsrc);
    if (rtc->webrtc) gst_object_unref(rtc->webrtc);
    gst_object_unref(rtc->pipeline);
    g_string_free(rtc->candidates, TRUE);
    g_mutex_clear(&rtc->cand_lock);
    g_mutex_clear(&rtc->cb_lock);
    g_free(rtc);
}
