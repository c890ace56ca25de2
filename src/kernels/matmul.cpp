#include "kernels/matmul.h"

#include "kernels/eigen_core.h"

#include <algorithm>
#include <vector>

#include "kernels/qgemm.h"
#include "kernels/qgemm_packed.h"
#include "kernels/quant.h"
#include "kernels/scratch.h"

namespace kvtrim::kernels {
namespace {

// Row-major float matrices with a row stride, viewed by Eigen (no copies).
// Eigen's GEMM is used rather than BLAS: it is safe to call from every pool
// thread at once and starts no threads of its own (OpenBLAS's serial build is
// not reentrant, its pthread build spins idle workers against our pool).
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using CMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using MMap = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

// Batches below this size use the integer kernels of qgemm.h on Q8_0/Q4_0;
// larger ones dequantize row blocks for Eigen's GEMM, which is faster there
// (one thread, [768 x 256] Q8_0, bench/kernels_bench BM_MatMul on Zen 4, CPU
// time: T=1 8.4 vs 13.7 us, T=4 25 vs 64 us, T=16 98 vs 117 us, T=64 400 vs
// 337 us, T=512 62 vs 76 GFLOP/s; docs/kernels.md).
constexpr int kIntegerMaxBatch = 32;
// Q8_0/Q4_0 views with a repack (w.packed, qgemm_packed.h) use it at every
// batch size: one thread, CPU time, BM_PrefillGemm on Zen 4, AVX-512 VNNI
// kernel 2.8-3.6 us at T = 1 on [768 x 256] / [256 x 768] against 7.3-8.3 us for the 4 x 2
// tiles below, and 125-188 GFLOP/s from T = 32 on against 62-85 for
// dequantized row blocks + Eigen (docs/kernels.md).

}  // namespace

void MatVec(ThreadPool& pool, const WeightView& w, const float* x, float* y) {
  // Small matrices stay on one thread: the fork/join would cost more than the work.
  int64_t grain = std::max<int64_t>(1, 32768 / std::max(1, w.cols));
  pool.ParallelFor(w.rows, [&](int64_t r0, int64_t r1) {
    const size_t rb = w.row_bytes();
    for (int64_t r = r0; r < r1; ++r) y[r] = DotRow(w.type, w.data + rb * r, x, w.cols);
  }, grain);
}

void MatMulShared(ThreadPool& pool, std::initializer_list<SharedProduct> products, const float* x, int T) {
  if (products.size() == 0 || T <= 0) return;
  const int cols = products.begin()->w->cols;
  int64_t tiles = 0;
  for (const SharedProduct& pr : products) {
    if (!pr.w->packed || pr.w->cols != cols) {
      for (const SharedProduct& each : products) MatMul(pool, *each.w, x, T, each.y);
      return;
    }
    tiles += pr.w->packed->tiles;
  }
  // Reused across calls (no allocation per product). The pool's workers must
  // see the caller's buffer: a lambda names a thread_local directly (no
  // capture), so it is passed through a plain reference.
  thread_local QActs tl_acts;
  QActs& acts = tl_acts;
  QuantizeActs(x, T, cols, &acts, &pool);
  // Small products stay on one thread (about 32K multiply-adds per chunk at least).
  const int64_t grain = std::max<int64_t>(1, 32768 / (int64_t{kPackRows} * cols * T));
  pool.ParallelFor(tiles, [&](int64_t t0, int64_t t1) {
    int64_t base = 0;  // the first tile of the product below in [0, tiles)
    for (const SharedProduct& pr : products) {
      const PackedWeights& p = *pr.w->packed;
      const int64_t lo = std::max(t0, base) - base, hi = std::min(t1, base + p.tiles) - base;
      if (lo < hi)
        PackedGemmRows(p, acts, static_cast<int>(lo) * kPackRows, std::min(p.rows, static_cast<int>(hi) * kPackRows),
                       pr.y, p.rows);
      base += p.tiles;
    }
  }, grain);
}

void GemmABt(int M, int N, int K, const float* a, int lda, const float* b, int ldb, float* c, int ldc,
             float beta) {
  CMap A(a, M, K, Eigen::OuterStride<>(lda)), B(b, N, K, Eigen::OuterStride<>(ldb));
  MMap C(c, M, N, Eigen::OuterStride<>(ldc));
  if (beta == 0.f) C.noalias() = A * B.transpose();
  else C = beta * C + A * B.transpose();
}

void GemmAB(int M, int N, int K, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
  CMap A(a, M, K, Eigen::OuterStride<>(lda)), B(b, K, N, Eigen::OuterStride<>(ldb));
  MMap C(c, M, N, Eigen::OuterStride<>(ldc));
  C.noalias() = A * B;
}

void MatMul(ThreadPool& pool, const WeightView& w, const float* x, int T, float* y) {
  if (w.packed) {  // row-lane integer kernels on the repacked copy
    MatMulShared(pool, {{&w, y}}, x, T);
    return;
  }
  if (QGemmSupports(w) && T < kIntegerMaxBatch) {  // Q8_0/Q4_0: int16 activations against the stored blocks
    // Reused across calls (no allocation per product). The pool's workers must
    // see the caller's buffer: a lambda names a thread_local directly (no
    // capture), so it is passed through a plain reference.
    thread_local QActs tl_acts;
    QActs& acts = tl_acts;
    QuantizeActs(x, T, w.cols, &acts, &pool);
    const int64_t grain = T == 1 ? std::max<int64_t>(4, 32768 / std::max(1, w.cols)) : 16;
    pool.ParallelFor(w.rows, [&](int64_t r0, int64_t r1) {
      QGemmRows(w, acts, static_cast<int>(r0), static_cast<int>(r1), y, w.rows);
    }, grain);
    return;
  }
  if (T == 1 && QGemvBlockSupports(w)) {  // K-quant / Q4_1 / Q5_x decode on int16 activations
    thread_local QActs tl_acts;
    QActs& acts = tl_acts;  // see above
    QuantizeActs(x, 1, w.cols, &acts);
    pool.ParallelFor(w.rows, [&](int64_t r0, int64_t r1) {
      QGemvBlockRows(w, acts, static_cast<int>(r0), static_cast<int>(r1), y);
    }, std::max<int64_t>(4, 32768 / std::max(1, w.cols)));
    return;
  }
  if (T == 1) {
    MatVec(pool, w, x, y);
    return;
  }
  // The pool splits the weight rows; each slice is one single-threaded GEMM.
  pool.ParallelFor(w.rows, [&](int64_t r0, int64_t r1) {
    if (w.type == GgmlType::F32) {
      GemmABt(T, static_cast<int>(r1 - r0), w.cols, x, w.cols, reinterpret_cast<const float*>(w.row(static_cast<int>(r0))),
              w.cols, y + r0, w.rows);
      return;
    }
    // Dequantize a block of rows at a time so scratch stays bounded for big models.
    const int64_t block = std::max<int64_t>(1, std::min<int64_t>(r1 - r0, (1 << 18) / std::max(1, w.cols)));
    // Per thread, reused across calls and not zeroed (a fresh zeroed 1 MiB per
    // call was a memset of the whole block for every product).
    thread_local ScratchVector<float> tl_tmp;
    ScratchVector<float>& tmp = tl_tmp;  // a plain reference, see the QActs buffer above
    tmp.resize(static_cast<size_t>(block) * w.cols);
    for (int64_t b0 = r0; b0 < r1; b0 += block) {
      const int nr = static_cast<int>(std::min(block, r1 - b0));
      for (int r = 0; r < nr; ++r) DequantRow(w.type, w.row(static_cast<int>(b0) + r), &tmp[static_cast<size_t>(r) * w.cols], w.cols);
      GemmABt(T, nr, w.cols, x, w.cols, tmp.data(), w.cols, y + b0, w.rows);
    }
  }, 16);
}

}  // namespace kvtrim::kernels
