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
  // BLAS runs single-threaded (SetBlasThreads(1)); the pool splits the
  // weight rows, so no second set of threads competes for the cores.
  pool.ParallelFor(w.rows, [&](int64_t r0, int64_t r1) {
    if (w.type == GgmlType::F32) {
      GemmABt(T, static_cast<int>(r1 - r0), w.cols, x, w.cols, reinterpret_cast<const float*>(w.row(static_cast<int>(r0))),
              w.cols, y + r0, w.rows);
      return;
    }
    // Dequantize a block of rows at a time so scratch stays bounded for big models.
    const int64_t block = std::max<int64_t>(1, std::min<int64_t>(r1 - r0, (1 << 18) / std::max(1, w.cols)));
    std::vector<float> tmp(static_cast<size_t>(block) * w.cols);
    for (int64_t b0 = r0; b0 < r1; b0 += block) {
      const int nr = static_cast<int>(std::min(block, r1 - b0));
      for (int r = 0; r < nr; ++r) DequantRow(w.type, w.row(static_cast<int>(b0) + r), &tmp[static_cast<size_t>(r) * w.cols], w.cols);
      GemmABt(T, nr, w.cols, x, w.cols, tmp.data(), w.cols, y + b0, w.rows);
    }
  }, 16);
}

}  // namespace kvtrim::kernels
