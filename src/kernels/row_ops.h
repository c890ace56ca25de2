// The row kernels of each stored type, in one table: dequantize a row (and
// a run of rows, with the type's dispatch hoisted out of the row loop), dot
// a row with a float vector, quantize floats into a row. DequantRow,
// DequantRows, DotRow, AxpyRow and QuantizeRow (quant.h) look the type up
// here once; a kernel that loops over many rows of one type takes the
// entry once itself.
#pragma once
#include <cstddef>
#include <cstdint>

#include "io/ggml_types.h"

namespace kvtrim::kernels {

struct RowOps {
  // out[0, n) = the row's n values.
  void (*dequant)(const uint8_t* row, float* out, int n);
  // n_rows rows, row_bytes apart, into out [n_rows, n].
  void (*dequant_rows)(const uint8_t* rows, size_t row_bytes, int n_rows, float* out, int n);
  // sum_i row[i] * x[i].
  float (*dot)(const uint8_t* row, const float* x, int n);
  // The row of n floats (ggml rounding); null for the types only read
  // (weights: Q4_1, Q5_x, the K-quants).
  void (*quantize)(const float* x, uint8_t* row, int n);
};

// The entry of type t: F32, F16, BF16, Q8_0, Q4_0 (vector paths in AVX2
// builds), Q4_1, Q5_0, Q5_1 and Q2_K..Q6_K (kquant.h, a block at a time);
// for any other type an entry that writes nothing and dots to 0.
const RowOps& RowOpsOf(GgmlType t);

}  // namespace kvtrim::kernels
