// The horizontal sum of an AVX register's 8 floats, for the kernels that are
// built with AVX2 enabled (quant, kquant, attention); one definition, so a
// unity build that puts them in one translation unit sees it once.
#pragma once
#if defined(__AVX2__)
#include "kernels/intrinsics.h"

namespace kvtrim::kernels {

inline float Hsum8(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

}  // namespace kvtrim::kernels
#endif
