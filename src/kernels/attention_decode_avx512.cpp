// The decode chunk kernel for AVX-512 builds. The AVX2 kernel
// (attention_decode.cpp) dequantizes a tile of keys into an f32 buffer and
// reads it back once per query head: on the SmolLM2-135M shape (d = 64,
// G = 3) it spent 28% of a q8_0 decode step in the dequantization and ran
// at about 20 ns an entry whatever the type (f32, f16, q8_0, q4_0 alike),
// so fewer KV bytes did not decode faster. Here each key is read once for
// the G query heads: f32 and f16 keys widened to f32 in registers, their G
// dot products of 16 entries reduced together (a transpose-and-add tree, no
// horizontal sum per product); q8_0 and q4_0 keys (d a multiple of 64)
// multiplied in int8 by the query quantized per block (AVX512-VNNI), at
// d = 64 with the 16 entries in the lanes (the keys' codes transposed once,
// no reduction: Int8ScoresTransposed); a tile of up to
// 64 entries shares one softmax step a head; f32 and f16 values are widened
// in registers and multiplied into the accumulators of a group of up to 8
// heads, a part of the row at a time where a whole row's accumulators would
// not fit 16 registers (G = 7 at d = 64: two halves); q8_0 and q4_0 values
// are multiplied as int16 codes by the tile's weights quantized to int16
// (PvInt16Groups, attention_decode_avx512_int8.h); in a tile where some
// head has no weight yet the values are widened once into an L1 buffer each
// live head's P.V reads. The next 16 entries' rows are prefetched while the
// current 16 are computed.
#include "kernels/intrinsics.h"  // <immintrin.h>, GCC 12's false positive silenced

#include "kernels/attention_decode_avx512.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/attention_decode_avx512_common.h"
#include "kernels/attention_decode_avx512_int8.h"
#include "kernels/cpu.h"
#include "kernels/targets.h"

#include "kernels/exp_below_zero.h"

namespace kvtrim::kernels {

#ifdef KVTRIM_DECODE_AVX512
namespace {

using namespace decode512;  // NOLINT(google-build-using-namespace): the kernel's own helpers

// Values [16 k, 16 k + 16) of a stored row as f32.
template <GgmlType T>
inline __m512 Group16(const uint8_t* row, int k) {
  if constexpr (T == GgmlType::F32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + 16 * k);
  } else if constexpr (T == GgmlType::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * k)));
  } else if constexpr (T == GgmlType::Q8_0) {  // 34-byte blocks: f16 scale, 32 int8 codes
    const uint8_t* blk = row + 34 * (k / 2);
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2 + 16 * (k % 2)));
    return _mm512_mul_ps(_mm512_set1_ps(ScaleOf(blk)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c)));
  } else {  // Q4_0, 18-byte blocks: f16 scale, value j in the low nibble of byte j, j + 16 in its high one
    const uint8_t* blk = row + 18 * (k / 2);
    __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
    c = (k % 2) ? _mm512_srli_epi32(c, 4) : _mm512_and_si512(c, _mm512_set1_epi32(15));
    return _mm512_mul_ps(_mm512_set1_ps(ScaleOf(blk)), _mm512_cvtepi32_ps(_mm512_sub_epi32(c, _mm512_set1_epi32(8))));
  }
}

// Keys j and j + 1 widened to f32 (Scores16's pairs).
template <GgmlType T, int NK>
inline void WidenKeyPair(const KvView& kv, int j, __m512* k0, __m512* k1) {
  const uint8_t* r0 = kv.k + kv.row_bytes * j;
  for (int k = 0; k < NK; ++k) k0[k] = Group16<T>(r0, k), k1[k] = Group16<T>(r0 + kv.row_bytes, k);
}

