// Plain scalar references for the row kernels (tests compare against these).
#pragma once
#include "io/ggml_types.h"

namespace kvtrim::kernels::ref {

void DequantRow(GgmlType t, const void* row, float* out, int n);
// Q4_1, Q5_0, Q5_1, Q2_K..Q6_K element by element (kquant_ref.cpp); false for other types.
bool DequantRowBlockTypes(GgmlType t, const void* row, float* out, int n);
double DotRow(GgmlType t, const void* row, const float* x, int n);

}  // namespace kvtrim::kernels::ref
