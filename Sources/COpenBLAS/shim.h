// COpenBLAS: Debian's OpenBLAS (libopenblas-dev), for the wake front end's matrix products.
#pragma once
#include <cblas.h>
