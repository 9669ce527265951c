// CSpeexDSP: the speexdsp headers, plus static inline shims for what Swift cannot import.
#pragma once
#include <speex/speex_resampler.h>
#include <speex/speex_echo.h>

/// speex_echo_ctl's SET_SAMPLING_RATE, whose variadic void* Swift cannot pass typed.
static inline int cv_speex_echo_set_rate(SpeexEchoState *st, int rate) {
    return speex_echo_ctl(st, SPEEX_ECHO_SET_SAMPLING_RATE, &rate);
}
