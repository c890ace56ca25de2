// bf16 tile products of the causal attention pass (attention_bf16.h). Each
// function runs AVX512-BF16 where the CPU has it, else a scalar emulation
// with the same rounding (operands to bf16, round to nearest even; sums in
// f32), so the packed forms and their tests hold on every machine; the pass
// itself only asks for bf16 tiles where HasBf16Tiles() (the emulation is
// slower than the f32 tiles).
#include "kernels/attention_bf16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/exp_below_zero.h"
#include "kernels/targets.h"

namespace kvtrim::kernels {
namespace {

// bf16 bits of x, rounded to nearest even (a NaN stays a NaN).
uint16_t RoundBf16Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

uint32_t Bf16Pair(float lo, float hi) { return RoundBf16Bits(lo) | static_cast<uint32_t>(RoundBf16Bits(hi)) << 16; }
float PairLo(uint32_t w) { return Bf16ToFloat(static_cast<uint16_t>(w & 0xffffu)); }
float PairHi(uint32_t w) { return Bf16ToFloat(static_cast<uint16_t>(w >> 16)); }

// exp of the probabilities: kernels/exp_below_zero.h (within 7.6e-8, far
// inside bf16's 2^-8 rounding).

#ifdef KVTRIM_X86
bool DetectBf16Tiles() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
}

// 32 floats (n of them read, the rest 0) as 16 words of bf16 pairs.
KVTRIM_T_AVX512_BF16 inline __m512i Cvt32(const float* x, int n) {
  const __mmask16 m0 = static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << std::max(n, 0)) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(n >= 32 ? 0xffff : n <= 16 ? 0 : (1u << (n - 16)) - 1);
  return (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, x + 16), _mm512_maskz_loadu_ps(m0, x));
}

KVTRIM_T_AVX512_BF16 void PackRowsAvx(const float* x, int rows, int ld, int d, uint32_t* out) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < d; c += 32)
      _mm512_storeu_si512(out + static_cast<size_t>(r) * (d / 2) + c / 2, Cvt32(x + static_cast<size_t>(r) * ld + c, 32));
}

KVTRIM_T_AVX512_BF16 void PackValuesAvx(const float* V, int w, int d, uint32_t* vp) {
  // (a_0 .. a_15, b_0 .. b_15) -> (a_0, b_0, a_1, b_1, ...): each word one dimension's pair.
  alignas(64) static const uint16_t kIdx[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                                8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kIdx);
  for (int j = 0; j < w; j += 2) {
    const float* a = V + static_cast<size_t>(j) * d;
    const bool two = j + 1 < w;
    for (int c = 0; c < d; c += 16) {
      const __m512 va = _mm512_loadu_ps(a + c), vb = two ? _mm512_loadu_ps(a + d + c) : _mm512_setzero_ps();
      const __m512i ab = (__m512i)_mm512_cvtne2ps_pbh(vb, va);
      _mm512_storeu_si512(vp + static_cast<size_t>(j / 2) * d + c, _mm512_permutexvar_epi16(idx, ab));
    }
  }
}

// NR rows x NG groups of 16 keys: s = q k^T, the last group's keys past w not stored.
template <int NR, int NG>
KVTRIM_T_AVX512_BF16 void ScoresTile(const uint32_t* qp, const uint32_t* kp, int dp, int r0, int g0, int w, float* s,
                                     int ld_s) {
  __m512 acc[NR][NG];
  for (int r = 0; r < NR; ++r)
    for (int g = 0; g < NG; ++g) acc[r][g] = _mm512_setzero_ps();
  for (int p = 0; p < dp; ++p) {
    __m512i kv[NG];
    for (int g = 0; g < NG; ++g) kv[g] = _mm512_loadu_si512(kp + (static_cast<size_t>(g0 + g) * dp + p) * 16);
    for (int r = 0; r < NR; ++r) {
      const __m512i qb = _mm512_set1_epi32(static_cast<int>(qp[static_cast<size_t>(r0 + r) * dp + p]));
      for (int g = 0; g < NG; ++g) acc[r][g] = _mm512_dpbf16_ps(acc[r][g], (__m512bh)kv[g], (__m512bh)qb);
    }
  }
  for (int g = 0; g < NG; ++g) {
    const int j = (g0 + g) * 16, n = std::min(16, w - j);
    const __mmask16 m = static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1);
    for (int r = 0; r < NR; ++r) _mm512_mask_storeu_ps(s + static_cast<size_t>(r0 + r) * ld_s + j, m, acc[r][g]);
  }
}

