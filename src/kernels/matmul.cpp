#include "kernels/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "kernels/quant.h"

extern "C" void openblas_set_num_threads(int);

namespace kvtrim::kernels {

void SetBlasThreads(int n) { openblas_set_num_threads(std::max(1, n)); }

void MatVec(ThreadPool& pool, const WeightView& w, const float* x, float* y) {
  // Small matrices stay on one thread: the fork/join would cost more than the work.
  int64_t grain = std::max<int64_t>(1, 32768 / std::max(1, w.cols));
  pool.ParallelFor(w.rows, [&](int64_t r0, int64_t r1) {
    const size_t rb = w.row_bytes();
    for (int64_t r = r0; r < r1; ++r) y[r] = DotRow(w.type, w.data + rb * r, x, w.cols);
  }, grain);
}

void GemmABt(int M, int N, int K, const float* a, int lda, const float* b, int ldb, float* c, int ldc,
             float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.f, a, lda, b, ldb, beta, c, ldc);
}

void GemmAB(int M, int N, int K, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.f, a, lda, b, ldb, 0.f, c, ldc);
}

void MatMul(ThreadPool& pool, const WeightView& w, const float* x, int T, float* y) {
  if (T == 1) {
    MatVec(pool, w, x, y);
    return;
  }
  if (w.type == GgmlType::F32) {
    GemmABt(T, w.rows, w.cols, x, w.cols, reinterpret_cast<const float*>(w.data), w.cols, y, w.rows);
    return;
  }
  // Dequantize a block of rows at a time so scratch stays bounded for big models.
  const int block = std::max(1, std::min(w.rows, (1 << 20) / std::max(1, w.cols)));
  std::vector<float> tmp(static_cast<size_t>(block) * w.cols);
  for (int r0 = 0; r0 < w.rows; r0 += block) {
    int nr = std::min(block, w.rows - r0);
    pool.ParallelFor(nr, [&](int64_t a, int64_t b) {
      for (int64_t r = a; r < b; ++r) DequantRow(w.type, w.row(r0 + static_cast<int>(r)), &tmp[r * w.cols], w.cols);
    }, 16);
    GemmABt(T, nr, w.cols, x, w.cols, tmp.data(), w.cols, y + r0, w.rows);
  }
}

}  // namespace kvtrim::kernels
