// The AVX-512 decode kernel's integer forms for q8_0 and q4_0 entries
// (AVX512-VNNI): the query quantized per block, the scores in int8
// products (vpdpbusd), P.V in int16 products (vpdpwssd). Included by
// attention_decode_avx512.cpp only; empty in builds without VNNI.
#pragma once

#include "kernels/attention_decode_avx512_common.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"

#if defined(KVTRIM_DECODE_AVX512) && defined(__AVX512VNNI__)
namespace kvtrim::kernels::decode512 {

// The query heads quantized per block of 32 as a q8_0 row (llama.cpp's CPU
// flash attention does the same), for integer products with q8_0 / q4_0
// keys: for each head and each 64-value group z, the codes, the offset that
// makes the key's codes unsigned (vpdpbusd multiplies unsigned by signed
// bytes: key codes + 128 for q8_0, the stored nibbles, code + 8, for q4_0)
// subtracted back per lane, and the two blocks' query scales as lanes 0-7
// and 8-15 (d = 64: per block instead, block_corr and block_scale, the
// form Int8ScoresTransposed reads; the other fields are left unwritten).
struct QueryInt8 {
  alignas(64) int8_t codes[kMaxG16][256];
  alignas(64) int32_t corr[kMaxG16][4][16];
  alignas(64) float qscale[kMaxG16][4][16];
  int32_t block_corr[kMaxG16][8];  // per block of 32: -offset x the sum of its codes
  float block_scale[kMaxG16][8];
};

// The calling thread's quantized query: one for every instantiation of
// the kernel (a thread_local inside the template would be one per type and
// head size, each in every thread's static TLS).
inline QueryInt8& ThreadQuery() {
  thread_local QueryInt8 q;
  return q;
}

// Whether the int8 scores of head size d take the entries in the lanes
// (Int8ScoresTransposed, one 64-value group) or the values
// (Scores16Int8's general form): the query is quantized for that form.
constexpr bool Int8EntriesInLanes(int d) { return d == 64; }

template <GgmlType T>
void QuantizeQuery(const float* q, int G, int d, QueryInt8& Q) {
  constexpr int offset = T == GgmlType::Q8_0 ? 128 : 8;
  for (int g = 0; g < G; ++g)
    for (int b = 0; b < d / 32; ++b) {
      const float* x = q + g * d + 32 * b;
      float amax = 0.f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float dq = amax / 127.f, inv = dq > 0.f ? 1.f / dq : 0.f;
      int8_t* c = Q.codes[g] + 32 * b;
      for (int i = 0; i < 32; ++i) c[i] = static_cast<int8_t>(std::clamp<long>(std::lrint(x[i] * inv), -127, 127));
      if (Int8EntriesInLanes(d)) {  // per block
        int block_sum = 0;
        for (int i = 0; i < 32; ++i) block_sum += c[i];
        Q.block_corr[g][b] = -offset * block_sum;
        Q.block_scale[g][b] = dq;
        continue;
      }
      for (int lane = 0; lane < 8; ++lane) {  // Scores16Int8's: per lane of a 64-value group
        const int sum = c[4 * lane] + c[4 * lane + 1] + c[4 * lane + 2] + c[4 * lane + 3];
        Q.corr[g][b / 2][8 * (b % 2) + lane] = -offset * sum;
        Q.qscale[g][b / 2][8 * (b % 2) + lane] = dq;
      }
    }
}


// The unsigned codes of blocks 2z and 2z + 1 of a key row (64 bytes): q8_0
// in value order; q4_0 as the nibbles come, [block 2z's values 0-15, 2z +
// 1's 0-15, 2z's 16-31, 2z + 1's 16-31] (KeyDword says where each value
// is).
template <GgmlType T>
inline __m512i KeyCodesU8Split(const uint8_t* row, int z) {
  const uint8_t* b0 = row + BlockBytes<T>() * 2 * z;
  const uint8_t* b1 = b0 + BlockBytes<T>();
  if constexpr (T == GgmlType::Q8_0) {
    const __m512i c = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2))),
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1 + 2)), 1);
    return _mm512_xor_si512(c, _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m256i x = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + 2))),
                                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + 2)), 1);
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(x, m), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);  // [lo0 lo1 | hi0 hi1]
  }
}

