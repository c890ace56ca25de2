#include "kernels/quant.h"

#include <algorithm>
#include "kernels/kquant.h"
#include <cmath>
#include <cstring>

#include "kernels/targets.h"
#if KVTRIM_BUILD_AVX2_F16C
#include "kernels/hsum.h"
#endif

namespace kvtrim::kernels {
namespace {

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
#endif

// Scalar value of element j of a quantized block (tails and padded rows).
inline float Q80At(const uint8_t* blk, int j) { return F16ToF32(Load16(blk)) * static_cast<int8_t>(blk[2 + j]); }
inline float Q40At(const uint8_t* blk, int j) {
  int q = j < 16 ? (blk[2 + j] & 0xF) : (blk[2 + j - 16] >> 4);
  return F16ToF32(Load16(blk)) * (q - 8);
}

// Q4_1/Q5_x/K-quant rows: one block at a time through a stack buffer (the
// weights stay in their stored blocks; only 256 floats are ever expanded).
void DequantBlockRow(GgmlType t, const uint8_t* p, float* out, int n) {
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(t));
  const int be = static_cast<int>(tt->block_elems);
  int i = 0;
  for (; i + be <= n; i += be, p += tt->block_bytes) DequantBlock(t, p, out + i);
  if (i < n) {
    float buf[kQKK];
    DequantBlock(t, p, buf);
    std::memcpy(out + i, buf, sizeof(float) * (n - i));
  }
}

float DotBlockRow(GgmlType t, const uint8_t* p, const float* x, int n) {
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(t));
  const int be = static_cast<int>(tt->block_elems), nb = n / be;
  float s = 0.f, buf[kQKK];
  int i = 0;
  if (DotBlocksAvx2(t, p, x, nb, &s)) {
    i = nb * be;
    p += nb * tt->block_bytes;
  }
  for (; i + be <= n; i += be, p += tt->block_bytes) {
    DequantBlock(t, p, buf);
    for (int j = 0; j < be; ++j) s += buf[j] * x[i + j];
  }
  if (i < n) {
    DequantBlock(t, p, buf);
    for (int j = 0; i + j < n; ++j) s += buf[j] * x[i + j];
  }
  return s;
}

}  // namespace

float F16ToF32(uint16_t h) {
#ifdef KVTRIM_BUILD_AVX2_F16C
  return _cvtsh_ss(h);
#else
  uint32_t s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
  if (e == 0) {
    if (m == 0) { u = s; }
    else { e = 127 - 15 + 1; while (!(m & 0x400)) { m <<= 1; --e; } m &= 0x3ff; u = s | (e << 23) | (m << 13); }
  } else if (e == 31) { u = s | 0x7f800000u | (m << 13); }
  else { u = s | ((e + 112) << 23) | (m << 13); }
  float f; std::memcpy(&f, &u, 4); return f;
#endif
}

uint16_t F32ToF16(float f) {
#ifdef KVTRIM_BUILD_AVX2_F16C
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
  uint32_t x; std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
  int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    int shift = 14 - exp;
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
#endif
}

float Bf16ToF32(uint16_t h) {
  uint32_t u = uint32_t{h} << 16;
  float f; std::memcpy(&f, &u, 4); return f;
}

size_t RowBytesPadded(GgmlType t, int n) {
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(t));
  size_t blocks = (static_cast<size_t>(n) + tt->block_elems - 1) / tt->block_elems;
  return blocks * tt->block_bytes;
}

