// COpus: the opus headers, plus static inline shims for what Swift cannot import.
// opus_encoder_ctl is variadic and its requests are function-like macros, so each request
// Swift needs gets a one-line shim here (prefix cv_opus_); never re-spell a macro in Swift.
#pragma once
#include <opus.h>

static inline int cv_opus_set_bitrate(OpusEncoder *enc, opus_int32 bps) { return opus_encoder_ctl(enc, OPUS_SET_BITRATE(bps)); }
static inline int cv_opus_set_complexity(OpusEncoder *enc, opus_int32 complexity) { return opus_encoder_ctl(enc, OPUS_SET_COMPLEXITY(complexity)); }
static inline int cv_opus_set_signal_voice(OpusEncoder *enc) { return opus_encoder_ctl(enc, OPUS_SET_SIGNAL(OPUS_SIGNAL_VOICE)); }
static inline int cv_opus_set_dtx(OpusEncoder *enc, opus_int32 on) { return opus_encoder_ctl(enc, OPUS_SET_DTX(on)); }
static inline int cv_opus_get_bitrate(OpusEncoder *enc, opus_int32 *bps) { return opus_encoder_ctl(enc, OPUS_GET_BITRATE(bps)); }
static inline int cv_opus_get_lookahead(OpusEncoder *enc, opus_int32 *samples) { return opus_encoder_ctl(enc, OPUS_GET_LOOKAHEAD(samples)); }