// The dword of KeyCodesU8Split's vector that holds values [4t, 4t + 4) of
// its 64 (t < 16): q4_0's [lo0 lo1 | hi0 hi1] order.
template <GgmlType T>
constexpr int KeyDword(int t) {
  if constexpr (T == GgmlType::Q8_0) return t;
  return t < 4 || t >= 12 ? t : t < 8 ? t + 4 : t - 4;
}

// The unsigned codes of blocks 2z and 2z + 1 of a key row in value order.
template <GgmlType T>
inline __m512i KeyCodesU8(const uint8_t* row, int z) {
  const __m512i c = KeyCodesU8Split<T>(row, z);
  if constexpr (T == GgmlType::Q8_0) return c;
  return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 4, 5, 2, 3, 6, 7), c);  // [lo0 hi0 lo1 hi1]
}

// KeyCodesU8 and the two blocks' scales as lanes 0-7 and 8-15.
template <GgmlType T>
inline __m512i CodesU8(const uint8_t* row, int z, __m512& scales) {
  const uint8_t* b0 = row + BlockBytes<T>() * 2 * z;
  scales = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(ScaleOf(b0))),
                              _mm256_set1_ps(ScaleOf(b0 + BlockBytes<T>())), 1);
  return KeyCodesU8<T>(row, z);
}

// x[16] (16 rows of 16 dwords) transposed: afterwards x[t] holds dword t of
// every row, row e in lane e (unpacks within 128-bit lanes, then 128-bit
// lane shuffles: 64 operations).
inline void Transpose16x16(__m512i* x) {
  __m512i a[16], b[16];
  for (int i = 0; i < 16; i += 2) {  // lane L: rows i, i + 1 at dwords 4L, 4L + 1 (lo) and 4L + 2, 4L + 3 (hi)
    a[i] = _mm512_unpacklo_epi32(x[i], x[i + 1]);
    a[i + 1] = _mm512_unpackhi_epi32(x[i], x[i + 1]);
  }
  for (int q = 0; q < 4; ++q) {  // b[4q + c], lane L: rows 4q .. 4q + 3 at dword 4L + c
    b[4 * q + 0] = _mm512_unpacklo_epi64(a[4 * q], a[4 * q + 2]);
    b[4 * q + 1] = _mm512_unpackhi_epi64(a[4 * q], a[4 * q + 2]);
    b[4 * q + 2] = _mm512_unpacklo_epi64(a[4 * q + 1], a[4 * q + 3]);
    b[4 * q + 3] = _mm512_unpackhi_epi64(a[4 * q + 1], a[4 * q + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44), v1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xEE);
    const __m512i w0 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44), w1 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xEE);
    x[c] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    x[4 + c] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
    x[8 + c] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    x[12 + c] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
  }
}

// The scales of block b of the w stored rows from base on (row_bytes apart)
// as 16 floats (lanes from w on: 0): one gather.
template <GgmlType T>
inline __m512 BlockScales16(const uint8_t* base, size_t row_bytes, __mmask16 valid, int b) {
  const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32(static_cast<int>(row_bytes)));
  const __m512i x = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, at, base + BlockBytes<T>() * b, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(x));  // the low half of each word: the scale
}

