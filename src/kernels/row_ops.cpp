// The per-type row kernels and their table (row_ops.h). Each type's
// functions hold its AVX2 loop (AVX2 + F16C builds) and the scalar loop
// that finishes the row or stands in for it elsewhere; every kernel has a
// scalar twin in kernels/ref/ that the tests hold it to.
#include "kernels/row_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kquant.h"
#include "kernels/quant.h"
#include "kernels/targets.h"
#if KVTRIM_BUILD_AVX2_F16C
#include "kernels/hsum.h"
#endif

namespace kvtrim::kernels {
namespace {
// The names below are common ones (DotF32, kF32): a namespace of their own
// keeps them apart from the files compiled in the same unity batch.
namespace rowops {

uint16_t Load16(const uint8_t* p) { uint16_t h; std::memcpy(&h, p, 2); return h; }

#ifdef KVTRIM_BUILD_AVX2_F16C
// 8 int8 -> 8 floats
inline __m256 I8x8(const uint8_t* p) {
  __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}
// 16 packed nibbles -> 32 int8 values minus 8: low nibbles first, then high.
inline __m256i Q4Unpack(const uint8_t* q) {
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0xF));
  __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0xF));
  __m256i v = _mm256_set_m128i(hi, lo);
  return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
}
inline __m256 I8Lane(__m256i v, int k) {  // k-th group of 8 int8 of a 32-byte vector
  __m128i h = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
  if (k & 1) h = _mm_srli_si128(h, 8);
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(h));
}
// One vector step of an f16 row's dequantization: 8 values into floats.
inline void F16x8Avx2(const uint8_t* p, float* out) {
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
#endif

// The 32-value block types the KV is stored in, Q8_0 (34 bytes: f16 scale,
// 32 int8 codes) and Q4_0 (18 bytes: f16 scale, value j in the low nibble of
// byte j, j + 16 in its high one, offset 8): a block's bytes, its element j
// (tails and padded rows), and (AVX2) its 32 codes as four vectors of 8
// floats, unscaled. Dequantization and the dot are written once for both.
template <GgmlType T>
struct Block32;
template <>
struct Block32<GgmlType::Q8_0> {
  static constexpr int kBytes = 34;
  static float At(const uint8_t* blk, int j) { return F16ToF32(Load16(blk)) * static_cast<int8_t>(blk[2 + j]); }
#ifdef KVTRIM_BUILD_AVX2_F16C
  static void Codes(const uint8_t* blk, __m256* c) {
    for (int k = 0; k < 4; ++k) c[k] = I8x8(blk + 2 + 8 * k);
  }
#endif
};
template <>
struct Block32<GgmlType::Q4_0> {
  static constexpr int kBytes = 18;
  static float At(const uint8_t* blk, int j) {
    int q = j < 16 ? (blk[2 + j] & 0xF) : (blk[2 + j - 16] >> 4);
    return F16ToF32(Load16(blk)) * (q - 8);
  }
#ifdef KVTRIM_BUILD_AVX2_F16C
  static void Codes(const uint8_t* blk, __m256* c) {
    const __m256i q = Q4Unpack(blk + 2);
    for (int k = 0; k < 4; ++k) c[k] = I8Lane(q, k);
  }
#endif
};

// ---- F32

void DequantF32(const uint8_t* p, float* out, int n) { std::memcpy(out, p, sizeof(float) * n); }

float DotF32(const uint8_t* p, const float* x, int n) {
  const float* w = reinterpret_cast<const float*>(p);
  int i = 0;
  float s = 0.f;
#ifdef KVTRIM_BUILD_AVX2_F16C
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc0);
  s = Hsum8(_mm256_add_ps(acc0, acc1));
#endif
  for (; i < n; ++i) s += w[i] * x[i];
  return s;
}

void QuantizeF32(const float* x, uint8_t* p, int n) { std::memcpy(p, x, sizeof(float) * n); }

// ---- F16

inline void DequantF16Inline(const uint8_t* p, float* out, int n) {
  int i = 0;
#ifdef KVTRIM_BUILD_AVX2_F16C
  for (; i + 8 <= n; i += 8) F16x8Avx2(p + 2 * i, out + i);
#endif
  for (; i < n; ++i) out[i] = F16ToF32(Load16(p + 2 * i));
}
void DequantF16(const uint8_t* p, float* out, int n) { DequantF16Inline(p, out, n); }

float DotF16(const uint8_t* p, const float* x, int n) {
  int i = 0;
  float s = 0.f;
#ifdef KVTRIM_BUILD_AVX2_F16C
  __m256 acc0 = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    __m256 w = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
    acc0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + i), acc0);
  }
  s = Hsum8(acc0);
