// COpusFile: the opusfile headers, plus static inline shims for what Swift cannot import.
#pragma once
#include <opusfile.h>
