// CEvdev: the libevdev headers, plus static inline shims for what Swift cannot import.
#pragma once
#include <libevdev/libevdev.h>
