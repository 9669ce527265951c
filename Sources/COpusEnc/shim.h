// COpusEnc: the libopusenc headers, plus static inline shims for what Swift cannot import.
// ope_encoder_ctl is variadic and takes OPUS_SET_* / OPE_SET_* macros; one shim per request
// (prefix cv_ope_). libopusenc forwards the OPUS_SET_* ones to its libopus encoder.
#pragma once
#include <opusenc.h>

static inline int cv_ope_set_bitrate(OggOpusEnc *enc, opus_int32 bps) { return ope_encoder_ctl(enc, OPUS_SET_BITRATE(bps)); }
static inline int cv_ope_set_complexity(OggOpusEnc *enc, opus_int32 complexity) { return ope_encoder_ctl(enc, OPUS_SET_COMPLEXITY(complexity)); }
static inline int cv_ope_set_application_voip(OggOpusEnc *enc) { return ope_encoder_ctl(enc, OPUS_SET_APPLICATION(OPUS_APPLICATION_VOIP)); }
static inline int cv_ope_set_signal_voice(OggOpusEnc *enc) { return ope_encoder_ctl(enc, OPUS_SET_SIGNAL(OPUS_SIGNAL_VOICE)); }
static inline int cv_ope_set_decision_delay(OggOpusEnc *enc, opus_int32 samples48k) { return ope_encoder_ctl(enc, OPE_SET_DECISION_DELAY(samples48k)); }
static inline int cv_ope_set_muxing_delay(OggOpusEnc *enc, opus_int32 samples48k) { return ope_encoder_ctl(enc, OPE_SET_MUXING_DELAY(samples48k)); }
static inline int cv_ope_set_comment_padding(OggOpusEnc *enc, opus_int32 bytes) { return ope_encoder_ctl(enc, OPE_SET_COMMENT_PADDING(bytes)); }