#endif
  for (; i < n; ++i) s += F16ToF32(Load16(p + 2 * i)) * x[i];
  return s;
}

void QuantizeF16(const float* x, uint8_t* p, int n) {
  for (int i = 0; i < n; ++i) {
    uint16_t h = F32ToF16(x[i]);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

// ---- BF16

void DequantBf16(const uint8_t* p, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = Bf16ToF32(Load16(p + 2 * i));
}

float DotBf16(const uint8_t* p, const float* x, int n) {
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += Bf16ToF32(Load16(p + 2 * i)) * x[i];
  return s;
}

void QuantizeBf16(const float* x, uint8_t* p, int n) {
  for (int i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    uint16_t h = static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

// ---- Q8_0 and Q4_0: dequantization and the dot (Block32)

template <GgmlType T>
inline void DequantB32Inline(const uint8_t* p, float* out, int n) {
  using B = Block32<T>;
  int b = 0;
#ifdef KVTRIM_BUILD_AVX2_F16C
  for (; (b + 1) * kQK <= n; ++b) {
    const uint8_t* blk = p + B::kBytes * b;
    const __m256 d = _mm256_set1_ps(F16ToF32(Load16(blk)));
    __m256 c[4];
    B::Codes(blk, c);
    for (int k = 0; k < 4; ++k) _mm256_storeu_ps(out + b * kQK + 8 * k, _mm256_mul_ps(d, c[k]));
  }
#endif
  for (; b * kQK < n; ++b) {
    const uint8_t* blk = p + B::kBytes * b;
    int m = std::min(kQK, n - b * kQK);
    for (int j = 0; j < m; ++j) out[b * kQK + j] = B::At(blk, j);
  }
}
template <GgmlType T>
void DequantB32(const uint8_t* p, float* out, int n) { DequantB32Inline<T>(p, out, n); }

template <GgmlType T>
float DotB32(const uint8_t* p, const float* x, int n) {
  using B = Block32<T>;
#ifdef KVTRIM_BUILD_AVX2_F16C
  __m256 acc0 = _mm256_setzero_ps();
  int b = 0;
  for (; (b + 1) * kQK <= n; ++b) {
    const uint8_t* blk = p + B::kBytes * b;
    const float* xb = x + b * kQK;
    __m256 c[4];
    B::Codes(blk, c);
    __m256 bs = _mm256_mul_ps(c[0], _mm256_loadu_ps(xb));
    for (int k = 1; k < 4; ++k) bs = _mm256_fmadd_ps(c[k], _mm256_loadu_ps(xb + 8 * k), bs);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(F16ToF32(Load16(blk))), bs, acc0);
  }
  float s = Hsum8(acc0);
  for (int j = b * kQK; j < n; ++j) s += B::At(p + B::kBytes * b, j - b * kQK) * x[j];
  return s;
#else
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += B::At(p + B::kBytes * (i / kQK), i % kQK) * x[i];
  return s;
#endif
}

// ---- Q8_0 and Q4_0: quantization (ggml rounding)

void QuantizeQ80(const float* x, uint8_t* p, int n) {
  for (int b = 0; b * kQK < n; ++b) {
    int m = std::min(kQK, n - b * kQK);
    float amax = 0.f;
    for (int j = 0; j < m; ++j) amax = std::max(amax, std::fabs(x[b * kQK + j]));
    float d = amax / 127.f, id = d ? 1.f / d : 0.f;
    uint16_t h = F32ToF16(d);
    uint8_t* blk = p + 34 * b;
    std::memcpy(blk, &h, 2);
    for (int j = 0; j < kQK; ++j) {
      float v = j < m ? x[b * kQK + j] * id : 0.f;
      blk[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(v)));
    }
  }
}

void QuantizeQ40(const float* x, uint8_t* p, int n) {
  for (int b = 0; b * kQK < n; ++b) {
    int m = std::min(kQK, n - b * kQK);
    float amax = 0.f, maxv = 0.f;  // ggml: scale from the signed value of largest magnitude
    for (int j = 0; j < m; ++j) {
      float v = x[b * kQK + j];
      if (std::fabs(v) > amax) {
        amax = std::fabs(v);
        maxv = v;
      }
    }
    float d = maxv / -8.f, id = d ? 1.f / d : 0.f;
    uint16_t h = F32ToF16(d);
    uint8_t* blk = p + 18 * b;
    std::memcpy(blk, &h, 2);
    for (int j = 0; j < 16; ++j) {
      float v0 = j < m ? x[b * kQK + j] * id : 0.f;
      float v1 = j + 16 < m ? x[b * kQK + j + 16] * id : 0.f;
      int q0 = std::min(15, static_cast<int>(v0 + 8.5f)), q1 = std::min(15, static_cast<int>(v1 + 8.5f));
      blk[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// ---- Q4_1, Q5_x, K-quants (kquant.h): one block at a time through a stack
// buffer (the weights stay in their stored blocks; only 256 floats are ever
// expanded).

template <GgmlType T>
void DequantBlocks(const uint8_t* p, float* out, int n) {
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(T));
  const int be = static_cast<int>(tt->block_elems);
  int i = 0;
  for (; i + be <= n; i += be, p += tt->block_bytes) DequantBlock(T, p, out + i);
  if (i < n) {
    float buf[kQKK];
    DequantBlock(T, p, buf);
    std::memcpy(out + i, buf, sizeof(float) * (n - i));
  }
}

template <GgmlType T>
float DotBlocks(const uint8_t* p, const float* x, int n) {
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(T));
  const int be = static_cast<int>(tt->block_elems), nb = n / be;
  float s = 0.f, buf[kQKK];
  int i = 0;
  if (DotBlocksAvx2(T, p, x, nb, &s)) {
    i = nb * be;
    p += nb * tt->block_bytes;
  }
  for (; i + be <= n; i += be, p += tt->block_bytes) {
    DequantBlock(T, p, buf);
    for (int j = 0; j < be; ++j) s += buf[j] * x[i + j];
  }
  if (i < n) {
    DequantBlock(T, p, buf);
    for (int j = 0; i + j < n; ++j) s += buf[j] * x[i + j];
  }
  return s;
}

// ---- the table

// n_rows rows through the type's row function, inlined into the loop.
template <void (*Dequant)(const uint8_t*, float*, int)>
void DequantRowsOf(const uint8_t* rows, size_t row_bytes, int n_rows, float* out, int n) {
  for (int r = 0; r < n_rows; ++r, rows += row_bytes, out += n) Dequant(rows, out, n);
}

void DequantNone(const uint8_t*, float*, int) {}
float DotNone(const uint8_t*, const float*, int) { return 0.f; }

template <GgmlType T>
constexpr RowOps BlockOps() {
  return {DequantBlocks<T>, DequantRowsOf<DequantBlocks<T>>, DotBlocks<T>, nullptr};
}

constexpr RowOps kF32{DequantF32, DequantRowsOf<DequantF32>, DotF32, QuantizeF32};
constexpr RowOps kF16{DequantF16, DequantRowsOf<DequantF16Inline>, DotF16, QuantizeF16};
constexpr RowOps kBf16{DequantBf16, DequantRowsOf<DequantBf16>, DotBf16, QuantizeBf16};
constexpr RowOps kQ80{DequantB32<GgmlType::Q8_0>, DequantRowsOf<DequantB32Inline<GgmlType::Q8_0>>,
                      DotB32<GgmlType::Q8_0>, QuantizeQ80};
constexpr RowOps kQ40{DequantB32<GgmlType::Q4_0>, DequantRowsOf<DequantB32Inline<GgmlType::Q4_0>>,
                      DotB32<GgmlType::Q4_0>, QuantizeQ40};
constexpr RowOps kQ41 = BlockOps<GgmlType::Q4_1>(), kQ50 = BlockOps<GgmlType::Q5_0>(),
                 kQ51 = BlockOps<GgmlType::Q5_1>(), kQ2K = BlockOps<GgmlType::Q2_K>(),
                 kQ3K = BlockOps<GgmlType::Q3_K>(), kQ4K = BlockOps<GgmlType::Q4_K>(),
                 kQ5K = BlockOps<GgmlType::Q5_K>(), kQ6K = BlockOps<GgmlType::Q6_K>();
constexpr RowOps kNone{DequantNone, DequantRowsOf<DequantNone>, DotNone, nullptr};

}  // namespace rowops
}  // namespace

const RowOps& RowOpsOf(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return rowops::kF32;
    case GgmlType::F16: return rowops::kF16;
    case GgmlType::BF16: return rowops::kBf16;
    case GgmlType::Q8_0: return rowops::kQ80;
    case GgmlType::Q4_0: return rowops::kQ40;
    case GgmlType::Q4_1: return rowops::kQ41;
    case GgmlType::Q5_0: return rowops::kQ50;
    case GgmlType::Q5_1: return rowops::kQ51;
    case GgmlType::Q2_K: return rowops::kQ2K;
    case GgmlType::Q3_K: return rowops::kQ3K;
    case GgmlType::Q4_K: return rowops::kQ4K;
    case GgmlType::Q5_K: return rowops::kQ5K;
    case GgmlType::Q6_K: return rowops::kQ6K;
    default: return rowops::kNone;
  }
}

}  // namespace kvtrim::kernels
