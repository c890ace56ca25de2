#include "kernels/kquant.h"

#include <cstring>

#include "kernels/quant.h"

namespace kvtrim::kernels {
namespace {

float H(const uint8_t* p) { uint16_t h; std::memcpy(&h, p, 2); return F16ToF32(h); }

// 32-element blocks: low nibbles are elements 0..15, high nibbles 16..31.
void Q41(const uint8_t* b, float* y) {
  const float d = H(b), m = H(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * (b[4 + j] & 0xF) + m;
    y[j + 16] = d * (b[4 + j] >> 4) + m;
  }
}
void Q5x(const uint8_t* b, float* y, bool with_min) {
  const float d = H(b), m = with_min ? H(b + 2) : 0.f;
  const int off = with_min ? 4 : 2, bias = with_min ? 0 : 16;
  uint32_t qh;
  std::memcpy(&qh, b + off, 4);
  const uint8_t* qs = b + off + 4;
  for (int j = 0; j < 16; ++j) {
    int lo = (qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4);
    int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
    y[j] = d * (lo - bias) + m;
    y[j + 16] = d * (hi - bias) + m;
  }
}
void Q2K(const uint8_t* b, float* y) {
  const uint8_t* sc = b;
  const float d = H(b + 80), dmin = H(b + 82);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b + 16 + 32 * half;
    for (int j = 0; j < 4; ++j) {
      for (int s = 0; s < 2; ++s, ++sc, y += 16) {
        const float dl = d * (*sc & 0xF), ml = dmin * (*sc >> 4);
        for (int l = 0; l < 16; ++l) y[l] = dl * ((q[16 * s + l] >> (2 * j)) & 3) - ml;
      }
    }
  }
}
void Q3K(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* s = b + 96;
  const float d = H(b + 108);
  int8_t scale[16];
  for (int k = 0; k < 16; ++k) {
    int lo = k < 8 ? s[k] & 0xF : s[k - 8] >> 4;
    scale[k] = static_cast<int8_t>((lo | (((s[8 + (k & 3)] >> (2 * (k >> 2))) & 3) << 4)) - 32);
  }
  int k = 0;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b + 32 + 32 * half;
    for (int j = 0; j < 4; ++j) {
      const uint8_t mask = static_cast<uint8_t>(1u << (4 * half + j));
      for (int p = 0; p < 2; ++p, ++k, y += 16) {
        const float dl = d * scale[k];
        for (int l = 0; l < 16; ++l) {
          const int i = 16 * p + l;
          y[l] = dl * (((q[i] >> (2 * j)) & 3) - ((hm[i] & mask) ? 0 : 4));
        }
      }
    }
  }
}
void ScaleMin(const uint8_t* s, int j, float d, float dmin, float* dl, float* ml) {
  int sc, mn;
  if (j < 4) { sc = s[j] & 63; mn = s[j + 4] & 63; }
  else { sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4); mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4); }
  *dl = d * sc;
  *ml = dmin * mn;
}
// Q4_K (qh == nullptr) and Q5_K.
void Q45K(const uint8_t* b, float* y, const uint8_t* qh, const uint8_t* qs) {
  const float d = H(b), dmin = H(b + 2);
  for (int g = 0; g < 4; ++g, qs += 32) {
    float d1, m1, d2, m2;
    ScaleMin(b + 4, 2 * g, d, dmin, &d1, &m1);
    ScaleMin(b + 4, 2 * g + 1, d, dmin, &d2, &m2);
    for (int l = 0; l < 32; ++l) {
      int h1 = qh ? ((qh[l] >> (2 * g)) & 1) << 4 : 0, h2 = qh ? ((qh[l] >> (2 * g + 1)) & 1) << 4 : 0;
      y[64 * g + l] = d1 * ((qs[l] & 0xF) | h1) - m1;
      y[64 * g + 32 + l] = d2 * ((qs[l] >> 4) | h2) - m2;
    }
  }
}
void Q6K(const uint8_t* b, float* y) {
  const float d = H(b + 208);
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  for (int half = 0; half < 2; ++half, y += 128, sc += 8) {
    const uint8_t* ql = b + 64 * half;
    const uint8_t* qh = b + 128 + 32 * half;
    for (int l = 0; l < 32; ++l) {
      const int s = l / 16;
      y[l] = d * sc[s] * (((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
      y[l + 32] = d * sc[s + 2] * (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      y[l + 64] = d * sc[s + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      y[l + 96] = d * sc[s + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

}  // namespace

bool IsBlockType(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q2_K:
    case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: return true;
    default: return false;
  }
}

void DequantBlock(GgmlType t, const uint8_t* blk, float* out) {
  switch (t) {
    case GgmlType::Q4_1: Q41(blk, out); return;
    case GgmlType::Q5_0: Q5x(blk, out, false); return;
    case GgmlType::Q5_1: Q5x(blk, out, true); return;
    case GgmlType::Q2_K: Q2K(blk, out); return;
    case GgmlType::Q3_K: Q3K(blk, out); return;
    case GgmlType::Q4_K: Q45K(blk, out, nullptr, blk + 16); return;
    case GgmlType::Q5_K: Q45K(blk, out, blk + 16, blk + 48); return;
    case GgmlType::Q6_K: Q6K(blk, out); return;
    default: return;
  }
}

}  // namespace kvtrim::kernels

#if defined(__AVX2__) && defined(__FMA__)
#include "kernels/intrinsics.h"

#include "kernels/hsum.h"

namespace kvtrim::kernels {
namespace {

// f16 scale at p, converted inline (F16C) rather than through quant.cpp's
// F16ToF32 (a call per block; exact either way).
inline float Hv(const uint8_t* p) {
#ifdef __F16C__
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
#else
  return H(p);
#endif
}

// 8 consecutive int8 codes of a 32-byte vector (group k of 4) as floats.
inline __m256 Lane(__m256i v, int k) {
  __m128i h = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
  if (k & 1) h = _mm_srli_si128(h, 8);
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(h));
}
inline __m256i Load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i Bits(__m256i v, int shift, int mask) {  // (byte >> shift) & mask, per byte
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}
// 32 bits -> 32 bytes, 0x10 where the bit is set (the fifth bit of Q5 codes).
inline __m256i FifthBits(uint32_t x) {
  const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i sel = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), shuf), sel);
  return _mm256_and_si256(_mm256_cmpeq_epi8(b, sel), _mm256_set1_epi8(0x10));
}
// Sum of q*x over 16 codes (lanes 2h, 2h+1 of q) as a vector.
inline __m256 Dot16(__m256i q, int h, const float* x) {
  return _mm256_fmadd_ps(Lane(q, 2 * h + 1), _mm256_loadu_ps(x + 8), _mm256_mul_ps(Lane(q, 2 * h), _mm256_loadu_ps(x)));
}
inline __m256 Sum16(const float* x) { return _mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)); }
// acc += sa * (q.x over elements 0..15) + sb * (elements 16..31)
inline __m256 Acc32(__m256 acc, __m256i q, const float* x, float sa, float sb) {
  acc = _mm256_fmadd_ps(_mm256_set1_ps(sa), Dot16(q, 0, x), acc);
  return _mm256_fmadd_ps(_mm256_set1_ps(sb), Dot16(q, 1, x + 16), acc);
}
// acc -= ma * sum(x[0..15]) + mb * sum(x[16..31])
inline __m256 Min32(__m256 acc, const float* x, float ma, float mb) {
  acc = _mm256_fnmadd_ps(_mm256_set1_ps(ma), Sum16(x), acc);
  return _mm256_fnmadd_ps(_mm256_set1_ps(mb), Sum16(x + 16), acc);
}

// The block decoders below hand each group of 32 codes (int8, |code| <= 32)
// to a sink with its scales: value = sa * code - ma for elements 0..15 and
// sb * code - mb for 16..31. The float sink dots them with float x (decode
// before issue 16, prefill-free paths), the int8 sink with Q8 activations.
template <class Sink>
void Q4_1Or5Codes(const uint8_t* b, GgmlType t, Sink& sink) {
  const float d = Hv(b), m = t == GgmlType::Q5_0 ? 0.f : Hv(b + 2);
  const uint8_t* qs = b + (t == GgmlType::Q4_1 ? 4 : t == GgmlType::Q5_0 ? 6 : 8);
  __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0xF)), _mm_and_si128(raw, _mm_set1_epi8(0xF)));
  if (t != GgmlType::Q4_1) {
    uint32_t qh;
    std::memcpy(&qh, b + (t == GgmlType::Q5_0 ? 2 : 4), 4);
    q = _mm256_or_si256(q, FifthBits(qh));
    if (t == GgmlType::Q5_0) q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
  }
  sink(q, d, d, -m, -m);
}
template <class Sink>
void Q2KCodes(const uint8_t* b, Sink& sink) {
  const float d = Hv(b + 80), dmin = Hv(b + 82);
  for (int half = 0; half < 2; ++half) {
    const __m256i q = Load32(b + 16 + 32 * half);
    for (int j = 0; j < 4; ++j) {
      const uint8_t sa = b[8 * half + 2 * j], sb = b[8 * half + 2 * j + 1];
      sink(Bits(q, 2 * j, 3), d * (sa & 0xF), d * (sb & 0xF), dmin * (sa >> 4), dmin * (sb >> 4));
    }
  }
}
template <class Sink>
void Q3KCodes(const uint8_t* b, Sink& sink) {
  const float d = Hv(b + 108);
  const uint8_t* s = b + 96;
  float scale[16];
  for (int k = 0; k < 16; ++k) {
    int lo = k < 8 ? s[k] & 0xF : s[k - 8] >> 4;
    scale[k] = d * ((lo | (((s[8 + (k & 3)] >> (2 * (k >> 2))) & 3) << 4)) - 32);
  }
  const __m256i hm = Load32(b);
  for (int half = 0; half < 2; ++half) {
    const __m256i q = Load32(b + 32 + 32 * half);
    for (int j = 0; j < 4; ++j) {
      __m256i minus4 = _mm256_slli_epi16(_mm256_xor_si256(Bits(hm, 4 * half + j, 1), _mm256_set1_epi8(1)), 2);
      __m256i code = _mm256_sub_epi8(Bits(q, 2 * j, 3), minus4);
      sink(code, scale[8 * half + 2 * j], scale[8 * half + 2 * j + 1], 0.f, 0.f);
    }
  }
}
// Q4_K (qh == nullptr) and Q5_K.
template <class Sink>
void Q45KCodes(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, Sink& sink) {
  const float d = Hv(b), dmin = Hv(b + 2);
  const __m256i h = qh ? Load32(qh) : _mm256_setzero_si256();
  for (int g = 0; g < 4; ++g, qs += 32) {
    float d1, m1, d2, m2;
    ScaleMin(b + 4, 2 * g, d, dmin, &d1, &m1);
    ScaleMin(b + 4, 2 * g + 1, d, dmin, &d2, &m2);
    const __m256i raw = Load32(qs);
    __m256i lo = Bits(raw, 0, 0xF), hi = Bits(raw, 4, 0xF);
    if (qh) {
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(Bits(h, 2 * g, 1), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(Bits(h, 2 * g + 1, 1), 4));
    }
    sink(lo, d1, d1, m1, m1);
    sink(hi, d2, d2, m2, m2);
  }
}
template <class Sink>
void Q6KCodes(const uint8_t* b, Sink& sink) {
  const float d = Hv(b + 208);
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const __m256i m32 = _mm256_set1_epi8(32);
  for (int half = 0; half < 2; ++half, sc += 8) {
    const __m256i ql0 = Load32(b + 64 * half), ql1 = Load32(b + 64 * half + 32), qh = Load32(b + 128 + 32 * half);
    for (int k = 0; k < 4; ++k) {
      __m256i nib = Bits(k & 1 ? ql1 : ql0, k < 2 ? 0 : 4, 0xF);
      __m256i code = _mm256_sub_epi8(_mm256_or_si256(nib, _mm256_slli_epi16(Bits(qh, 2 * k, 3), 4)), m32);
      sink(code, d * sc[2 * k], d * sc[2 * k + 1], 0.f, 0.f);
    }
  }
}