template <int NR>
KVTRIM_T_AVX512_BF16 void ScoresRows(const uint32_t* qp, const uint32_t* kp, int dp, int r0, int groups, int w,
                                     float* s, int ld_s) {
  int g0 = 0;
  for (; g0 + 4 <= groups; g0 += 4) ScoresTile<NR, 4>(qp, kp, dp, r0, g0, w, s, ld_s);
  switch (groups - g0) {
    case 3: ScoresTile<NR, 3>(qp, kp, dp, r0, g0, w, s, ld_s); break;
    case 2: ScoresTile<NR, 2>(qp, kp, dp, r0, g0, w, s, ld_s); break;
    case 1: ScoresTile<NR, 1>(qp, kp, dp, r0, g0, w, s, ld_s); break;
    default: break;
  }
}

KVTRIM_T_AVX512_BF16 void ScoresAvx(const uint32_t* qp, int rows, const uint32_t* kp, int w, int d, float* s,
                                    int ld_s) {
  const int dp = d / 2, groups = (w + 15) / 16;
  int r0 = 0;
  for (; r0 + 4 <= rows; r0 += 4) ScoresRows<4>(qp, kp, dp, r0, groups, w, s, ld_s);
  // The last 1-3 rows as one tile (63 rows, G = 3: a 3-row tile runs about
  // three times as fast as three 1-row tiles, which wait on their loads).
  switch (rows - r0) {
    case 3: ScoresRows<3>(qp, kp, dp, r0, groups, w, s, ld_s); break;
    case 2: ScoresRows<2>(qp, kp, dp, r0, groups, w, s, ld_s); break;
    case 1: ScoresRows<1>(qp, kp, dp, r0, groups, w, s, ld_s); break;
    default: break;
  }
}

// NR rows x 16 NG dimensions [c0, c0 + 16 NG): o += p v over every pair of
// entries (NG = 4; 2 for the 32-dimension remainder of d = 32, 96, ...).
template <int NR, int NG>
KVTRIM_T_AVX512_BF16 void PvTile(const uint32_t* pp, int wp, const uint32_t* vp, int d, int r0, int c0, float* o,
                                 int ld_o) {
  __m512 acc[NR][NG];
  for (int r = 0; r < NR; ++r)
    for (int g = 0; g < NG; ++g) acc[r][g] = _mm512_loadu_ps(o + static_cast<size_t>(r0 + r) * ld_o + c0 + 16 * g);
  for (int jp = 0; jp < wp; ++jp) {
    __m512i vv[NG];
    for (int g = 0; g < NG; ++g) vv[g] = _mm512_loadu_si512(vp + static_cast<size_t>(jp) * d + c0 + 16 * g);
    for (int r = 0; r < NR; ++r) {
      const __m512i pb = _mm512_set1_epi32(static_cast<int>(pp[static_cast<size_t>(r0 + r) * wp + jp]));
      for (int g = 0; g < NG; ++g) acc[r][g] = _mm512_dpbf16_ps(acc[r][g], (__m512bh)vv[g], (__m512bh)pb);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int g = 0; g < NG; ++g) _mm512_storeu_ps(o + static_cast<size_t>(r0 + r) * ld_o + c0 + 16 * g, acc[r][g]);
}

// NR rows' P V over 64 dimensions from c0, or the last 32 (half).
template <int NR>
KVTRIM_T_AVX512_BF16 void PvRows(const uint32_t* pp, int wp, const uint32_t* vp, int d, int r0, int c0, float* o,
                                 int ld_o, bool half) {
  half ? PvTile<NR, 2>(pp, wp, vp, d, r0, c0, o, ld_o) : PvTile<NR, 4>(pp, wp, vp, d, r0, c0, o, ld_o);
}

KVTRIM_T_AVX512_BF16 void PvPackedAvx(const uint32_t* pp, int rows, const uint32_t* vp, int w, int d, float* o,
                                      int ld_o) {
  const int wp = (w + 1) / 2;
  for (int c0 = 0; c0 < d; c0 += 64) {
    const bool half = d - c0 < 64;
    int r0 = 0;
    for (; r0 + 4 <= rows; r0 += 4) PvRows<4>(pp, wp, vp, d, r0, c0, o, ld_o, half);
    switch (rows - r0) {  // the last 1-3 rows as one tile, as ScoresAvx
      case 3: PvRows<3>(pp, wp, vp, d, r0, c0, o, ld_o, half); break;
      case 2: PvRows<2>(pp, wp, vp, d, r0, c0, o, ld_o, half); break;
      case 1: PvRows<1>(pp, wp, vp, d, r0, c0, o, ld_o, half); break;
      default: break;
    }
  }
}

KVTRIM_T_AVX512_BF16 void PvAvx(const float* p, int rows, int ld_p, const uint32_t* vp, int w, int d, float* o,
                                int ld_o, uint32_t* pp) {
  const int wp = (w + 1) / 2;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < 2 * wp; c += 32) {
      const int left = wp - c / 2;
      const __mmask16 m = static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1);
      _mm512_mask_storeu_epi32(pp + static_cast<size_t>(r) * wp + c / 2, m, Cvt32(p + static_cast<size_t>(r) * ld_p + c, w - c));
    }
  PvPackedAvx(pp, rows, vp, w, d, o, ld_o);
}

