// Register-only multiply-add loops (fma_peak.h). Hand-written: a library
// GEMM measures itself (its blocking, its loads), not the core's peak, and
// no Debian package offers a peak-FLOPs probe as a library.
#include "kernels/fma_peak.h"

#include "kernels/cpu.h"
#include "kernels/targets.h"

namespace kvtrim::kernels {
namespace {

constexpr int kAcc = kPeakAccumulators;

double ScalarF32(int64_t iters, double* check) {
  float acc[kAcc] = {};
  volatile float one = 1.f;  // not folded away
  const float a = one, b = one;
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kAcc; ++j) acc[j] = acc[j] * a + b;
  double s = 0;
  for (float x : acc) s += x;
  *check = s;
  return 2.0 * kAcc * static_cast<double>(iters);
}

#ifdef KVTRIM_X86
bool HasBf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}

KVTRIM_T_AVX2 double Avx2F32(int64_t iters, double* check) {
  __m256 acc[kAcc];
  for (__m256& x : acc) x = _mm256_setzero_ps();
  volatile float one = 1.f;
  const __m256 a = _mm256_set1_ps(one), b = _mm256_set1_ps(one);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  alignas(32) float lanes[8];
  double s = 0;
  for (const __m256& x : acc) {
    _mm256_store_ps(lanes, x);
    for (float v : lanes) s += v;
  }
  *check = s;
  return 2.0 * 8 * kAcc * static_cast<double>(iters);
}

KVTRIM_T_AVX512 double Avx512F32(int64_t iters, double* check) {
  __m512 acc[kAcc];
  for (__m512& x : acc) x = _mm512_setzero_ps();
  volatile float one = 1.f;
  const __m512 a = _mm512_set1_ps(one), b = _mm512_set1_ps(one);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  double s = 0;
  alignas(64) float lanes[16];  // a store, not _mm512_reduce_add_ps: GCC 12 warns on its undefined upper half
  for (const __m512& x : acc) {
    _mm512_store_ps(lanes, x);
    for (float f : lanes) s += f;
  }
  *check = s;
  return 2.0 * 16 * kAcc * static_cast<double>(iters);
}

// vdpbf16ps: per f32 lane, acc += x[2i] y[2i] + x[2i+1] y[2i+1] (32 products).
KVTRIM_T_AVX512_BF16 double Avx512Bf16(int64_t iters, double* check) {
  __m512 acc[kAcc];
  for (__m512& x : acc) x = _mm512_setzero_ps();
  volatile float one = 1.f;
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(one), _mm512_set1_ps(one));
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], x, x);
  double s = 0;
  alignas(64) float lanes[16];  // as in Avx512F32
  for (const __m512& v : acc) {
    _mm512_store_ps(lanes, v);
    for (float f : lanes) s += f;
  }
  *check = s;
  return 2.0 * 32 * kAcc * static_cast<double>(iters);
}

// vpdpbusd: per int32 lane, acc += the sum of four u8 x s8 products (64 products).
KVTRIM_T_AVX512 double Avx512Int8(int64_t iters, double* check) {
  __m512i acc[kAcc];
  for (__m512i& x : acc) x = _mm512_setzero_si512();
  volatile char one = 1;
  const __m512i x = _mm512_set1_epi8(one);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], x, x);
  double s = 0;
  alignas(64) int32_t lanes[16];  // as in Avx512F32
  for (const __m512i& v : acc) {
    _mm512_store_si512(lanes, v);
    for (int32_t x : lanes) s += static_cast<double>(x);
  }
  *check = s;
  return 2.0 * 64 * kAcc * static_cast<double>(iters);
}
#endif

}  // namespace

const char* PeakKindName(PeakKind k) {
  switch (k) {
    case PeakKind::kF32: return "f32";
    case PeakKind::kBf16: return "bf16";
    case PeakKind::kInt8: return "int8";
  }
  return "?";
}

bool HasPeakKind(PeakKind k) {
#ifdef KVTRIM_X86
  const bool avx512 = BestKernelPath() == KernelPath::kAvx512;  // avx512f/bw/vl and vnni
  switch (k) {
    case PeakKind::kF32: return true;
    case PeakKind::kBf16: return avx512 && HasBf16();
    case PeakKind::kInt8: return avx512;
  }
  return false;
#else
  return k == PeakKind::kF32;
#endif
}

double RunPeakLoop(PeakKind k, int64_t iters, double* check) {
  *check = 0;
  if (!HasPeakKind(k)) return 0;
#ifdef KVTRIM_X86
  const KernelPath best = BestKernelPath();
  switch (k) {
    case PeakKind::kF32:
      if (best == KernelPath::kAvx512) return Avx512F32(iters, check);
      if (best == KernelPath::kAvx2) return Avx2F32(iters, check);
      return ScalarF32(iters, check);
    case PeakKind::kBf16: return Avx512Bf16(iters, check);
    case PeakKind::kInt8: return Avx512Int8(iters, check);
  }
  return 0;
#else
  return ScalarF32(iters, check);
#endif
}

}  // namespace kvtrim::kernels
