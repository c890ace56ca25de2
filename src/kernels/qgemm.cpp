#include "kernels/qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu.h"
#include "kernels/kquant.h"
#include "kernels/quant.h"

#include "kernels/targets.h"

namespace kvtrim::kernels {
namespace {

constexpr int kBlk = 32;
constexpr float kQMax = 32767.f;

float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// Weight block b of a row as 32 signed values (Q4_0: nibble - 8).
void BlockInts(bool q4, const uint8_t* blk, int8_t* out) {
  if (!q4) {
    std::memcpy(out, blk + 2, kBlk);
    return;
  }
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<int8_t>((blk[2 + j] & 0xF) - 8);
    out[j + 16] = static_cast<int8_t>((blk[2 + j] >> 4) - 8);
  }
}

void ScalarRows(bool q4, const WeightView& w, const QActs& a, int r0, int r1, float* y, int ldy) {
  const size_t bb = q4 ? 18 : 34;
  int8_t wq[kBlk];
  for (int r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    for (int t = 0; t < a.T; ++t) {
      float s = 0.f;
      const int16_t* xq = &a.q[static_cast<size_t>(t) * a.nb * kBlk];
      for (int b = 0; b < a.nb; ++b) {
        BlockInts(q4, row + bb * b, wq);
        int32_t acc = 0;
        for (int j = 0; j < kBlk; ++j) acc += int32_t{wq[j]} * xq[b * kBlk + j];
        s += static_cast<float>(acc) * (HalfAt(row + bb * b) * a.d[static_cast<size_t>(t) * a.nb + b]);
      }
      y[static_cast<size_t>(t) * ldy + r] = s;
    }
  }
}

// Blocks [b0, b1) of the flattened [T * nb] activation blocks.
void QuantizeBlocks(const float* x, QActs* a, int64_t b0, int64_t b1) {
  for (int64_t b = b0; b < b1; ++b) {
    const float* xb = x + b * kBlk;
    float amax = 0.f;
    bool finite = true;
    for (int j = 0; j < kBlk; ++j) {
      amax = std::max(amax, std::fabs(xb[j]));
      finite = finite && std::isfinite(xb[j]);
    }
    // A NaN or infinity makes the block's scale NaN (codes 0), so it reaches
    // the outputs as it would through a float product.
    const float d = finite ? amax / kQMax : std::numeric_limits<float>::quiet_NaN();
    const float id = finite && amax > 0.f ? kQMax / amax : 0.f;
    a->d[b] = d;
    int16_t* q = &a->q[b * kBlk];
    int32_t s0 = 0, s1 = 0;
    for (int j = 0; j < kBlk; ++j) {
      q[j] = static_cast<int16_t>(std::clamp(std::nearbyint(xb[j] * id), -kQMax, kQMax));
      (j < 16 ? s0 : s1) += q[j];
    }
    a->hsum[2 * b] = s0;
    a->hsum[2 * b + 1] = s1;
  }
}

#ifdef KVTRIM_X86

KVTRIM_T_AVX2 inline float HalfAtF16c(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// ---- AVX2: one block of weights per ymm, widened to int16.
KVTRIM_T_AVX2 inline __m256i LoadW2(bool q4, const uint8_t* blk) {
  if (!q4) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
  const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0xF)), hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0xF));
  return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

KVTRIM_T_AVX2 inline float Hsum2(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}
KVTRIM_T_AVX2 inline float HmaxAvx2(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

// Sign-extends the 32 int8 weights of a block to two vectors of 16 int16.
KVTRIM_T_AVX2 inline void Widen(__m256i w, __m256i* lo, __m256i* hi) {
  *lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(w));
  *hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(w, 1));
}

// Q4_0: the 16 bytes zero-extended to int16 hold both nibbles of each byte;
// low nibbles (elements 0..15) and high nibbles (16..31), minus 8, as int16.
KVTRIM_T_AVX2 inline void WidenQ4(const uint8_t* blk, __m256i* lo, __m256i* hi) {
  const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
  const __m256i eight = _mm256_set1_epi16(8);
  *lo = _mm256_sub_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0xF)), eight);
  *hi = _mm256_sub_epi16(_mm256_srli_epi16(v, 4), eight);
}