template <class Sink>
bool VisitBlocks(GgmlType t, const uint8_t* p, int nblocks, Sink& sink) {
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(t));
  for (int i = 0; i < nblocks; ++i, p += tt->block_bytes) {
    switch (t) {
      case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: Q4_1Or5Codes(p, t, sink); break;
      case GgmlType::Q2_K: Q2KCodes(p, sink); break;
      case GgmlType::Q3_K: Q3KCodes(p, sink); break;
      case GgmlType::Q4_K: Q45KCodes(p, nullptr, p + 16, sink); break;
      case GgmlType::Q5_K: Q45KCodes(p, p + 16, p + 48, sink); break;
      case GgmlType::Q6_K: Q6KCodes(p, sink); break;
      default: return false;
    }
  }
  return true;
}

// ---- Whole-row tiles for Q4_K and Q6_K decode (int16 activations): per
// 256-element super-block, each sub-block's codes times the activations as
// exact int32 sums (madd_epi16), the 8 sums of a row reduced into one vector
// (Reduce8), and the sub-block scales, mins and activation scales applied as
// vectors of 8 (no per-group scalar work, no dequantized copy).

// s[k] (8 int32 partial sums of sub-block k) -> lane k = total of s[k].
inline __m256i Reduce8(const __m256i* s) {
  const __m256i q0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
  const __m256i q1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}
