// CSQLite: SQLite 3, plus shims for the destructor macros Swift cannot import.
#pragma once
#include <sqlite3.h>

static inline sqlite3_destructor_type cv_sqlite_transient(void) { return SQLITE_TRANSIENT; }
