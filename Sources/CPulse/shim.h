// CPulse: the libpulse headers, plus static inline shims for what Swift cannot import.
#pragma once
#include <pulse/pulseaudio.h>
#include <pulse/thread-mainloop.h>

// PA_INVALID_INDEX is a cast macro, which Swift does not import.
static inline uint32_t cv_pulse_invalid_index(void) { return PA_INVALID_INDEX; }