// ExpBelowZero in 16 lanes: the same operations, so the same bits.
KVTRIM_T_AVX512_BF16 inline __m512 ExpAvx(__m512 y) { return expbz::Exp16(y); }

KVTRIM_T_AVX512_BF16 inline __mmask16 FirstLanes(int n) {
  return static_cast<__mmask16>(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1);
}

KVTRIM_T_AVX512_BF16 float SoftmaxRowAvx(const float* s, int vis, int w, float scale, const float* b, float m,
                                         float* m_new, uint32_t* pp) {
  const __m512 vs = _mm512_set1_ps(scale);
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int j = 0; j < vis; j += 16) {
    const __mmask16 k = FirstLanes(vis - j);
    const __m512 x = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, s + j), vs, _mm512_maskz_loadu_ps(k, b + j));
    mx = _mm512_mask_max_ps(mx, k, mx, x);
  }
  const float mn = std::max(m, _mm512_reduce_max_ps(mx));
  *m_new = mn;
  const int wp = (w + 1) / 2;
  if (mn == -INFINITY) {
    std::fill(pp, pp + wp, 0u);
    return 0.f;
  }
  const __m512 vm = _mm512_set1_ps(mn);
  __m512 sum = _mm512_setzero_ps();
  for (int j = 0; j < 2 * wp; j += 32) {
    const __mmask16 k0 = FirstLanes(vis - j), k1 = FirstLanes(vis - j - 16);
    const __m512 x0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k0, s + j), vs, _mm512_maskz_loadu_ps(k0, b + j));
    const __m512 x1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k1, s + j + 16), vs, _mm512_maskz_loadu_ps(k1, b + j + 16));
    const __m512 e0 = _mm512_maskz_mov_ps(k0, ExpAvx(_mm512_sub_ps(x0, vm)));
    const __m512 e1 = _mm512_maskz_mov_ps(k1, ExpAvx(_mm512_sub_ps(x1, vm)));
    sum = _mm512_add_ps(sum, _mm512_add_ps(e0, e1));
    _mm512_mask_storeu_epi32(pp + j / 2, FirstLanes(wp - j / 2), (__m512i)_mm512_cvtne2ps_pbh(e1, e0));
  }
  return _mm512_reduce_add_ps(sum);
}
#else
bool DetectBf16Tiles() { return false; }
#endif

}  // namespace

bool HasBf16Tiles() {
  static const bool has = DetectBf16Tiles();
  return has;
}

void PackRowsBf16(const float* x, int rows, int ld, int d, uint32_t* out) {
#ifdef KVTRIM_X86
  if (HasBf16Tiles()) return PackRowsAvx(x, rows, ld, d, out);
#endif
  for (int r = 0; r < rows; ++r)
    for (int p = 0; p < d / 2; ++p)
      out[static_cast<size_t>(r) * (d / 2) + p] = Bf16Pair(x[static_cast<size_t>(r) * ld + 2 * p], x[static_cast<size_t>(r) * ld + 2 * p + 1]);
}

void PackKeysBf16(const float* K, int w, int d, uint32_t* kp) {
  const int dp = d / 2, groups = (w + 15) / 16;
  uint32_t row[kMaxBf16TileDim / 2];  // one key's pairs
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < 16; ++i) {
      const int j = g * 16 + i;
      if (j < w) PackRowsBf16(K + static_cast<size_t>(j) * d, 1, d, d, row);
      else std::fill(row, row + dp, 0u);
      uint32_t* dst = kp + static_cast<size_t>(g) * dp * 16 + i;
      for (int p = 0; p < dp; ++p) dst[static_cast<size_t>(p) * 16] = row[p];
    }
}