inline __m256i LoadX(const int16_t* x) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)); }
// The 8 six-bit scales (bytes 0..7) and mins (8..15) of a Q4_K/Q5_K block's 12 scale bytes.
inline void Unpack6(const uint8_t* s, uint32_t u[4]) {
  std::memcpy(u, s, 12);
  u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
  const uint32_t mins_lo = u[1] & 0x3f3f3f3f;
  u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
  u[2] = mins_lo;
  u[0] &= 0x3f3f3f3f;
}
inline __m256 U8x8(const void* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// RM rows of Q4_K (144 bytes per super-block) against one token.
template <int RM>
void Q4KRows(const uint8_t* const* w, int nsb, const int16_t* xq, const float* xd, const int32_t* xs, float* y) {
  __m256 accd[RM], accm[RM];
  for (int i = 0; i < RM; ++i) accd[i] = accm[i] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi16(0xF);
  for (int sb = 0; sb < nsb; ++sb, xq += 256, xd += 8, xs += 16) {
    const __m256 dx = _mm256_loadu_ps(xd);
    // activation sums per sub-block of 32 (both halves), scaled by d_x
    const __m256i hs = _mm256_permute4x64_epi64(
        _mm256_hadd_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs)),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs + 8))), 0xD8);
    const __m256 mx = _mm256_mul_ps(dx, _mm256_cvtepi32_ps(hs));
    for (int i = 0; i < RM; ++i) {
      const uint8_t* b = w[i] + 144 * static_cast<size_t>(sb);
      __m256i s[8];
      for (int g = 0; g < 4; ++g) {
        // 16 bytes zero-extended to int16 hold both nibbles: v & 15 are the
        // low-nibble codes (sub-block 2g), v >> 4 the high ones (2g + 1).
        const __m256i v0 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 + 32 * g)));
        const __m256i v1 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 32 + 32 * g)));
        const int16_t* x = xq + 64 * g;
        s[2 * g] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_and_si256(v0, m4), LoadX(x)),
                                    _mm256_madd_epi16(_mm256_and_si256(v1, m4), LoadX(x + 16)));
        s[2 * g + 1] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_srli_epi16(v0, 4), LoadX(x + 32)),
                                        _mm256_madd_epi16(_mm256_srli_epi16(v1, 4), LoadX(x + 48)));
      }
      uint32_t u[4];
      Unpack6(b + 4, u);
      const __m256 prod = _mm256_mul_ps(_mm256_cvtepi32_ps(Reduce8(s)), dx);
      accd[i] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(Hv(b)), U8x8(u)), prod, accd[i]);
      accm[i] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(Hv(b + 2)), U8x8(u + 2)), mx, accm[i]);
    }
  }
  for (int i = 0; i < RM; ++i) y[i] = Hsum8(_mm256_sub_ps(accd[i], accm[i]));
}

