// The row kernels' public entry points (quant.h): the half-float
// conversions, row sizes, and DequantRow / DequantRows / DotRow / AxpyRow /
// QuantizeRow through the per-type table of row_ops.h.
#include "kernels/quant.h"

#include <algorithm>
#include <cstring>

#include "kernels/row_ops.h"
#include "kernels/targets.h"

namespace kvtrim::kernels {

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

void DequantRow(GgmlType t, const void* row, float* out, int n) {
  RowOpsOf(t).dequant(static_cast<const uint8_t*>(row), out, n);
}

void DequantRows(GgmlType t, const uint8_t* rows, size_t row_bytes, int n_rows, float* out, int n) {
  RowOpsOf(t).dequant_rows(rows, row_bytes, n_rows, out, n);
}

float DotRow(GgmlType t, const void* row, const float* x, int n) {
  return RowOpsOf(t).dot(static_cast<const uint8_t*>(row), x, n);
}

void AxpyRow(GgmlType t, const void* row, float a, float* y, int n) {
  if (t == GgmlType::F32) {
    const float* w = static_cast<const float*>(row);
    for (int i = 0; i < n; ++i) y[i] += a * w[i];  // auto-vectorized
    return;
  }
  const RowOps& ops = RowOpsOf(t);
  float tmp[256];
  for (int off = 0; off < n; off += 256) {
    int m = std::min(256, n - off);
    // Rows of block types are split only at block boundaries (256 = 8 blocks).
    ops.dequant(static_cast<const uint8_t*>(row) + RowBytesPadded(t, off), tmp, m);
    for (int i = 0; i < m; ++i) y[off + i] += a * tmp[i];
  }
}

void QuantizeRow(GgmlType t, const float* x, void* row, int n) {
  const RowOps& ops = RowOpsOf(t);
  if (ops.quantize) ops.quantize(x, static_cast<uint8_t*>(row), n);  // weight-only types are never written
}

}  // namespace kvtrim::kernels
