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
