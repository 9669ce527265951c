// The thin C++ edge over webrtc::AudioProcessing (see include/cv_apm.h); nothing else here.
#include "cv_apm.h"
#include <webrtc/modules/audio_processing/include/audio_processing.h>
#include <webrtc/modules/interface/module_common_types.h>
#include <string.h>

struct cv_apm {
    webrtc::AudioProcessing *apm;
    int rate;
    int samples;
    int voice_detect;
};

extern "C" cv_apm *cv_apm_create(int sample_rate_hz, cv_apm_options o) {
    if (sample_rate_hz != 8000 && sample_rate_hz != 16000 && sample_rate_hz != 32000 && sample_rate_hz != 48000) return nullptr;
    webrtc::Config config;
    // The room's echo path can be longer than the default filter, and the playback latency is
    // only estimated: the extended filter and delay-agnostic mode cover both.
    config.Set<webrtc::ExtendedFilter>(new webrtc::ExtendedFilter(true));
    config.Set<webrtc::DelayAgnostic>(new webrtc::DelayAgnostic(true));
    webrtc::AudioProcessing *apm = webrtc::AudioProcessing::Create(config);
    if (!apm) return nullptr;
    if (o.echo_cancel) {
        apm->echo_cancellation()->enable_drift_compensation(false);
        apm->echo_cancellation()->set_suppression_level(webrtc::EchoCancellation::kLowSuppression);
        apm->echo_cancellation()->Enable(true);
    }
    if (o.noise_suppress) {
        apm->noise_suppression()->set_level(webrtc::NoiseSuppression::kHigh);
        apm->noise_suppression()->Enable(true);
    }
    if (o.gain_control) {
        apm->gain_control()->set_mode(webrtc::GainControl::kAdaptiveDigital);
        apm->gain_control()->Enable(true);
    }
    if (o.voice_detect) {
        apm->voice_detection()->set_likelihood(webrtc::VoiceDetection::kModerateLikelihood);
        apm->voice_detection()->Enable(true);
    }
    cv_apm *h = new cv_apm;
    h->apm = apm;
    h->rate = sample_rate_hz;
    h->samples = sample_rate_hz / 100;
    h->voice_detect = o.voice_detect;
    return h;
}

extern "C" void cv_apm_destroy(cv_apm *h) {
    if (!h) return;
    delete h->apm;
    delete h;
}

extern "C" int cv_apm_frame_samples(const cv_apm *h) { return h ? h->samples : 0; }

static void fill(webrtc::AudioFrame &f, const cv_apm *h, const int16_t *samples) {
    f.sample_rate_hz_ = h->rate;
    f.num_channels_ = 1;
    f.samples_per_channel_ = (size_t)h->samples;
    memcpy(f.data_, samples, sizeof(int16_t) * (size_t)h->samples);
}

extern "C" int cv_apm_process_far(cv_apm *h, const int16_t *frame) {
    if (!h || !frame) return -1;
    webrtc::AudioFrame f;
    fill(f, h, frame);
    return h->apm->ProcessReverseStream(&f);
}

extern "C" int cv_apm_process_near(cv_apm *h, int16_t *frame, int delay_ms, int *voice) {
    if (!h || !frame) return -1;
    webrtc::AudioFrame f;
    fill(f, h, frame);
    h->apm->set_stream_delay_ms(delay_ms < 0 ? 0 : delay_ms);
    int rc = h->apm->ProcessStream(&f);
    if (rc == 0) memcpy(frame, f.data_, sizeof(int16_t) * (size_t)h->samples);
    if (voice) *voice = h->voice_detect ? (h->apm->voice_detection()->stream_has_voice() ? 1 : 0) : 0;
    return rc;
}