// RM rows of Q6_K (210 bytes per super-block: ql[128], qh[64], int8 scales[16]
// per 16 elements, f16 d) against one token.
template <int RM>
void Q6KRows(const uint8_t* const* w, int nsb, const int16_t* xq, const float* xd, float* y) {
  __m256 acc[RM];
  for (int i = 0; i < RM; ++i) acc[i] = _mm256_setzero_ps();
  const __m256i m32 = _mm256_set1_epi8(32);
  const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  for (int sb = 0; sb < nsb; ++sb, xq += 256, xd += 8) {
    // d_x per sub-block of 16: each group's scale twice
    const __m256 dx[2] = {_mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(xd)), dup),
                          _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(xd + 4)), dup)};
    for (int i = 0; i < RM; ++i) {
      const uint8_t* b = w[i] + 210 * static_cast<size_t>(sb);
      const __m256 d = _mm256_set1_ps(Hv(b + 208));
      for (int half = 0; half < 2; ++half) {
        const __m256i ql0 = Load32(b + 64 * half), ql1 = Load32(b + 64 * half + 32), qh = Load32(b + 128 + 32 * half);
        const int16_t* x = xq + 128 * half;
        __m256i s[8];
        for (int k = 0; k < 4; ++k) {
          const __m256i nib = Bits(k & 1 ? ql1 : ql0, k < 2 ? 0 : 4, 0xF);
          const __m256i code = _mm256_sub_epi8(_mm256_or_si256(nib, _mm256_slli_epi16(Bits(qh, 2 * k, 3), 4)), m32);
          s[2 * k] = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(code)), LoadX(x + 32 * k));
          s[2 * k + 1] = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(code, 1)), LoadX(x + 32 * k + 16));
        }
        const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 192 + 8 * half))));
        acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(d, sc), _mm256_mul_ps(_mm256_cvtepi32_ps(Reduce8(s)), dx[half]), acc[i]);
      }
    }
  }
  for (int i = 0; i < RM; ++i) y[i] = Hsum8(acc[i]);
}