// Scores16's pairs of keys for GG heads (q: the first's query) whose query
// vectors stay in registers (GG <= 4, NK <= 4) for the 16 entries: the
// compiler reloaded them for every product, since the stores to part may
// alias q. Returns the entries done.
template <GgmlType T, int NK, int GG>
int ScorePairsQInRegisters(const KvView& kv, int j0, int w, const float* q, float* part) {
  constexpr int d = 16 * NK;
  __m512 qv[GG][NK];
  for (int g = 0; g < GG; ++g)
    for (int k = 0; k < NK; ++k) qv[g][k] = _mm512_loadu_ps(q + g * d + 16 * k);
  int e = 0;
  for (; e + 2 <= w; e += 2) {
    __m512 k0[NK], k1[NK];
    WidenKeyPair<T, NK>(kv, j0 + e, k0, k1);
    for (int g = 0; g < GG; ++g) {
      __m512 a0 = _mm512_mul_ps(k0[0], qv[g][0]), a1 = _mm512_mul_ps(k1[0], qv[g][0]);
      for (int k = 1; k < NK; ++k) {
        a0 = _mm512_fmadd_ps(k0[k], qv[g][k], a0);
        a1 = _mm512_fmadd_ps(k1[k], qv[g][k], a1);
      }
      _mm512_store_ps(part + (g * 16 + e) * 16, a0);
      _mm512_store_ps(part + (g * 16 + e + 1) * 16, a1);
    }
  }
  return e;
}

// s [g][16]: the scores of entries [j0, j0 + 16) of the tile for every
// query head (entries from w on: -inf), b their log-weights. Two keys at a
// time where the registers hold both (twice the FMA chains in flight).
template <GgmlType T, int NK>
void Scores16(const KvView& kv, int j0, int w, const float* q, int G, __m512 vscale, float* part, float* s, int ld) {
  constexpr int d = 16 * NK;
  constexpr bool kPair = NK <= 8;
  int e = 0;
  if constexpr (NK <= 4) {
    // The heads in groups of at most 4 (G = 7: 3 + 4), each group's queries
    // in registers (26 of the 32 at 4 heads and d = 64), each group
    // widening the keys again from L1; a head's scores as before. An odd
    // last entry: the loop at the end.
    ForHeadGroups(G, 4, [&](int g0, int g1) {
      WithGroupSize<4>(g1 - g0, [&](auto gg) {
        e = ScorePairsQInRegisters<T, NK, decltype(gg)::value>(kv, j0, w, q + g0 * d, part + g0 * 256);
      });
    });
  } else if constexpr (kPair) {
    for (; e + 2 <= w; e += 2) {
      __m512 k0[NK], k1[NK];
      WidenKeyPair<T, NK>(kv, j0 + e, k0, k1);
      for (int g = 0; g < G; ++g) {
        const float* qg = q + g * d;
        __m512 a0 = _mm512_mul_ps(k0[0], _mm512_loadu_ps(qg)), a1 = _mm512_mul_ps(k1[0], _mm512_loadu_ps(qg));
        for (int k = 1; k < NK; ++k) {
          const __m512 qk = _mm512_loadu_ps(qg + 16 * k);
          a0 = _mm512_fmadd_ps(k0[k], qk, a0);
          a1 = _mm512_fmadd_ps(k1[k], qk, a1);
        }
        _mm512_store_ps(part + (g * 16 + e) * 16, a0);
        _mm512_store_ps(part + (g * 16 + e + 1) * 16, a1);
      }
    }
  }
  for (; e < w; ++e) {
    const uint8_t* row = kv.k + kv.row_bytes * (j0 + e);
    __m512 kr[NK];
    for (int k = 0; k < NK; ++k) kr[k] = Group16<T>(row, k);
    for (int g = 0; g < G; ++g) {
      const float* qg = q + g * d;
      __m512 acc = _mm512_mul_ps(kr[0], _mm512_loadu_ps(qg));
      for (int k = 1; k < NK; ++k) acc = _mm512_fmadd_ps(kr[k], _mm512_loadu_ps(qg + 16 * k), acc);
      _mm512_store_ps(part + (g * 16 + e) * 16, acc);
    }
  }
  FinishScores16(kv, j0, w, G, vscale, part, s, ld);
}


