// A C face over GStreamer's webrtcbin for one audio-only WebRTC peer: Opus mono sendrecv, no data
// channel, non-trickle (the local SDP is handed over only when ICE gathering is complete, with
// every candidate in it). 16-bit mono PCM in and out at the rate given at creation. Each peer
// runs its GLib main loop on its own thread; every callback comes from a GStreamer thread.
#ifndef CV_RTC_H
#define CV_RTC_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef struct cv_rtc cv_rtc;

/* What a state callback reports. `value` carries the GStreamer enum for the two state kinds. */
enum {
    CV_RTC_CONNECTION_STATE = 1, /* value: GstWebRTCPeerConnectionState (0 new, 1 connecting, 2 connected, 3 disconnected, 4 failed, 5 closed) */
    CV_RTC_ICE_STATE = 2,        /* value: GstWebRTCICEConnectionState (0 new, 1 checking, 2 connected, 3 completed, 4 failed, 5 disconnected, 6 closed) */
    CV_RTC_ERROR = 3,            /* detail: the pipeline's error message */
    CV_RTC_END_OF_STREAM = 4,
    CV_RTC_REMOTE_AUDIO = 5,     /* the first decoded frame of the remote track (once) */
};

typedef struct {
    void *ctx;
    /* kind: one of the CV_RTC_* above; detail may be NULL. */
    void (*on_state)(void *ctx, int kind, int value, const char *detail);
    /* Decoded remote audio, mono S16 at the peer's rate. */
    void (*on_audio)(void *ctx, const int16_t *samples, size_t count);
    /* The local description once gathering is complete (sdp non-NULL), or why it failed (error non-NULL). */
    void (*on_local_sdp)(void *ctx, const char *sdp, const char *error);
} cv_rtc_callbacks;

/* gst_init once per process. 0 on success; else *error (free with cv_rtc_free_string). */
int cv_rtc_global_init(char **error);

/* A new peer in PLAYING state. sample_rate: 8000…48000 (the PCM rate in and out).
   local_ip: NULL to let ICE find the host's addresses, or one address ("127.0.0.1") to gather on
   only that one. NULL and *error on failure. */
cv_rtc *cv_rtc_new(int sample_rate, const char *local_ip, cv_rtc_callbacks callbacks, char **error);

/* Offerer: creates the offer, sets it as local description; on_local_sdp fires when gathering is complete. */
void cv_rtc_create_offer(cv_rtc *rtc);
/* Offerer: the remote answer. 0 on success; else *error. */
int cv_rtc_set_answer(cv_rtc *rtc, const char *sdp, char **error);
/* Answerer: sets the remote offer and creates the answer; on_local_sdp fires with the complete answer. 0 or *error. */
int cv_rtc_accept_offer(cv_rtc *rtc, const char *sdp, char **error);

/* Local audio to send (mono S16 at the peer's rate); copied. 0 on success, -1 once closed or on flow error. */
int cv_rtc_push(cv_rtc *rtc, const int16_t *samples, size_t count);

/* Stops the pipeline and the loop, joins the loop thread and frees the peer. No callback fires
   after it returns. Never call it from a callback. */
void cv_rtc_close(cv_rtc *rtc);

void cv_rtc_free_string(char *s);

#ifdef __cplusplus
}
#endif
#endif