template <int RM>
void KRows(GgmlType t, const uint8_t* const* w, int nsb, const int16_t* xq, const float* xd, const int32_t* xs, float* y) {
  if (t == GgmlType::Q4_K) Q4KRows<RM>(w, nsb, xq, xd, xs, y);
  else Q6KRows<RM>(w, nsb, xq, xd, y);
}

}  // namespace

bool GemvKQ16Avx2(GgmlType t, const uint8_t* w, size_t row_bytes, int nsb, const int16_t* xq, const float* xd,
                  const int32_t* xs, int r0, int r1, float* y) {
  if (t != GgmlType::Q4_K && t != GgmlType::Q6_K) return false;
  constexpr int kRows = 4;
  int r = r0;
  for (; r + kRows <= r1; r += kRows) {
    const uint8_t* rows[kRows];
    for (int i = 0; i < kRows; ++i) rows[i] = w + row_bytes * static_cast<size_t>(r + i);
    KRows<kRows>(t, rows, nsb, xq, xd, xs, y + r);
  }
  for (; r < r1; ++r) {
    const uint8_t* row = w + row_bytes * static_cast<size_t>(r);
    KRows<1>(t, &row, nsb, xq, xd, xs, y + r);
  }
  return true;
}

bool DotBlocksAvx2(GgmlType t, const uint8_t* p, const float* x, int nblocks, float* out) {
  __m256 acc = _mm256_setzero_ps();
  auto sink = [&](__m256i code, float sa, float sb, float ma, float mb) {
    acc = Acc32(acc, code, x, sa, sb);
    if (ma != 0.f || mb != 0.f) acc = Min32(acc, x, ma, mb);
    x += 32;
  };
  if (!VisitBlocks(t, p, nblocks, sink)) return false;
  *out = Hsum8(acc);
  return true;
}

bool HaveDotBlocksQ16() { return true; }

bool DotBlocksQ16Avx2(GgmlType t, const uint8_t* p, const int16_t* xq, const float* xd, const int32_t* xs,
                      int nblocks, float* out) {
  // Four accumulators (half block x group parity) and two min sums, so the
  // loop is not bound by the latency of one FMA chain.
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  float mins[2] = {0.f, 0.f};
  int k = 0;
  auto sink = [&](__m256i code, float sa, float sb, float ma, float mb) {
    const float dx = *xd++;
    // int16 codes x int16 activations, 8 int32 lanes per half of the group
    const __m256i p0 = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(code)),
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)));
    const __m256i p1 = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(code, 1)),
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 16)));
    acc[2 * k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(sa * dx), acc[2 * k]);
    acc[2 * k + 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(sb * dx), acc[2 * k + 1]);
    mins[k] += dx * (ma * static_cast<float>(xs[0]) + mb * static_cast<float>(xs[1]));
    k ^= 1;
    xq += 32;
    xs += 2;
  };
  if (!VisitBlocks(t, p, nblocks, sink)) return false;
  *out = Hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))) - (mins[0] + mins[1]);
  return true;
}

}  // namespace kvtrim::kernels
#else
namespace kvtrim::kernels {
bool DotBlocksAvx2(GgmlType, const uint8_t*, const float*, int, float*) { return false; }
bool HaveDotBlocksQ16() { return false; }
bool DotBlocksQ16Avx2(GgmlType, const uint8_t*, const int16_t*, const float*, const int32_t*, int, float*) { return false; }
bool GemvKQ16Avx2(GgmlType, const uint8_t*, size_t, int, const int16_t*, const float*, const int32_t*, int, int, float*) {
  return false;
}
}  // namespace kvtrim::kernels
#endif
