// CPulse: the libpulse headers, plus static inline shims for what Swift cannot import.
#pragma once
#include <pulse/pulseaudio.h>
#include <pulse/thread-mainloop.h>