// Scores16Int8 at d = 64 with the entries in the lanes: the 16 keys' codes
// transposed once (dword t of every key in one vector), then per head 16
// vpdpbusd with the query's dword t broadcast, one sum per entry and block
// and no reduction across lanes; per entry and head about 1 vpdpbusd and a
// share of the transpose, where the lanes-as-values form took a vpdpbusd,
// a convert, two multiplies, a store and a 16-vector reduction tree.
template <GgmlType T>
void Int8ScoresTransposed(const KvView& kv, int j0, int w, const QueryInt8& Q, int G, __m512 vscale, float* s,
                          int ld) {
  __m512i x[16];
  for (int e = 0; e < 16; ++e) x[e] = e < w ? KeyCodesU8Split<T>(kv.k + kv.row_bytes * (j0 + e), 0) : _mm512_setzero_si512();
  Transpose16x16(x);
  const __mmask16 valid = FirstLanes(w);
  const uint8_t* rows = kv.k + kv.row_bytes * j0;
  const __m512 ks0 = _mm512_mul_ps(BlockScales16<T>(rows, kv.row_bytes, valid, 0), vscale);
  const __m512 ks1 = _mm512_mul_ps(BlockScales16<T>(rows, kv.row_bytes, valid, 1), vscale);
  const __m512 logw = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), valid, kv.logw + j0);
  for (int g = 0; g < G; ++g) {
    int32_t qd[16];
    std::memcpy(qd, Q.codes[g], 64);
    // two chains a block (even and odd dwords): exact integer sums either way
    __m512i a0 = _mm512_set1_epi32(Q.block_corr[g][0]), a1 = _mm512_setzero_si512();
    __m512i b0 = _mm512_set1_epi32(Q.block_corr[g][1]), b1 = _mm512_setzero_si512();
    for (int t = 0; t < 8; t += 2) {  // the query's dword t: values [4t, 4t + 4)
      a0 = _mm512_dpbusd_epi32(a0, x[KeyDword<T>(t)], _mm512_set1_epi32(qd[t]));
      a1 = _mm512_dpbusd_epi32(a1, x[KeyDword<T>(t + 1)], _mm512_set1_epi32(qd[t + 1]));
      b0 = _mm512_dpbusd_epi32(b0, x[KeyDword<T>(8 + t)], _mm512_set1_epi32(qd[8 + t]));
      b1 = _mm512_dpbusd_epi32(b1, x[KeyDword<T>(9 + t)], _mm512_set1_epi32(qd[9 + t]));
    }
    const __m512 s0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)),
                                    _mm512_mul_ps(ks0, _mm512_set1_ps(Q.block_scale[g][0])));
    const __m512 s1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(b0, b1)),
                                      _mm512_mul_ps(ks1, _mm512_set1_ps(Q.block_scale[g][1])), s0);
    _mm512_store_ps(s + g * ld, _mm512_add_ps(s1, logw));
  }
}

// Scores16's integer form for q8_0 / q4_0 keys: per head and 64-value
// group, one vpdpbusd of the key's unsigned codes with the query's codes,
// the lanes scaled by both blocks' scales.
template <GgmlType T, int NK>
void Scores16Int8(const KvView& kv, int j0, int w, const QueryInt8& Q, int G, __m512 vscale, float* part, float* s,
                  int ld) {
  constexpr int NZ = NK / 4;  // 64-value groups (NK a multiple of 4)
  if constexpr (Int8EntriesInLanes(16 * NK)) return Int8ScoresTransposed<T>(kv, j0, w, Q, G, vscale, s, ld);
  for (int e = 0; e < w; ++e) {
    const uint8_t* row = kv.k + kv.row_bytes * (j0 + e);
    __m512i c[NZ];
    __m512 sc[NZ];
    for (int z = 0; z < NZ; ++z) c[z] = CodesU8<T>(row, z, sc[z]);
    for (int g = 0; g < G; ++g) {
      __m512 acc = _mm512_setzero_ps();
      for (int z = 0; z < NZ; ++z) {
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_load_si512(Q.corr[g][z]), c[z], _mm512_load_si512(Q.codes[g] + 64 * z));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(sc[z], _mm512_load_ps(Q.qscale[g][z])), acc);
      }
      _mm512_store_ps(part + (g * 16 + e) * 16, acc);
    }
  }
  FinishScores16(kv, j0, w, G, vscale, part, s, ld);
}