#ifdef KVTRIM_BUILD_AVX2_F16C
namespace {
// One vector step of DequantRow and DequantRows: 8 f16 values, one Q8_0
// block (34 bytes), one Q4_0 block (18 bytes) into floats.
inline void F16x8Avx2(const uint8_t* p, float* out) {
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline void Q80BlockAvx2(const uint8_t* blk, float* out) {
  const __m256 d = _mm256_set1_ps(F16ToF32(Load16(blk)));
  for (int k = 0; k < 4; ++k) _mm256_storeu_ps(out + 8 * k, _mm256_mul_ps(d, I8x8(blk + 2 + 8 * k)));
}
inline void Q40BlockAvx2(const uint8_t* blk, float* out) {
  const __m256 d = _mm256_set1_ps(F16ToF32(Load16(blk)));
  const __m256i q = Q4Unpack(blk + 2);
  for (int k = 0; k < 4; ++k) _mm256_storeu_ps(out + 8 * k, _mm256_mul_ps(d, I8Lane(q, k)));
}
}  // namespace
#endif

void DequantRow(GgmlType t, const void* row, float* out, int n) {
  const auto* p = static_cast<const uint8_t*>(row);
  if (IsBlockType(t)) return DequantBlockRow(t, p, out, n);
  int done = 0;  // elements written by the vector paths
#ifdef KVTRIM_BUILD_AVX2_F16C
  switch (t) {
    case GgmlType::F16:
      for (; done + 8 <= n; done += 8) F16x8Avx2(p + 2 * done, out + done);
      break;
    case GgmlType::Q8_0:
      for (; done + kQK <= n; done += kQK) Q80BlockAvx2(p + 34 * (done / kQK), out + done);
      break;
    case GgmlType::Q4_0:
      for (; done + kQK <= n; done += kQK) Q40BlockAvx2(p + 18 * (done / kQK), out + done);
      break;
    default: break;
  }
#endif
  switch (t) {
    case GgmlType::F32: std::memcpy(out, p, sizeof(float) * n); return;
    case GgmlType::F16: for (int i = done; i < n; ++i) out[i] = F16ToF32(Load16(p + 2 * i)); return;
    case GgmlType::BF16: for (int i = 0; i < n; ++i) out[i] = Bf16ToF32(Load16(p + 2 * i)); return;
    case GgmlType::Q8_0:
      for (int b = done / kQK; b * kQK < n; ++b) {
        const uint8_t* blk = p + 34 * b;
        float d = F16ToF32(Load16(blk));
        int m = std::min(kQK, n - b * kQK);
        for (int j = 0; j < m; ++j) out[b * kQK + j] = d * static_cast<int8_t>(blk[2 + j]);
      }
      return;
    case GgmlType::Q4_0:
      for (int b = done / kQK; b * kQK < n; ++b) {
        const uint8_t* blk = p + 18 * b;
        int m = std::min(kQK, n - b * kQK);
        for (int j = 0; j < m; ++j) out[b * kQK + j] = Q40At(blk, j);
      }
      return;
    default: return;  // IsBlockType types: handled above
  }
}

void DequantRows(GgmlType t, const uint8_t* rows, size_t row_bytes, int n_rows, float* out, int n) {
#ifdef KVTRIM_BUILD_AVX2_F16C
  if (t == GgmlType::F16 && n % 8 == 0) {
    for (int r = 0; r < n_rows; ++r, rows += row_bytes, out += n)
      for (int i = 0; i < n; i += 8) F16x8Avx2(rows + 2 * i, out + i);
    return;
  }
  if (t == GgmlType::Q8_0 && n % kQK == 0) {
    for (int r = 0; r < n_rows; ++r, rows += row_bytes, out += n)
      for (int b = 0; b < n / kQK; ++b) Q80BlockAvx2(rows + 34 * b, out + b * kQK);
    return;
  }
  if (t == GgmlType::Q4_0 && n % kQK == 0) {
    for (int r = 0; r < n_rows; ++r, rows += row_bytes, out += n)
      for (int b = 0; b < n / kQK; ++b) Q40BlockAvx2(rows + 18 * b, out + b * kQK);
    return;
  }
#endif
  for (int r = 0; r < n_rows; ++r) DequantRow(t, rows + row_bytes * r, out + static_cast<size_t>(r) * n, n);
}

float DotRow(GgmlType t, const void* row, const float* x, int n) {
  const auto* p = static_cast<const uint8_t*>(row);
  if (IsBlockType(t)) return DotBlockRow(t, p, x, n);
  int i = 0;
  float s = 0.f;
#ifdef KVTRIM_BUILD_AVX2_F16C
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  switch (t) {
    case GgmlType::F32: {
      const float* w = reinterpret_cast<const float*>(p);
      for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
      }
      for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc0);
      s = Hsum8(_mm256_add_ps(acc0, acc1));
      for (; i < n; ++i) s += w[i] * x[i];
      return s;
    }
    case GgmlType::F16: {
      for (; i + 8 <= n; i += 8) {
        __m256 w = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
        acc0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + i), acc0);
      }
      s = Hsum8(acc0);
      for (; i < n; ++i) s += F16ToF32(Load16(p + 2 * i)) * x[i];
      return s;
    }
    case GgmlType::Q8_0: {
      int b = 0;
      for (; (b + 1) * kQK <= n; ++b) {
        const uint8_t* blk = p + 34 * b;
        const float* xb = x + b * kQK;
        __m256 bs = _mm256_mul_ps(I8x8(blk + 2), _mm256_loadu_ps(xb));
        bs = _mm256_fmadd_ps(I8x8(blk + 10), _mm256_loadu_ps(xb + 8), bs);
        bs = _mm256_fmadd_ps(I8x8(blk + 18), _mm256_loadu_ps(xb + 16), bs);
        bs = _mm256_fmadd_ps(I8x8(blk + 26), _mm256_loadu_ps(xb + 24), bs);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(F16ToF32(Load16(blk))), bs, acc0);
      }
      s = Hsum8(acc0);
      for (int j = b * kQK; j < n; ++j) s += Q80At(p + 34 * b, j - b * kQK) * x[j];
      return s;
    }
    case GgmlType::Q4_0: {
      int b = 0;
      for (; (b + 1) * kQK <= n; ++b) {
        const uint8_t* blk = p + 18 * b;
        const float* xb = x + b * kQK;
        __m256i q = Q4Unpack(blk + 2);
        __m256 bs = _mm256_mul_ps(I8Lane(q, 0), _mm256_loadu_ps(xb));
        bs = _mm256_fmadd_ps(I8Lane(q, 1), _mm256_loadu_ps(xb + 8), bs);
        bs = _mm256_fmadd_ps(I8Lane(q, 2), _mm256_loadu_ps(xb + 16), bs);
        bs = _mm256_fmadd_ps(I8Lane(q, 3), _mm256_loadu_ps(xb + 24), bs);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(F16ToF32(Load16(blk))), bs, acc0);
      }
      s = Hsum8(acc0);
      for (int j = b * kQK; j < n; ++j) s += Q40At(p + 18 * b, j - b * kQK) * x[j];
      return s;
    }
    default: break;
  }
