// Row kernels over ggml block formats: dequantize, dot with a float vector,
// axpy, quantize, each looking the type up once in the per-type table
// (row_ops.h, where the kernels are). Every kernel has a scalar twin in
// kernels/ref/ used by tests.
#pragma once
#include <cstddef>
#include <cstdint>

#include "io/ggml_types.h"

namespace kvtrim::kernels {

float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);
float Bf16ToF32(uint16_t h);

// Rows hold n elements of type t (n a multiple of the type's block size,
// except that Q8_0/Q4_0 rows shorter than one block are stored as one padded
// block: see RowBytesPadded).
size_t RowBytesPadded(GgmlType t, int n);

void DequantRow(GgmlType t, const void* row, float* out, int n);
// n_rows consecutive rows (row_bytes apart) into out [n_rows, n]: DequantRow
// per row, with the type's dispatch hoisted out of the row loop (a tile of
// KV entries: kernels/attention_decode.cpp).
void DequantRows(GgmlType t, const uint8_t* rows, size_t row_bytes, int n_rows, float* out, int n);
float DotRow(GgmlType t, const void* row, const float* x, int n);
// y += a * row
void AxpyRow(GgmlType t, const void* row, float a, float* y, int n);
// Quantize n floats into a row of type t (F32, F16, Q8_0, Q4_0; ggml rounding).
// Other types are read-only (weights): the call writes nothing.
void QuantizeRow(GgmlType t, const float* x, void* row, int n);

}  // namespace kvtrim::kernels
