// COpus: the opus headers, plus static inline shims for what Swift cannot import.
#pragma once
#include <opus.h>