// og[0, d) = og * alpha + sum_e p[e] * vt[e] over e in [0, w): two sets of
// accumulators (even and odd entries) where the registers hold them.
template <int NK>
void AccumulatePv(const float* vt, int w, const float* p, float alpha, float* og) {
  constexpr int d = 16 * NK;
  constexpr bool kTwo = NK <= 8;
  __m512 acc[NK], acc2[NK];
  const __m512 a = _mm512_set1_ps(alpha);
  for (int k = 0; k < NK; ++k) acc[k] = _mm512_mul_ps(_mm512_loadu_ps(og + 16 * k), a), acc2[k] = _mm512_setzero_ps();
  int e = 0;
  if constexpr (kTwo) {
    for (; e + 2 <= w; e += 2) {
      const __m512 pe = _mm512_set1_ps(p[e]), pf = _mm512_set1_ps(p[e + 1]);
      for (int k = 0; k < NK; ++k) {
        acc[k] = _mm512_fmadd_ps(pe, _mm512_load_ps(vt + e * d + 16 * k), acc[k]);
        acc2[k] = _mm512_fmadd_ps(pf, _mm512_load_ps(vt + (e + 1) * d + 16 * k), acc2[k]);
      }
    }
  }
  for (; e < w; ++e) {
    const __m512 pe = _mm512_set1_ps(p[e]);
    for (int k = 0; k < NK; ++k) acc[k] = _mm512_fmadd_ps(pe, _mm512_load_ps(vt + e * d + 16 * k), acc[k]);
  }
  for (int k = 0; k < NK; ++k) _mm512_storeu_ps(og + 16 * k, _mm512_add_ps(acc[k], acc2[k]));
}

// P.V of a tile for GG query heads at once over the part [16 k0, 16 (k0 +
// NP)) of the values, widened in registers as they are read: each value
// row's part is loaded once for the GG heads and no widened copy is stored
// (the accumulators, GG x NP vectors, stay in registers). out[g] = out[g]
// alpha[g] + sum_e p[g][e] v[e], p[g] = s + g ld.
template <GgmlType T, int NK, int NP, int GG>
void AccumulatePvPart(const KvView& kv, int j0, int w, int k0, const float* s, int ld, const float* alpha,
                      float* out) {
  constexpr int d = 16 * NK;
  __m512 acc[GG][NP];
  for (int g = 0; g < GG; ++g) {
    const __m512 a = _mm512_set1_ps(alpha[g]);
    for (int k = 0; k < NP; ++k) acc[g][k] = _mm512_mul_ps(_mm512_loadu_ps(out + g * d + 16 * (k0 + k)), a);
  }
  for (int e = 0; e < w; ++e) {
    const uint8_t* row = kv.v + kv.row_bytes * (j0 + e);
    __m512 v[NP];
    for (int k = 0; k < NP; ++k) v[k] = Group16<T>(row, k0 + k);
    for (int g = 0; g < GG; ++g) {
      const __m512 p = _mm512_set1_ps(s[g * ld + e]);
      for (int k = 0; k < NP; ++k) acc[g][k] = _mm512_fmadd_ps(p, v[k], acc[g][k]);
    }
  }
  for (int g = 0; g < GG; ++g)
    for (int k = 0; k < NP; ++k) _mm512_storeu_ps(out + g * d + 16 * (k0 + k), acc[g][k]);
}

// P.V in registers for any G: the heads in groups of at most 8, each
// group's rows in parts whose accumulators fit (G = 7 at d = 64: all 7
// heads, the rows in two halves), so that every value is widened once for
// the group instead of once per group of 4 heads.
template <GgmlType T, int NK>
void PvInRegisterGroups(const KvView& kv, int j0, int w, int G, const float* s, int ld, const float* alpha,
                        float* out) {
  ForHeadGroups(G, 8, [&](int g0, int g1) {
    WithGroupSize<8>(g1 - g0, [&](auto gg) {
      // the accumulators in 16 of the 32 registers, the rest for values and weights
      constexpr int GG = decltype(gg)::value, NP = WidestPart(NK, GG, 1, 16);
      for (int k0 = 0; k0 < NK; k0 += NP)
        AccumulatePvPart<T, NK, NP, GG>(kv, j0, w, k0, s + g0 * ld, ld, alpha + g0, out + g0 * 16 * NK);
    });
  });
}


