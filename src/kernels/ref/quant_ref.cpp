#include "kernels/ref/quant_ref.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace kvtrim::kernels::ref {
namespace {

// Half to float by the IEEE definition, no intrinsics.
float Half(uint16_t h) {
  int s = (h >> 15) & 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0) v = std::ldexp(m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp(1024 + m, e - 25);
  return static_cast<float>(s ? -v : v);
}

uint16_t Load16(const uint8_t* p) { uint16_t h; std::memcpy(&h, p, 2); return h; }

}  // namespace

void DequantRow(GgmlType t, const void* row, float* out, int n) {
  if (DequantRowBlockTypes(t, row, out, n)) return;
  const auto* p = static_cast<const uint8_t*>(row);
  switch (t) {
    case GgmlType::F32: std::memcpy(out, p, sizeof(float) * n); return;
    case GgmlType::F16: for (int i = 0; i < n; ++i) out[i] = Half(Load16(p + 2 * i)); return;
    case GgmlType::BF16:
      for (int i = 0; i < n; ++i) {
        uint32_t u = uint32_t{Load16(p + 2 * i)} << 16;
        std::memcpy(&out[i], &u, 4);
      }
      return;
    case GgmlType::Q8_0:
      for (int b = 0; b * 32 < n; ++b) {
        const uint8_t* blk = p + 34 * b;
        float d = Half(Load16(blk));
        for (int j = 0; j < 32 && b * 32 + j < n; ++j) out[b * 32 + j] = d * static_cast<int8_t>(blk[2 + j]);
      }
      return;
    case GgmlType::Q4_0:
      for (int b = 0; b * 32 < n; ++b) {
        const uint8_t* blk = p + 18 * b;
        float d = Half(Load16(blk));
        for (int j = 0; j < 16; ++j) {
          int lo = (blk[2 + j] & 0xF) - 8, hi = (blk[2 + j] >> 4) - 8;
          if (b * 32 + j < n) out[b * 32 + j] = d * lo;
          if (b * 32 + j + 16 < n) out[b * 32 + j + 16] = d * hi;
        }
      }
      return;
    default: return;  // the other block types: DequantRowBlockTypes
  }
}

double DotRow(GgmlType t, const void* row, const float* x, int n) {
  std::vector<float> w(n);
  DequantRow(t, row, w.data(), n);
  double s = 0;
  for (int i = 0; i < n; ++i) s += double{w[i]} * x[i];
  return s;
}

}  // namespace kvtrim::kernels::ref
