// CEspeak: the espeak-ng headers, plus static inline shims for what Swift cannot import.
#pragma once
#include <espeak-ng/speak_lib.h>
#include <espeak-ng/espeak_ng.h>
