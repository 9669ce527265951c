// A C face for Debian's libwebrtc-audio-processing (0.3): echo cancellation against the
// speaker's signal, noise suppression, automatic gain control and the voice detector, on
// 10 ms frames of 16-bit mono. Opaque handle, create/use/destroy, integer results.
#ifndef CV_APM_H
#define CV_APM_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef struct cv_apm cv_apm;

typedef struct {
    int echo_cancel;      /* 1: acoustic echo cancellation (AEC, extended filter, delay-agnostic) */
    int noise_suppress;   /* 1: noise suppression (high) */
    int gain_control;     /* 1: adaptive digital gain control */
    int voice_detect;     /* 1: the voice-activity detector */
} cv_apm_options;

/* NULL when the library refuses the rate (8000, 16000, 32000 or 48000 Hz). */
cv_apm *cv_apm_create(int sample_rate_hz, cv_apm_options options);
void cv_apm_destroy(cv_apm *apm);

/* Samples in one 10 ms frame at the handle's rate. */
int cv_apm_frame_samples(const cv_apm *apm);

/* The far end: one 10 ms frame of what the speaker plays. 0 on success, else the library's error. */
int cv_apm_process_far(cv_apm *apm, const int16_t *frame);

/* The near end: one 10 ms microphone frame, processed in place. `delay_ms`: how long after its
 * far-end frame was given the echo reaches the microphone. `*voice` (may be NULL) is set to 1
 * when the detector hears voice. 0 on success, else the library's error. */
int cv_apm_process_near(cv_apm *apm, int16_t *frame, int delay_ms, int *voice);

#ifdef __cplusplus
}
#endif
#endif
