// Eigen's core (matrices and their products) for the kernels, included
// inside intrinsics.h's silencing of GCC 12's false positive: Eigen's
// AVX-512 GEMM packing (gemm_pack_lhs) warns in avx512fintrin.h.
// (kv/numerics/eigen.h does the same for <Eigen/Dense>.)
#pragma once
#include "kernels/intrinsics.h"
KVTRIM_QUIET_GCC12_BEGIN
#include <Eigen/Core>
KVTRIM_QUIET_GCC12_END
