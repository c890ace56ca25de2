// exp(y) for y <= 0, the softmax's exponent (scores minus their running
// max): y = n ln2 + r (Cody-Waite: ln2 in a short high part and the rest, so
// n ln2's error stays below r's ulp), e^r by its Taylor series to r^7
// (|r| <= ln2 / 2: the first term left out is under 3e-9), times 2^n. Worst
// 7.6e-8 relative to float64 (attention_bf16_test), about an f32 ulp;
// under kExpFloor the result is 0, as e^y rounds to in f32; NaN stays NaN.
// Hand-written: Sleef's only float exp is its 1-ulp u10 at about twice the
// operations, and an out-of-line call that spills the caller's vectors.
// The scalar form (ExpBelowZero, attention_bf16.h) and the 16-lane one
// below are the same operations, so the same bits.
#pragma once

#include "kernels/targets.h"

namespace kvtrim::kernels::expbz {

constexpr float kLog2e = 1.44269504f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f, kFloor = -110.f;
constexpr int kTerms = 8;
constexpr float kPoly[kTerms] = {1.f / 5040, 1.f / 720, 1.f / 120, 1.f / 24, 1.f / 6, 0.5f, 1.f, 1.f};

#ifdef KVTRIM_X86
// 16 lanes (AVX512F only: max, roundscale, FMAs, scalef).
__attribute__((target("avx512f"))) inline __m512 Exp16(__m512 y) {
  y = _mm512_max_ps(_mm512_set1_ps(kFloor), y);  // a NaN y stays NaN (max returns its second operand)
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(y, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), y);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kPoly[0]);
  for (int k = 1; k < kTerms; ++k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kPoly[k]));
  return _mm512_scalef_ps(p, n);
}
#endif

}  // namespace kvtrim::kernels::expbz