// P.V on q8_0 / q4_0 values in integer products (vpdpwssd): a tile's
// weights p[g][e] times the values' block scales, quantized per head and
// block to int16 (unit = the tile's largest / 32767, rounded to nearest:
// each weight off by at most half a unit, 1.5e-5 of the tile's largest),
// two entries' codes interleaved as int16 pairs, one vpdpwssd adding both
// entries' products for 16 values of a head into int32 lanes; the tile's
// int32 sums turned into f32 once, times the unit. Per entry and 16
// values: half a widening (two entries share one) and G / 2 vpdpwssd, where
// the float form took a sign extension, a convert and a scaling per entry
// and G FMAs.
template <int NK>
struct PvWeights16 {
  static constexpr int kT = TileEntries<NK>(), NB = NK / 2;  // entries, blocks of 32 values
  alignas(64) int16_t q[kMaxG16][NB][kT];
  float unit[kMaxG16][NB];
  int32_t sum[kMaxG16][NB];  // of q, for q4_0 (its codes are read as stored, + 8)
};

// W from the tile's weights (s [g][ld], entries from w on 0) and the value
// rows' scales.
template <GgmlType T, int NK>
void QuantizePvWeights(const KvView& kv, int j0, int w, int G, const float* s, int ld, PvWeights16<NK>& W) {
  constexpr int NB = PvWeights16<NK>::NB;
  const int nv = (w + 15) / 16;
  __m512 sv[PvWeights16<NK>::kT / 16][NB];
  for (int i = 0; i < nv; ++i)
    for (int b = 0; b < NB; ++b)
      sv[i][b] = BlockScales16<T>(kv.v + kv.row_bytes * (j0 + 16 * i), kv.row_bytes, FirstLanes(w - 16 * i), b);
  for (int g = 0; g < G; ++g)
    for (int b = 0; b < NB; ++b) {
      __m512 x[PvWeights16<NK>::kT / 16], mx = _mm512_setzero_ps();
      for (int i = 0; i < nv; ++i) {  // q4_0's scales may be negative
        x[i] = _mm512_mul_ps(_mm512_load_ps(s + g * ld + 16 * i), sv[i][b]);
        mx = _mm512_max_ps(mx, _mm512_abs_ps(x[i]));
      }
      const float wmax = _mm512_reduce_max_ps(mx);
      W.unit[g][b] = wmax / 32767.f;
      const __m512 f = _mm512_set1_ps(wmax > 0.f ? 32767.f / wmax : 0.f);
      __m512i sum = _mm512_setzero_si512();
      for (int i = 0; i < nv; ++i) {
        const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(x[i], f));
        if constexpr (T == GgmlType::Q4_0) sum = _mm512_add_epi32(sum, qi);
        _mm256_store_si256(reinterpret_cast<__m256i*>(&W.q[g][b][16 * i]), _mm512_cvtepi32_epi16(qi));
      }
      if constexpr (T == GgmlType::Q4_0) W.sum[g][b] = _mm512_reduce_add_epi32(sum);
    }
}

// Block b of value rows r0 and r1 as int16 pairs (r0's code, r1's code) a
// value. q8_0: lo holds values 0-7 and 16-23 of the block, hi 8-15 and
// 24-31 (the bytes interleaved within 128-bit lanes); q4_0: lo values 0-15,
// hi 16-31, the codes as stored (code + 8): the bytes interleaved first,
// each pair's low nibbles (values 0-15) and high ones (16-31) taken from
// the widened words.
template <GgmlType T>
inline void CodePairs(const uint8_t* r0, const uint8_t* r1, int b, __m512i* lo, __m512i* hi) {
  const uint8_t* c0 = r0 + BlockBytes<T>() * b + 2;
  const uint8_t* c1 = r1 + BlockBytes<T>() * b + 2;
  if constexpr (T == GgmlType::Q8_0) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c0));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c1));
    *lo = _mm512_cvtepi8_epi16(_mm256_unpacklo_epi8(a, c));
    *hi = _mm512_cvtepi8_epi16(_mm256_unpackhi_epi8(a, c));
  } else {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c0));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c1));
    const __m512i x = _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(a, c), _mm_unpacklo_epi8(a, c)));
    *lo = _mm512_and_si512(x, _mm512_set1_epi16(0x0F));
    *hi = _mm512_srli_epi16(x, 4);
  }
}