// QuantizeBlocks with 8 floats per vector; the same codes bit for bit
// (round_ps to nearest even = nearbyint in the default rounding mode, the
// clamp and the scale computed as in the scalar loop).
KVTRIM_T_AVX2 void QuantizeBlocksAvx2(const float* x, QActs* a, int64_t b0, int64_t b1) {
  const __m256 sign = _mm256_set1_ps(-0.f), big = _mm256_set1_ps(std::numeric_limits<float>::max());
  for (int64_t b = b0; b < b1; ++b) {
    const float* xb = x + b * kBlk;
    __m256 v[4], amax = _mm256_setzero_ps();
    int finite = 0xFF;
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xb + 8 * k);
      const __m256 ab = _mm256_andnot_ps(sign, v[k]);
      finite &= _mm256_movemask_ps(_mm256_cmp_ps(ab, big, _CMP_LE_OQ));
      amax = _mm256_max_ps(amax, ab);
    }
    int16_t* q = &a->q[b * kBlk];
    if (finite != 0xFF) {  // as the scalar loop: NaN scale, zero codes
      a->d[b] = std::numeric_limits<float>::quiet_NaN();
      std::fill(q, q + kBlk, int16_t{0});
      a->hsum[2 * b] = a->hsum[2 * b + 1] = 0;
      continue;
    }
    const float m = HmaxAvx2(amax);
    a->d[b] = m / kQMax;
    const __m256 id = _mm256_set1_ps(m > 0.f ? kQMax / m : 0.f);
    const __m256 hi = _mm256_set1_ps(kQMax), lo = _mm256_set1_ps(-kQMax);
    __m256i c[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 r = _mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      c[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
    }
    const __m256i p0 = _mm256_permute4x64_epi64(_mm256_packs_epi32(c[0], c[1]), 0xD8);
    const __m256i p1 = _mm256_permute4x64_epi64(_mm256_packs_epi32(c[2], c[3]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 16), p1);
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i s = _mm256_hadd_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones));
    // s lanes: [h0 h0 h1 h1 | h0 h0 h1 h1] partial sums of halves 0 and 1
    alignas(32) int32_t t[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), s);
    a->hsum[2 * b] = t[0] + t[1] + t[4] + t[5];
    a->hsum[2 * b + 1] = t[2] + t[3] + t[6] + t[7];
  }
}

// y[j * ldy + i] for RM rows (w[i]) x RN tokens (x[j], dx[j]): per block,
// two madd_epi16 (int16 x int16 -> int32 pairs), exact in int32.
template <bool Q4, int RM, int RN>
KVTRIM_T_AVX2 void TileAvx2(const uint8_t* const* w, const int16_t* const* x, const float* const* dx, int nb,
                            float* y, int ldy) {
  constexpr size_t bb = Q4 ? 18 : 34;
  __m256 acc[RM][RN];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    __m256i lo[RM], hi[RM];
    __m256 dw[RM];
    for (int i = 0; i < RM; ++i) {
      const uint8_t* blk = w[i] + bb * b;
      if constexpr (Q4) WidenQ4(blk, &lo[i], &hi[i]);
      else Widen(LoadW2(Q4, blk), &lo[i], &hi[i]);
      dw[i] = _mm256_set1_ps(HalfAtF16c(blk));
    }
    for (int j = 0; j < RN; ++j) {
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[j] + kBlk * b));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[j] + kBlk * b + 16));
      const __m256 d = _mm256_set1_ps(dx[j][b]);
      for (int i = 0; i < RM; ++i) {
        const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(lo[i], x0), _mm256_madd_epi16(hi[i], x1));
        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw[i], d), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) y[static_cast<size_t>(j) * ldy + i] = Hsum2(acc[i][j]);
}

// ---- AVX-512 VNNI: one block per zmm (32 int16), vpdpwssd.
template <bool Q4, int RM, int RN>
KVTRIM_T_AVX512 void TileAvx512(const uint8_t* const* w, const int16_t* const* x, const float* const* dx, int nb,
                                float* y, int ldy) {
  constexpr size_t bb = Q4 ? 18 : 34;
  __m512 acc[RM][RN];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    __m512i wv[RM];
    __m512 dw[RM];
    for (int i = 0; i < RM; ++i) {
      const uint8_t* blk = w[i] + bb * b;
      wv[i] = _mm512_cvtepi8_epi16(LoadW2(Q4, blk));
      dw[i] = _mm512_set1_ps(HalfAtF16c(blk));
    }
    for (int j = 0; j < RN; ++j) {
      const __m512i xv = _mm512_loadu_si512(x[j] + kBlk * b);
      const __m512 d = _mm512_set1_ps(dx[j][b]);
      for (int i = 0; i < RM; ++i) {
        const __m512i p = _mm512_dpwssd_epi32(_mm512_setzero_si512(), wv[i], xv);
        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw[i], d), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) y[static_cast<size_t>(j) * ldy + i] = _mm512_reduce_add_ps(acc[i][j]);
}

