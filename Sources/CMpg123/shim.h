// CMpg123: the libmpg123 headers, plus static inline shims for what Swift cannot import.
#pragma once
#include <mpg123.h>