// The integer P.V of a tile over blocks [b0, b0 + PB) for GG heads: out[g]
// = out[g] alpha[g] + unit sum_e q[g][e] codes[e].
template <GgmlType T, int NK, int PB, int GG>
void AccumulatePvInt16Part(const KvView& kv, int j0, int w, int b0, const PvWeights16<NK>& W, int g0,
                           const float* alpha, float* out) {
  constexpr int d = 16 * NK;
  __m512i acc[GG][PB][2];
  for (int g = 0; g < GG; ++g)
    for (int b = 0; b < PB; ++b) acc[g][b][0] = acc[g][b][1] = _mm512_setzero_si512();
  for (int e = 0; e < w; e += 2) {  // an odd last entry pairs with itself, its partner's weight 0
    const uint8_t* r0 = kv.v + kv.row_bytes * (j0 + e);
    const uint8_t* r1 = e + 1 < w ? r0 + kv.row_bytes : r0;
    for (int b = 0; b < PB; ++b) {
      __m512i lo, hi;
      CodePairs<T>(r0, r1, b0 + b, &lo, &hi);
      for (int g = 0; g < GG; ++g) {
        int32_t pair;
        std::memcpy(&pair, &W.q[g0 + g][b0 + b][e], 4);
        const __m512i wp = _mm512_set1_epi32(pair);
        acc[g][b][0] = _mm512_dpwssd_epi32(acc[g][b][0], lo, wp);
        acc[g][b][1] = _mm512_dpwssd_epi32(acc[g][b][1], hi, wp);
      }
    }
  }
  for (int g = 0; g < GG; ++g)
    for (int b = 0; b < PB; ++b) {
      const __m512 u = _mm512_set1_ps(W.unit[g0 + g][b0 + b]), a = _mm512_set1_ps(alpha[g]);
      if constexpr (T == GgmlType::Q4_0) {  // the codes' + 8 taken back: 8 x the weights' sum
        const __m512i off = _mm512_set1_epi32(8 * W.sum[g0 + g][b0 + b]);
        acc[g][b][0] = _mm512_sub_epi32(acc[g][b][0], off), acc[g][b][1] = _mm512_sub_epi32(acc[g][b][1], off);
      }
      __m512 lo = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[g][b][0]), u);
      __m512 hi = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[g][b][1]), u);
      if constexpr (T == GgmlType::Q8_0) {  // to values 0-15 and 16-31
        const __m512 x = _mm512_shuffle_f32x4(lo, hi, 0x44), y = _mm512_shuffle_f32x4(lo, hi, 0xEE);
        lo = x, hi = y;
      }
      float* o = out + (g0 + g) * d + 32 * (b0 + b);
      _mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_loadu_ps(o), a, lo));
      _mm512_storeu_ps(o + 16, _mm512_fmadd_ps(_mm512_loadu_ps(o + 16), a, hi));
    }
}

// PvInRegisterGroups' integer form for q8_0 / q4_0 values.
template <GgmlType T, int NK>
void PvInt16Groups(const KvView& kv, int j0, int w, int G, const float* s, int ld, const float* alpha, float* out) {
  PvWeights16<NK> W;
  QuantizePvWeights<T, NK>(kv, j0, w, G, s, ld, W);
  ForHeadGroups(G, 8, [&](int g0, int g1) {
    WithGroupSize<8>(g1 - g0, [&](auto gg) {
      // two int32 accumulators a block, in 24 of the 32 registers
      constexpr int GG = decltype(gg)::value, NB = PvWeights16<NK>::NB, PB = WidestPart(NB, GG, 2, 24);
      for (int b0 = 0; b0 < NB; b0 += PB)
        AccumulatePvInt16Part<T, NK, PB, GG>(kv, j0, w, b0, W, g0, alpha + g0, out);
    });
  });
}

}  // namespace kvtrim::kernels::decode512
#endif
