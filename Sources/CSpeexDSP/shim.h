// CSpeexDSP: the speexdsp headers, plus static inline shims for what Swift cannot import.
#pragma once
#include <speex/speex_resampler.h>
