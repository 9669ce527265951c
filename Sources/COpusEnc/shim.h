// COpusEnc: the libopusenc headers, plus static inline shims for what Swift cannot import.
#pragma once
#include <opusenc.h>
