// Scalar float64 reference of the integer weight products (kernels/qgemm.h).
#pragma once
#include <cstdint>

#include "io/ggml_types.h"

namespace kvtrim::kernels::ref {

// sum_b d_w(b) d_x(b) sum_j q_w(b, j) q_x(b, j) over nb blocks of a Q8_0/Q4_0
// row, element by element from the block layout, in double.
double QDotRow(GgmlType t, const void* row, const int16_t* xq, const float* xd, int nb);

}  // namespace kvtrim::kernels::ref