// The online softmax of one tile for one head: s [nv * 16] the tile's
// scores, turned into its weights against the new running max; alpha the
// factor for what came before. False when nothing so far has weight.
inline bool SoftmaxStep(float* s, int nv, float& m, float& l, float& alpha) {
  __m512 mx = _mm512_load_ps(s);
  for (int i = 1; i < nv; ++i) mx = _mm512_max_ps(mx, _mm512_load_ps(s + 16 * i));
  const float m_new = std::max(m, _mm512_reduce_max_ps(mx));
  alpha = 1.f;
  if (m_new == -INFINITY) return false;
  alpha = std::exp(m - m_new);  // 0 for the first tile with weight, 1 when the max held
  m = m_new;
  const __m512 vm = _mm512_set1_ps(m_new);
  __m512 sum = _mm512_setzero_ps();
  for (int i = 0; i < nv; ++i) {
    const __m512 e = expbz::Exp16(_mm512_sub_ps(_mm512_load_ps(s + 16 * i), vm));
    _mm512_store_ps(s + 16 * i, e);
    sum = _mm512_add_ps(sum, e);
  }
  l = l * alpha + _mm512_reduce_add_ps(sum);
  return true;
}

// One cache line asked into L1 (prefetcht0) by an asm statement:
// _mm_prefetch (__builtin_prefetch) has no result, and GCC 12 removed every
// one of them from the kernel below as dead code (the object had no
// prefetcht0 at all); a volatile asm statement is kept.
inline void PrefetchLine(const char* p) { asm volatile("prefetcht0 %0" : : "m"(*p)); }

// Keys and values of entries [j, j + 16) (those below n) asked into L1
// ahead of their use: issued while the 16 entries before them are scored,
// they arrive while that group is computed (docs/results/decode-prefetch.md).
inline void PrefetchRows(const KvView& kv, int j) {
  const int j1 = std::min(kv.n, j + 16);
  if (j >= j1) return;
  const size_t bytes = kv.row_bytes * static_cast<size_t>(j1 - j);
  const char* k = reinterpret_cast<const char*>(kv.k + kv.row_bytes * j);
  const char* v = reinterpret_cast<const char*>(kv.v + kv.row_bytes * j);
  for (size_t o = 0; o < bytes; o += 64) {  // a line each 64 bytes, and the last byte's line
    PrefetchLine(k + o);
    PrefetchLine(v + o);
  }
  PrefetchLine(k + bytes - 1);
  PrefetchLine(v + bytes - 1);
}

template <GgmlType T, int NK, bool kInt8>
void DecodeTiles(const KvView& kv, const float* q, int G, float scale, float* out, float* ml) {
  constexpr int d = 16 * NK, kT = TileEntries<NK>();
  alignas(64) float part[kMaxG16 * 16 * 16];
  alignas(64) float vt[kT * d];
  alignas(64) float s[kMaxG16 * kT];
  float m[kMaxG16], l[kMaxG16], alpha[kMaxG16];
  bool live[kMaxG16];
  std::fill(m, m + G, -INFINITY);
  std::fill(l, l + G, 0.f);
  std::fill(out, out + G * d, 0.f);
  const __m512 vscale = _mm512_set1_ps(scale);
#ifdef __AVX512VNNI__
  QueryInt8* qi = nullptr;
  if constexpr (kInt8) {
    qi = &ThreadQuery();
    QuantizeQuery<T>(q, G, d, *qi);
  }
#endif
  const bool prefetch = DecodePrefetch();
  if (prefetch) PrefetchRows(kv, 0);
  for (int j0 = 0; j0 < kv.n; j0 += kT) {
    const int w = std::min(kT, kv.n - j0), nv = (w + 15) / 16;
    for (int i = 0; i < nv; ++i) {
      if (prefetch) PrefetchRows(kv, j0 + 16 * i + 16);
#ifdef __AVX512VNNI__
      if constexpr (kInt8) {
        Scores16Int8<T, NK>(kv, j0 + 16 * i, std::min(16, w - 16 * i), *qi, G, vscale, part, s + 16 * i, kT);
        continue;
      }
#endif
      Scores16<T, NK>(kv, j0 + 16 * i, std::min(16, w - 16 * i), q, G, vscale, part, s + 16 * i, kT);
    }
    bool any = false, all = true;
    for (int g = 0; g < G; ++g) {
      live[g] = SoftmaxStep(s + g * kT, nv, m[g], l[g], alpha[g]);
      any = any || live[g];
      all = all && live[g];
    }
    if (!any) continue;
    if (all) {
#ifdef __AVX512VNNI__
      if constexpr (kInt8) {
        PvInt16Groups<T, NK>(kv, j0, w, G, s, kT, alpha, out);
        continue;
      }
#endif
      PvInRegisterGroups<T, NK>(kv, j0, w, G, s, kT, alpha, out);
      continue;
    }
    for (int e = 0; e < w; ++e) {
      const uint8_t* row = kv.v + kv.row_bytes * (j0 + e);
      for (int k = 0; k < NK; ++k) _mm512_store_ps(vt + e * d + 16 * k, Group16<T>(row, k));
    }
    for (int g = 0; g < G; ++g)
      if (live[g]) AccumulatePv<NK>(vt, w, s + g * kT, alpha[g], out + g * d);
  }
  for (int g = 0; g < G; ++g) {
    const float inv = l[g] > 0.f ? 1.f / l[g] : 0.f;  // all -inf: output 0, as AttendCausalMl
    for (int i = 0; i < d; ++i) out[g * d + i] *= inv;
    ml[2 * g] = m[g];
    ml[2 * g + 1] = l[g];
  }
}

