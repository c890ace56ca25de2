// Plain scalar references for the row kernels (tests compare against these).
#pragma once
#include "io/ggml_types.h"

namespace kvtrim::kernels::ref {

void DequantRow(GgmlType t, const void* row, float* out, int n);
double DotRow(GgmlType t, const void* row, const float* x, int n);

}  // namespace kvtrim::kernels::ref