void PackValuesBf16(const float* V, int w, int d, uint32_t* vp) {
#ifdef KVTRIM_X86
  if (HasBf16Tiles()) return PackValuesAvx(V, w, d, vp);
#endif
  for (int j = 0; j < w; j += 2)
    for (int c = 0; c < d; ++c)
      vp[static_cast<size_t>(j / 2) * d + c] =
          Bf16Pair(V[static_cast<size_t>(j) * d + c], j + 1 < w ? V[static_cast<size_t>(j + 1) * d + c] : 0.f);
}

void ScoresBf16(const uint32_t* qp, int rows, const uint32_t* kp, int w, int d, float* s, int ld_s) {
#ifdef KVTRIM_X86
  if (HasBf16Tiles()) return ScoresAvx(qp, rows, kp, w, d, s, ld_s);
#endif
  const int dp = d / 2;
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < w; ++j) {
      float acc = 0.f;
      for (int p = 0; p < dp; ++p) {
        const uint32_t a = qp[static_cast<size_t>(r) * dp + p], b = kp[(static_cast<size_t>(j / 16) * dp + p) * 16 + j % 16];
        acc += PairLo(a) * PairLo(b) + PairHi(a) * PairHi(b);
      }
      s[static_cast<size_t>(r) * ld_s + j] = acc;
    }
}

float ExpBelowZero(float y) {
  if (std::isnan(y)) return y;
  using namespace expbz;
  y = std::max(kFloor, y);
  const float n = std::nearbyint(y * kLog2e);
  float r = std::fma(-n, kLn2Hi, y);
  r = std::fma(-n, kLn2Lo, r);
  float p = kPoly[0];
  for (int k = 1; k < kTerms; ++k) p = std::fma(p, r, kPoly[k]);
  return std::ldexp(p, static_cast<int>(n));
}

float SoftmaxRowBf16(const float* s, int vis, int w, float scale, const float* b, float m, float* m_new,
                     uint32_t* pp) {
  vis = std::clamp(vis, 0, w);
#ifdef KVTRIM_X86
  if (HasBf16Tiles()) return SoftmaxRowAvx(s, vis, w, scale, b, m, m_new, pp);
#endif
  float mn = m;
  for (int j = 0; j < vis; ++j) mn = std::max(mn, std::fma(s[j], scale, b[j]));
  *m_new = mn;
  float sum = 0.f;
  for (int jp = 0; jp < (w + 1) / 2; ++jp) {
    float e[2] = {0.f, 0.f};
    for (int h = 0; h < 2; ++h)
      if (const int j = 2 * jp + h; j < vis && mn != -INFINITY) sum += e[h] = ExpBelowZero(std::fma(s[j], scale, b[j]) - mn);
    pp[jp] = Bf16Pair(e[0], e[1]);
  }
  return sum;
}

void AccumulatePackedPvBf16(const uint32_t* pp, int rows, const uint32_t* vp, int w, int d, float* o, int ld_o) {
#ifdef KVTRIM_X86
  if (HasBf16Tiles()) return PvPackedAvx(pp, rows, vp, w, d, o, ld_o);
#endif
  const int wp = (w + 1) / 2;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < d; ++c) {
      float acc = o[static_cast<size_t>(r) * ld_o + c];
      for (int jp = 0; jp < wp; ++jp) {
        const uint32_t a = vp[static_cast<size_t>(jp) * d + c], b = pp[static_cast<size_t>(r) * wp + jp];
        acc += PairLo(a) * PairLo(b) + PairHi(a) * PairHi(b);
      }
      o[static_cast<size_t>(r) * ld_o + c] = acc;
    }
}

void AccumulatePvBf16(const float* p, int rows, int ld_p, const uint32_t* vp, int w, int d, float* o, int ld_o,
                      uint32_t* pp) {
#ifdef KVTRIM_X86
  if (HasBf16Tiles()) return PvAvx(p, rows, ld_p, vp, w, d, o, ld_o, pp);
#endif
  const int wp = (w + 1) / 2;
  for (int r = 0; r < rows; ++r)
    for (int jp = 0; jp < wp; ++jp) {
      const float* pr = p + static_cast<size_t>(r) * ld_p;
      pp[static_cast<size_t>(r) * wp + jp] = Bf16Pair(pr[2 * jp], 2 * jp + 1 < w ? pr[2 * jp + 1] : 0.f);
    }
  AccumulatePackedPvBf16(pp, rows, vp, w, d, o, ld_o);
}

}  // namespace kvtrim::kernels
