#include "kernels/ref/qgemm_ref.h"

#include <cstring>

#include "kernels/quant.h"

namespace kvtrim::kernels::ref {

double QDotRow(GgmlType t, const void* row, const int16_t* xq, const float* xd, int nb) {
  const auto* p = static_cast<const uint8_t*>(row);
  const bool q4 = t == GgmlType::Q4_0;
  const size_t bb = q4 ? 18 : 34;
  double s = 0;
  for (int b = 0; b < nb; ++b) {
    const uint8_t* blk = p + bb * b;
    uint16_t h;
    std::memcpy(&h, blk, 2);
    int64_t acc = 0;
    for (int j = 0; j < 32; ++j) {
      const int w = q4 ? (j < 16 ? (blk[2 + j] & 0xF) : (blk[2 + j - 16] >> 4)) - 8 : static_cast<int8_t>(blk[2 + j]);
      acc += static_cast<int64_t>(w) * xq[b * 32 + j];
    }
    s += static_cast<double>(F16ToF32(h)) * static_cast<double>(xd[b]) * static_cast<double>(acc);
  }
  return s;
}

}  // namespace kvtrim::kernels::ref
