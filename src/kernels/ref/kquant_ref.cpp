// Element-at-a-time references for the ggml block types Q4_1, Q5_0, Q5_1 and
// the K-quants Q2_K..Q6_K (QK_K = 256). Each function answers "what is element
// i of this block" straight from the layout (ggml's block_q4_K etc.), without
// the loop structure of the fast kernels, so tests compare two independent
// readings of the same bytes.
#include <cmath>
#include <cstring>

#include "kernels/ref/quant_ref.h"

namespace kvtrim::kernels::ref {
namespace {

double Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  int s = (h >> 15) & 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}
int Nibble(const uint8_t* q, int k, bool high) { return high ? q[k] >> 4 : q[k] & 0xF; }
int Bit(const uint8_t* bits, int k) { return (bits[k / 8] >> (k % 8)) & 1; }

// 32-element types: element i < 16 in the low nibble of qs[i], i >= 16 in the high nibble of qs[i-16].
double Q4_1At(const uint8_t* b, int i) { return Half(b) * Nibble(b + 4, i % 16, i >= 16) + Half(b + 2); }
double Q5_0At(const uint8_t* b, int i) {
  int q = Nibble(b + 6, i % 16, i >= 16) | (Bit(b + 2, i) << 4);
  return Half(b) * (q - 16);
}
double Q5_1At(const uint8_t* b, int i) {
  int q = Nibble(b + 8, i % 16, i >= 16) | (Bit(b + 4, i) << 4);
  return Half(b) * q + Half(b + 2);
}

// Q4_K/Q5_K: 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min packed in 12 bytes.
void ScaleMinK4(const uint8_t* s, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q2_K {scales[16], qs[64], d, dmin}: 16 sub-blocks of 16; 2-bit q; scale byte = 4-bit scale | 4-bit min.
double Q2_KAt(const uint8_t* b, int i) {
  int half = i / 128, j = (i % 128) / 32, l = i % 32;
  int q = (b[16 + half * 32 + l] >> (2 * j)) & 3;
  int sc = b[i / 16];
  return Half(b + 80) * (sc & 0xF) * q - Half(b + 82) * (sc >> 4);
}
// Q3_K {hmask[32], qs[64], scales[12], d}: 2 low bits in qs, the high bit in hmask (set = no -4);
// 16 signed 6-bit scales (value - 32): low 4 bits in bytes 0..7, high 2 bits in bytes 8..11.
double Q3_KAt(const uint8_t* b, int i) {
  int half = i / 128, j = (i % 128) / 32, l = i % 32;
  int q = (b[32 + half * 32 + l] >> (2 * j)) & 3;
  int hbit = (b[l] >> (half * 4 + j)) & 1;
  int k = i / 16;
  const uint8_t* s = b + 96;
  int lo = k < 8 ? s[k] & 0xF : s[k - 8] >> 4;
  int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
  int scale = (lo | (hi << 4)) - 32;
  return Half(b + 108) * scale * (q - (hbit ? 0 : 4));
}
// Q4_K {d, dmin, scales[12], qs[128]}: 64-element groups use 32 bytes, low nibbles then high.
double Q4_KAt(const uint8_t* b, int i) {
  int g = i / 64, w = i % 64, sc, mn;
  ScaleMinK4(b + 4, i / 32, &sc, &mn);
  int q = Nibble(b + 16 + g * 32, w % 32, w >= 32);
  return Half(b) * sc * q - Half(b + 2) * mn;
}
// Q5_K {d, dmin, scales[12], qh[32], qs[128]}: as Q4_K plus a fifth bit, bit (i/32) of qh[i%32].
double Q5_KAt(const uint8_t* b, int i) {
  int g = i / 64, w = i % 64, sc, mn;
  ScaleMinK4(b + 4, i / 32, &sc, &mn);
  int q = Nibble(b + 48 + g * 32, w % 32, w >= 32) | (((b[16 + i % 32] >> (i / 32)) & 1) << 4);
  return Half(b) * sc * q - Half(b + 2) * mn;
}
// Q6_K {ql[128], qh[64], scales[16] (int8), d}: per 128 elements 64 ql bytes and 32 qh bytes;
// quarter k of 32: ql byte l (+32 for odd k), low nibble for k < 2; qh bits 2k..2k+1; value - 32.
double Q6_KAt(const uint8_t* b, int i) {
  int half = i / 128, k = (i % 128) / 32, l = i % 32;
  int lo = Nibble(b + half * 64 + (k & 1) * 32, l, k >= 2);
  int hi = (b[128 + half * 32 + l] >> (2 * k)) & 3;
  int q = (lo | (hi << 4)) - 32;
  return Half(b + 208) * static_cast<int8_t>(b[192 + i / 16]) * q;
}

}  // namespace

bool DequantRowBlockTypes(GgmlType t, const void* row, float* out, int n) {
  double (*at)(const uint8_t*, int) = nullptr;
  switch (t) {
    case GgmlType::Q4_1: at = Q4_1At; break;
    case GgmlType::Q5_0: at = Q5_0At; break;
    case GgmlType::Q5_1: at = Q5_1At; break;
    case GgmlType::Q2_K: at = Q2_KAt; break;
    case GgmlType::Q3_K: at = Q3_KAt; break;
    case GgmlType::Q4_K: at = Q4_KAt; break;
    case GgmlType::Q5_K: at = Q5_KAt; break;
    case GgmlType::Q6_K: at = Q6_KAt; break;
    default: return false;
  }
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(t));
  const auto* p = static_cast<const uint8_t*>(row);
  const int be = static_cast<int>(tt->block_elems);
  for (int i = 0; i < n; ++i) out[i] = static_cast<float>(at(p + tt->block_bytes * (i / be), i % be));
  return true;
}

}  // namespace kvtrim::kernels::ref
