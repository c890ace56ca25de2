// Eigen for the numerics module. GCC 12 reports false -Wmaybe-uninitialized
// warnings inside Eigen's AVX-512 double-precision GEMM packing (the
// intrinsics' own headers); they are silenced for Eigen's headers only.
// Include this before anything else that may pull in <immintrin.h>.
#pragma once
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"  // the same, at -O1 (sanitizer builds)
#include <immintrin.h>
#include <Eigen/Dense>
#pragma GCC diagnostic pop