#endif
  switch (t) {
    case GgmlType::F32: {
      const float* w = reinterpret_cast<const float*>(p);
      for (; i < n; ++i) s += w[i] * x[i];
      return s;
    }
    case GgmlType::F16: for (; i < n; ++i) s += F16ToF32(Load16(p + 2 * i)) * x[i]; return s;
    case GgmlType::BF16: for (; i < n; ++i) s += Bf16ToF32(Load16(p + 2 * i)) * x[i]; return s;
    case GgmlType::Q8_0: for (; i < n; ++i) s += Q80At(p + 34 * (i / kQK), i % kQK) * x[i]; return s;
    case GgmlType::Q4_0: for (; i < n; ++i) s += Q40At(p + 18 * (i / kQK), i % kQK) * x[i]; return s;
    default: return s;  // IsBlockType types: handled above
  }
  return s;
}

void AxpyRow(GgmlType t, const void* row, float a, float* y, int n) {
  if (t == GgmlType::F32) {
    const float* w = static_cast<const float*>(row);
    for (int i = 0; i < n; ++i) y[i] += a * w[i];  // auto-vectorized
    return;
  }
  float tmp[256];
  for (int off = 0; off < n; off += 256) {
    int m = std::min(256, n - off);
    // Rows of block types are split only at block boundaries (256 = 8 blocks).
    const auto* p = static_cast<const uint8_t*>(row) + RowBytesPadded(t, off);
    DequantRow(t, p, tmp, m);
    for (int i = 0; i < m; ++i) y[off + i] += a * tmp[i];
  }
}

void QuantizeRow(GgmlType t, const float* x, void* row, int n) {
  auto* p = static_cast<uint8_t*>(row);
  switch (t) {
    case GgmlType::F32: std::memcpy(p, x, sizeof(float) * n); return;
    case GgmlType::F16:
      for (int i = 0; i < n; ++i) { uint16_t h = F32ToF16(x[i]); std::memcpy(p + 2 * i, &h, 2); }
      return;
    case GgmlType::BF16:
      for (int i = 0; i < n; ++i) {
        uint32_t u; std::memcpy(&u, &x[i], 4);
        uint16_t h = static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return;
    case GgmlType::Q8_0:
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
      return;
    case GgmlType::Q4_0:
      for (int b = 0; b * kQK < n; ++b) {
        int m = std::min(kQK, n - b * kQK);
        float amax = 0.f, maxv = 0.f;  // ggml: scale from the signed value of largest magnitude
        for (int j = 0; j < m; ++j) {
          float v = x[b * kQK + j];
          if (std::fabs(v) > amax) { amax = std::fabs(v); maxv = v; }
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
      return;
    default: return;  // weight-only types (Q4_1, Q5_x, K-quants) are never written
  }
}

}  // namespace kvtrim::kernels