// Walks [r0, r1) x [0, T) in RM x RN tiles, the edges in 1-wide tiles.
template <bool Q4, int RM, int RN, bool V512>
void Drive(const WeightView& w, const QActs& a, int r0, int r1, float* y, int ldy) {
  auto tile = [&](auto rm, auto rn, int r, int t) {
    constexpr int M = decltype(rm)::value, N = decltype(rn)::value;
    const uint8_t* wr[M];
    const int16_t* xr[N];
    const float* dr[N];
    for (int i = 0; i < M; ++i) wr[i] = w.row(r + i);
    for (int j = 0; j < N; ++j) {
      xr[j] = &a.q[static_cast<size_t>(t + j) * a.nb * kBlk];
      dr[j] = &a.d[static_cast<size_t>(t + j) * a.nb];
    }
    float* yo = y + static_cast<size_t>(t) * ldy + r;
    if constexpr (V512) TileAvx512<Q4, M, N>(wr, xr, dr, a.nb, yo, ldy);
    else TileAvx2<Q4, M, N>(wr, xr, dr, a.nb, yo, ldy);
  };
  using M1 = std::integral_constant<int, 1>;
  using MR = std::integral_constant<int, RM>;
  using NR = std::integral_constant<int, RN>;
  int r = r0;
  for (; r + RM <= r1; r += RM) {
    int t = 0;
    for (; t + RN <= a.T; t += RN) tile(MR{}, NR{}, r, t);
    for (; t < a.T; ++t) tile(MR{}, M1{}, r, t);
  }
  for (; r < r1; ++r) {
    int t = 0;
    for (; t + RN <= a.T; t += RN) tile(M1{}, NR{}, r, t);
    for (; t < a.T; ++t) tile(M1{}, M1{}, r, t);
  }
}

#endif  // KVTRIM_X86

}  // namespace

bool QGemmSupports(const WeightView& w) {
  return (w.type == GgmlType::Q8_0 || w.type == GgmlType::Q4_0) && w.cols > 0 && w.cols % kBlk == 0;
}

void QuantizeActs(const float* x, int T, int cols, QActs* a, ThreadPool* pool) {
  a->T = T;
  a->nb = cols / kBlk;
  a->q.resize(static_cast<size_t>(T) * cols);
  a->d.resize(static_cast<size_t>(T) * a->nb + 16);
  a->hsum.resize(static_cast<size_t>(T) * a->nb * 2);
  auto run = [&](int64_t b0, int64_t b1) {
#ifdef KVTRIM_X86
    if (ActiveKernelPath() >= KernelPath::kAvx2) return QuantizeBlocksAvx2(x, a, b0, b1);
#endif
    QuantizeBlocks(x, a, b0, b1);
  };
  if (pool && T > 1) {
    pool->ParallelFor(T, [&](int64_t t0, int64_t t1) { run(t0 * a->nb, t1 * a->nb); }, 16);
  } else {
    run(0, static_cast<int64_t>(T) * a->nb);
  }
}

void QGemmRows(

const WeightView& w, const QActs& a, int r0, int r1, float* y, int ldy) {
  const bool q4 = w.type == GgmlType::Q4_0;
  const KernelPath p = ActiveKernelPath();
#ifdef KVTRIM_X86
  if (p == KernelPath::kAvx512) {
    return q4 ? Drive<true, 4, 4, true>(w, a, r0, r1, y, ldy) : Drive<false, 4, 4, true>(w, a, r0, r1, y, ldy);
  }
  if (p == KernelPath::kAvx2) {
    return q4 ? Drive<true, 4, 2, false>(w, a, r0, r1, y, ldy) : Drive<false, 4, 2, false>(w, a, r0, r1, y, ldy);
  }
#endif
  (void)p;
  ScalarRows(q4, w, a, r0, r1, y, ldy);
}

bool QGemvBlockSupports(const WeightView& w) {
  return HaveDotBlocksQ16() && IsBlockType(w.type) && w.cols % kBlk == 0 && ActiveKernelPath() >= KernelPath::kAvx2;
}

void QGemvBlockRows(const WeightView& w, const QActs& a, int r0, int r1, float* y) {
  const int nblocks = w.cols / static_cast<int>(GetTypeTraits(static_cast<uint32_t>(w.type))->block_elems);
  // Q4_K / Q6_K: whole-row tiles of 4 rows (kquant.h GemvKQ16Avx2).
  if (GemvKQ16Avx2(w.type, w.data, w.row_bytes(), nblocks, a.q.data(), a.d.data(), a.hsum.data(), r0, r1, y)) return;
  for (int r = r0; r < r1; ++r) DotBlocksQ16Avx2(w.type, w.row(r), a.q.data(), a.d.data(), a.hsum.data(), nblocks, &y[r]);
}

}  // namespace kvtrim::kernels
