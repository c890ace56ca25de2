// Eigen for the numerics module. GCC 12 reports false -Wmaybe-uninitialized
// warnings inside Eigen's AVX-512 double-precision GEMM packing (the
// intrinsics' own headers); they are silenced for Eigen's headers only.
// Include this before anything else that may pull in <immintrin.h>.
#pragma once
#include "kernels/intrinsics.h"  // <immintrin.h> silenced, and the macros below
KVTRIM_QUIET_GCC12_BEGIN
#include <Eigen/Dense>
KVTRIM_QUIET_GCC12_END
