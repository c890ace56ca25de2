// Helpers shared by the AVX-512 decode kernel's files
// (attention_decode_avx512.cpp and the integer forms in
// attention_decode_avx512_int8.h): head groups, block scales, lane masks,
// tile sizes, the scores' lane sums. Only for files compiled for AVX-512
// (elsewhere they are empty): the kernel is chosen at run time by
// AttendChunk.
#pragma once

#include "kernels/intrinsics.h"  // <immintrin.h>, GCC 12's false positive silenced

#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/attention.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__F16C__)
#define KVTRIM_DECODE_AVX512 1
#endif

#ifdef KVTRIM_DECODE_AVX512
namespace kvtrim::kernels::decode512 {

constexpr int kMaxG16 = 16;     // query heads per KV head

// f(g0, g1) for the heads [0, G) in the fewest groups of at most per, their
// sizes differing by one at most (G = 7, per = 4: 3 + 4).
template <class F>
inline void ForHeadGroups(int G, int per, F&& f) {
  const int groups = (G + per - 1) / per;
  for (int i = 0; i < groups; ++i) f(i * G / groups, (i + 1) * G / groups);
}

// f(std::integral_constant<int, n>{}) for a group of n = 1..Max heads
// (Max <= 8): the size as a constant for the kernels that keep a group in
// registers.
template <int Max, class F>
inline void WithGroupSize(int n, F&& f) {
  static_assert(Max >= 1 && Max <= 8);
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (void)((n == I + 1 ? (f(std::integral_constant<int, I + 1>{}), true) : false) || ...);
  }(std::make_integer_sequence<int, Max>{});
}

inline float ScaleOf(const uint8_t* blk) {
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return _cvtsh_ss(h);
}

// The first w of 16 lanes (w >= 16: all).
inline __mmask16 FirstLanes(int w) { return static_cast<__mmask16>(w >= 16 ? 0xFFFF : (1u << w) - 1); }

// Entries a tile holds: 64 (d <= 64) down to 16 (d = 256), so that the
// tile's widened values stay 16 KB (L1) and the softmax's fixed cost (a
// max, an exp, a rescale per head) is paid once per 64 entries where it can.
template <int NK>
constexpr int TileEntries() {
  return NK <= 4 ? 64 : NK <= 8 ? 32 : 16;
}


// r[e] = sum of the 16 lanes of a[e] (a: 16 rows of 16 floats), for all e
// at once: pairs of rows added lane-interleaved, then quads, then 128-bit
// lanes (45 operations for 16 sums).
inline __m512 Reduce16(const float* a) {
  __m512 b[8], c[4];
  for (int i = 0; i < 8; ++i) {
    const __m512 x = _mm512_load_ps(a + 32 * i), y = _mm512_load_ps(a + 32 * i + 16);
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(x, y), _mm512_unpackhi_ps(x, y));  // per 128 bits: x, y, x, y
  }
  for (int j = 0; j < 4; ++j)  // per 128 bits: rows 4j .. 4j + 3
    c[j] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * j], b[2 * j + 1], 0x44), _mm512_shuffle_ps(b[2 * j], b[2 * j + 1], 0xEE));
  const __m512 d01 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x44), _mm512_shuffle_f32x4(c[0], c[1], 0xEE));
  const __m512 d23 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x44), _mm512_shuffle_f32x4(c[2], c[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d01, d23, 0x88), _mm512_shuffle_f32x4(d01, d23, 0xDD));
}

// From part [g][e][16] (the lane products of w entries with each query
// head) to s [g][16]: the lanes summed, times scale, plus the log-weights
// (entries from w on: -inf).
inline void FinishScores16(const KvView& kv, int j0, int w, int G, __m512 vscale, float* part, float* s, int ld) {
  for (int g = 0; g < G; ++g)
    for (int r = w; r < 16; ++r) _mm512_store_ps(part + (g * 16 + r) * 16, _mm512_setzero_ps());
  const __mmask16 valid = FirstLanes(w);
  const __m512 b = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), valid, kv.logw + j0);
  for (int g = 0; g < G; ++g) _mm512_store_ps(s + g * ld, _mm512_fmadd_ps(Reduce16(part + g * 256), vscale, b));
}

// The widest part of a row of n units (16-value vectors, 32-value blocks)
// whose accumulators, per_unit registers a unit for each of heads heads,
// fit regs registers: the largest divisor of n that fits, 1 at least
// (P.V's parts: G = 7 at d = 64 in halves).
constexpr int WidestPart(int n, int heads, int per_unit, int regs) {
  int part = n;
  while (part > 1 && (heads * per_unit * part > regs || n % part != 0)) --part;
  return part;
}

// Bytes of a q8_0 (f16 scale, 32 int8 codes) or q4_0 (f16 scale, 16 bytes
// of nibbles) block.
template <GgmlType T>
constexpr int BlockBytes() {
  return T == GgmlType::Q8_0 ? 34 : 18;
}

}  // namespace kvtrim::kernels::decode512
#endif
