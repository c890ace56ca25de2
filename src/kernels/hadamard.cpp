// Randomized Walsh-Hadamard rotation (hadamard.h). Written here: no Debian
// library offers a fast Walsh-Hadamard transform (FFTW and Eigen's FFT do
// Fourier transforms only), and it is a dozen lines.
#include "kernels/hadamard.h"

#include "kernels/cpu.h"
#include "kernels/targets.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace kvtrim::kernels {

int HadamardBlock(int d) { return d & -d; }

float HadamardSign(int i) {
  // splitmix64 of the index: the sign pattern is part of the stored format.
  uint64_t z = static_cast<uint64_t>(i) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (z >> 63) ? -1.f : 1.f;
}

namespace {

// D / sqrt(b) for rows of up to kTable entries, computed once.
constexpr int kTable = 1024;

const float* ScaledSigns(int d, float s) {
  static const std::vector<float> signs = [] {
    std::vector<float> v(kTable);
    for (int i = 0; i < kTable; ++i) v[i] = HadamardSign(i);
    return v;
  }();
  thread_local std::vector<float> scaled;
  thread_local int scaled_d = 0;
  if (scaled_d != d) {
    scaled.resize(d);
    for (int i = 0; i < d; ++i) scaled[i] = (i < kTable ? signs[i] : HadamardSign(i)) * s;
    scaled_d = d;
  }
  return scaled.data();
}

#if KVTRIM_X86
// The butterflies of distance 1, 2, 4 and 8 inside each 16-float vector (a
// permute and a multiply-add each: lane i becomes x[i ^ h] + s x[i], s = -1
// where bit h of i is set), then those of distance 16 and up between
// vectors. b >= 16. (The all-lanes masked permute: GCC 12 warns that the
// unmasked one's undefined pass-through may be used uninitialized.)
KVTRIM_T_AVX512 void FwhtAvx512(float* x, int d, int b) {
  static const __m512i idx[4] = {
      _mm512_set_epi32(14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1),
      _mm512_set_epi32(13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, 2),
      _mm512_set_epi32(11, 10, 9, 8, 15, 14, 13, 12, 3, 2, 1, 0, 7, 6, 5, 4),
      _mm512_set_epi32(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8)};
  static const __m512 sign[4] = {
      _mm512_set_ps(-1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1),
      _mm512_set_ps(-1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1),
      _mm512_set_ps(-1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1),
      _mm512_set_ps(-1, -1, -1, -1, -1, -1, -1, -1, 1, 1, 1, 1, 1, 1, 1, 1)};
  for (int i = 0; i < d; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    for (int s = 0; s < 4; ++s) v = _mm512_fmadd_ps(sign[s], v, _mm512_maskz_permutexvar_ps(0xFFFF, idx[s], v));
    _mm512_storeu_ps(x + i, v);
  }
  for (int o = 0; o < d; o += b)
    for (int h = 16; h < b; h *= 2)
      for (int i = o; i < o + b; i += 2 * h)
        for (int j = i; j < i + h; j += 16) {
          const __m512 a = _mm512_loadu_ps(x + j), c = _mm512_loadu_ps(x + j + h);
          _mm512_storeu_ps(x + j, _mm512_add_ps(a, c));
          _mm512_storeu_ps(x + j + h, _mm512_sub_ps(a, c));
        }
}
#endif

// Unnormalized in-place transform of each block of b entries of x [d].
void Fwht(float* x, int d, int b) {
#if KVTRIM_X86
  // Chosen at run time: the CPU has AVX-512 and the scalar path is not forced
  // (KVTRIM_KERNELS=scalar, kernels/cpu.h: the tests run both).
  static const bool avx512 = BestKernelPath() == KernelPath::kAvx512;
  if (b >= 16 && avx512 && ActiveKernelPath() != KernelPath::kScalar) return FwhtAvx512(x, d, b);
#endif
  for (int o = 0; o < d; o += b)
    for (int h = 1; h < b; h *= 2)
      for (int i = o; i < o + b; i += 2 * h)
        for (int j = i; j < i + h; ++j) {
          const float a = x[j], c = x[j + h];
          x[j] = a + c;
          x[j + h] = a - c;
        }
}

}  // namespace

void RotateRows(float* x, int rows, int d) {
  const int b = HadamardBlock(d);
  const float s = 1.f / std::sqrt(static_cast<float>(b));
  const float* ds = ScaledSigns(d, s);
  for (int r = 0; r < rows; ++r, x += d) {
    for (int i = 0; i < d; ++i) x[i] *= ds[i];
    Fwht(x, d, b);
  }
}

void UnrotateRows(float* x, int rows, int d) {
  const int b = HadamardBlock(d);
  const float s = 1.f / std::sqrt(static_cast<float>(b));
  const float* ds = ScaledSigns(d, s);
  for (int r = 0; r < rows; ++r, x += d) {
    Fwht(x, d, b);
    for (int i = 0; i < d; ++i) x[i] *= ds[i];
  }
}

}  // namespace kvtrim::kernels