template <GgmlType T>
bool DecodeOfType(const KvView& kv, const float* q, int G, float scale, float* out, float* ml) {
#ifdef __AVX512VNNI__
  if constexpr (T == GgmlType::Q8_0 || T == GgmlType::Q4_0) {
    switch (kv.d / 16) {
      case 4: DecodeTiles<T, 4, true>(kv, q, G, scale, out, ml); return true;
      case 8: DecodeTiles<T, 8, true>(kv, q, G, scale, out, ml); return true;
      case 16: DecodeTiles<T, 16, true>(kv, q, G, scale, out, ml); return true;
      default: break;
    }
  }
#endif
  switch (kv.d / 16) {
    case 2: DecodeTiles<T, 2, false>(kv, q, G, scale, out, ml); return true;
    case 4: DecodeTiles<T, 4, false>(kv, q, G, scale, out, ml); return true;
    case 6: DecodeTiles<T, 6, false>(kv, q, G, scale, out, ml); return true;
    case 8: DecodeTiles<T, 8, false>(kv, q, G, scale, out, ml); return true;
    case 16: DecodeTiles<T, 16, false>(kv, q, G, scale, out, ml); return true;
    default: return false;
  }
}

}  // namespace
#endif

bool DecodeQueryInt8(GgmlType type, int d) {
#if defined(KVTRIM_DECODE_AVX512) && defined(__AVX512VNNI__)
  // the head sizes DecodeOfType's int8 switch takes
  return DecodeAvx512Active() && (type == GgmlType::Q8_0 || type == GgmlType::Q4_0) &&
         (d == 64 || d == 128 || d == 256);
#else
  (void)type, (void)d;
  return false;
#endif
}

namespace {
std::atomic<bool>& PrefetchSetting() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("KVTRIM_DECODE_PREFETCH");
    return !(e && std::strcmp(e, "0") == 0);
  }()};
  return on;
}
}  // namespace

bool DecodePrefetch() { return PrefetchSetting().load(std::memory_order_relaxed); }

bool SetDecodePrefetch(bool on) { return PrefetchSetting().exchange(on, std::memory_order_relaxed); }

bool DecodeAvx512Active() {
#ifdef KVTRIM_DECODE_AVX512
  return !KernelPathForced() || ActiveKernelPath() == KernelPath::kAvx512;
#else
  return false;
#endif
}

bool DecodeChunkAvx512(const KvView& kv, const float* q, int G, float scale, float* out, float* ml) {
#ifdef KVTRIM_DECODE_AVX512
  if (kv.d % 32 != 0 || kv.d > 256 || G < 1 || G > kMaxG16 || (kv.k_tail && kv.tail0 < kv.n)) return false;
  switch (kv.type) {
    case GgmlType::F32: return DecodeOfType<GgmlType::F32>(kv, q, G, scale, out, ml);
    case GgmlType::F16: return DecodeOfType<GgmlType::F16>(kv, q, G, scale, out, ml);
    case GgmlType::Q8_0: return DecodeOfType<GgmlType::Q8_0>(kv, q, G, scale, out, ml);
    case GgmlType::Q4_0: return DecodeOfType<GgmlType::Q4_0>(kv, q, G, scale, out, ml);
    default: return false;
  }
#else
  (void)kv, (void)q, (void)G, (void)scale, (void)out, (void)ml;
  return false;
#endif
}

}  // namespace kvtrim::kernels
