// Weight-matrix products: matrix-vector on the stored (possibly quantized)
// rows for decode; matrix-matrix through Eigen's GEMM for prefill.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "io/ggml_types.h"
#include "kernels/thread_pool.h"

namespace kvtrim::kernels {

struct PackedWeights;  // qgemm_packed.h

// A row-major weight matrix [rows, cols] of any supported ggml type.
struct WeightView {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  int rows = 0;
  int cols = 0;
  // The load-time repack of Q8_0/Q4_0 rows (qgemm_packed.h) the prefill
  // products use where set; owned by whoever built it (model::Weights).
  const PackedWeights* packed = nullptr;
  size_t row_bytes() const { return RowBytes(type, static_cast<size_t>(cols)); }
  size_t bytes() const { return row_bytes() * static_cast<size_t>(rows); }
  const uint8_t* row(int r) const { return data + row_bytes() * static_cast<size_t>(r); }
};

// y[rows] = W x[cols]
void MatVec(ThreadPool& pool, const WeightView& w, const float* x, float* y);
// Y[T, rows] = X[T, cols] W^T. Q8_0/Q4_0 views with a repacked copy
// (w.packed) through the row-lane integer kernels of qgemm_packed.h at every
// T (faster everywhere, measured); without one, batches below 32 tokens
// through the integer kernels of qgemm.h, other block types at T == 1 through
// their int16-activation dots; F32 through Eigen; larger batches of the other
// types dequantize bounded row blocks for Eigen's GEMM (faster there, measured).
void MatMul(ThreadPool& pool, const WeightView& w, const float* x, int T, float* y);
// One product of MatMulShared: Y[T, w.rows] = X W^T into y.
struct SharedProduct {
  const WeightView* w = nullptr;
  float* y = nullptr;
};
// Several products of the same input X[T, cols] (a layer's Q, K and V; its
// FFN gate and up): where every view has a repack with the same cols, the
// activations are quantized once and the pool splits all the matrices' row
// tiles in one fork, so a decode step pays one fork and one join instead of
// one per matrix (K and V of a small model are a few microseconds of work
// a thread, about what a fork costs). Each y equals MatMul's, bit for bit;
// otherwise the products run one MatMul each.
void MatMulShared(ThreadPool& pool, std::initializer_list<SharedProduct> products, const float* x, int T);
// C[M, N] = A[M, K] B[N, K]^T (+ beta C), plain single-threaded float GEMM.
void GemmABt(int M, int N, int K, const float* a, int lda, const float* b, int ldb, float* c, int ldc,
             float beta = 0.f);
// C[M, N] = A[M, K] B[K, N]
void GemmAB(int M, int N, int K, const float* a, int lda, const float* b, int ldb, float* c, int ldc);

}  // namespace kvtrim::kernels
