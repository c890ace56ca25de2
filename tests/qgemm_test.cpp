// The integer weight products (kernels/qgemm.h) on every dispatch path against
// the float64 reference of the same integer scheme, and against the float
// product within the activation-quantization bound.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "test_util.h"
#include "kernels/cpu.h"
#include "kernels/matmul.h"
#include "kernels/qgemm.h"
#include "kernels/quant.h"
#include "kernels/ref/qgemm_ref.h"
#include "kernels/ref/quant_ref.h"

namespace kvtrim::kernels {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using test::RandVec;

// Restores the active path when a test ends.
struct PathGuard {
  explicit PathGuard(KernelPath p) : old(SetKernelPath(p)) {}
  ~PathGuard() { SetKernelPath(old); }
  KernelPath old;
};

std::vector<KernelPath> Paths() {
  std::vector<KernelPath> ps;
  for (KernelPath p : {KernelPath::kScalar, KernelPath::kAvx2, KernelPath::kAvx512})
    if (p <= BestKernelPath()) ps.push_back(p);
  return ps;
}

TEST(QGemm, ActivationBlocksMeetTheirDefinition) {
  std::mt19937 rng(1);
  const int T = 3, cols = 96;
  std::vector<float> x = RandVec(rng, T * cols, 2.f);
  std::fill(x.begin() + 32, x.begin() + 64, 0.f);  // an all-zero block
  QActs a;
  QuantizeActs(x.data(), T, cols, &a);
  ASSERT_EQ(a.nb, 3);
  for (int b = 0; b < T * a.nb; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    EXPECT_FLOAT_EQ(a.d[b], amax / 32767.f);
    int qmax = 0, sum[2] = {0, 0};
    for (int j = 0; j < 32; ++j) {
      const int q = a.q[b * 32 + j];
      qmax = std::max(qmax, std::abs(q));
      sum[j / 16] += q;
      if (amax > 0) EXPECT_LE(std::fabs(x[b * 32 + j] - q * a.d[b]), 0.5001f * a.d[b]);
      else EXPECT_EQ(q, 0);
    }
    EXPECT_EQ(qmax, amax > 0 ? 32767 : 0);
    EXPECT_EQ(a.hsum[2 * b], sum[0]);
    EXPECT_EQ(a.hsum[2 * b + 1], sum[1]);
  }
}

struct Shape {
  int rows, cols, T;
};

// Every path, both types, shapes that are not multiples of the 4 x 4 / 4 x 2
// tiles nor of the two-block AVX-512 step (odd block counts).
TEST(QGemm, EveryPathMatchesFloat64Reference) {
  std::mt19937 rng(7);
  for (KernelPath path : Paths()) {
    PathGuard guard(path);
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      for (Shape s : {Shape{1, 32, 1}, Shape{5, 96, 3}, Shape{37, 160, 9}, Shape{8, 256, 4}, Shape{3, 64, 17}}) {
        const size_t rb = RowBytes(type, s.cols);
        std::vector<uint8_t> data(rb * s.rows);
        for (int r = 0; r < s.rows; ++r) QuantizeRow(type, RandVec(rng, s.cols).data(), data.data() + rb * r, s.cols);
        WeightView w{type, data.data(), s.rows, s.cols};
        ASSERT_TRUE(QGemmSupports(w));
        std::vector<float> x = RandVec(rng, s.T * s.cols);
        QActs a;
        QuantizeActs(x.data(), s.T, s.cols, &a);
        const int ldy = s.rows + 3;
        std::vector<float> y(static_cast<size_t>(s.T) * ldy, -7.f);
        QGemmRows(w, a, 0, s.rows, y.data(), ldy);
        for (int t = 0; t < s.T; ++t) {
          for (int r = 0; r < s.rows; ++r) {
            const int16_t* xq = &a.q[static_cast<size_t>(t) * s.cols];
            const float* xd = &a.d[static_cast<size_t>(t) * a.nb];
            const double want = ref::QDotRow(type, w.row(r), xq, xd, a.nb);
            ASSERT_NEAR(y[t * ldy + r], want, 2e-6 * (1 + std::fabs(want)) * a.nb)
                << KernelPathName(path) << " " << TypeName(type) << " r " << r << " t " << t;
          }
          for (int r = s.rows; r < ldy; ++r) ASSERT_EQ(y[t * ldy + r], -7.f);  // nothing written outside
        }
      }
    }
  }
}

// MatMul (prefill) and T = 1 (decode) against the float product: the only
// difference is the activation rounding, |err| <= sum_j |w_j| d_x(block j) / 2
// with d_x = max|x| / 32767 per block.
TEST(QGemm, MatMulWithinActivationRoundingOfFloatProduct) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  for (KernelPath path : Paths()) {
    PathGuard guard(path);
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      const int rows = 45, cols = 288, T = 7;
      const size_t rb = RowBytes(type, cols);
      std::vector<uint8_t> data(rb * rows);
      for (int r = 0; r < rows; ++r) QuantizeRow(type, RandVec(rng, cols).data(), data.data() + rb * r, cols);
      WeightView w{type, data.data(), rows, cols};
      std::vector<float> x = RandVec(rng, T * cols), y(T * rows), y1(rows), wf(cols);
      MatMul(pool, w, x.data(), T, y.data());
      for (int t = 0; t < T; ++t) {
        MatMul(pool, w, &x[t * cols], 1, y1.data());
        for (int r = 0; r < rows; ++r) {
          ref::DequantRow(type, w.row(r), wf.data(), cols);
          double bound = 1e-5;
          for (int b = 0; b < cols / 32; ++b) {
            float amax = 0, wsum = 0;
            for (int j = b * 32; j < b * 32 + 32; ++j) {
              amax = std::max(amax, std::fabs(x[t * cols + j]));
              wsum += std::fabs(wf[j]);
            }
            bound += wsum * amax / 32767.0 / 2 * 1.001;
          }
          const double want = ref::DotRow(type, w.row(r), &x[t * cols], cols);
          ASSERT_NEAR(y[t * rows + r], want, bound) << KernelPathName(path) << " " << TypeName(type);
          ASSERT_NEAR(y1[r], y[t * rows + r], 1e-4 * (1 + std::fabs(want))) << KernelPathName(path);
        }
      }
    }
  }
}

// A NaN in a token's activations reaches that token's outputs (as through a
// float product) and no other token's.
TEST(QGemm, NonFiniteActivationsPropagateToTheirTokenOnly) {
  std::mt19937 rng(5);
  const int rows = 6, cols = 64, T = 3;
  std::vector<uint8_t> data(RowBytes(GgmlType::Q8_0, cols) * rows);
  for (int r = 0; r < rows; ++r)
    QuantizeRow(GgmlType::Q8_0, RandVec(rng, cols).data(), data.data() + RowBytes(GgmlType::Q8_0, cols) * r, cols);
  WeightView w{GgmlType::Q8_0, data.data(), rows, cols};
  std::vector<float> x = RandVec(rng, T * cols);
  x[cols + 40] = std::nanf("");
  for (KernelPath path : Paths()) {
    PathGuard guard(path);
    QActs a;
    QuantizeActs(x.data(), T, cols, &a);
    std::vector<float> y(T * rows);
    QGemmRows(w, a, 0, rows, y.data(), rows);
    for (int r = 0; r < rows; ++r) {
      EXPECT_TRUE(std::isfinite(y[r])) << KernelPathName(path);
      EXPECT_TRUE(std::isnan(y[rows + r])) << KernelPathName(path);
      EXPECT_TRUE(std::isfinite(y[2 * rows + r])) << KernelPathName(path);
    }
  }
}

// The vectorized activation quantization (AVX2/AVX-512 paths) gives the
// scalar loop's codes, scales and half sums bit for bit: ties (x / d exactly
// k + 0.5, rounded to even), an all-zero block, -0, an infinity and a NaN.
TEST(QGemm, ActivationCodesIdenticalOnEveryPath) {
  std::mt19937 rng(3);
  const int T = 2, cols = 224;  // 7 blocks per token
  std::vector<float> x = RandVec(rng, T * cols, 3.f);
  x[0] = 32767.f;  // block 0: d = 1, every other element a tie
  for (int j = 1; j < 32; ++j) x[j] = (j % 2 ? 1.f : -1.f) * (static_cast<float>(j) * 37.f + 0.5f);
  std::fill(x.begin() + 32, x.begin() + 64, 0.f);
  x[40] = -0.f;
  x[70] = std::numeric_limits<float>::infinity();
  x[cols + 100] = std::nanf("");
  QActs want;
  {
    PathGuard guard(KernelPath::kScalar);
    QuantizeActs(x.data(), T, cols, &want);
  }
  EXPECT_EQ(want.q[1], 38);   // 37.5 -> 38 (even)
  EXPECT_EQ(want.q[2], -74);  // -74.5 -> -74 (even)
  for (KernelPath path : Paths()) {
    PathGuard guard(path);
    QActs a;
    QuantizeActs(x.data(), T, cols, &a);
    ASSERT_EQ(a.q, want.q) << KernelPathName(path);
    ASSERT_EQ(a.hsum, want.hsum) << KernelPathName(path);
    for (int b = 0; b < T * a.nb; ++b) {
      if (std::isnan(want.d[b])) EXPECT_TRUE(std::isnan(a.d[b])) << KernelPathName(path) << " block " << b;
      else EXPECT_EQ(a.d[b], want.d[b]) << KernelPathName(path) << " block " << b;
    }
  }
  EXPECT_TRUE(std::isnan(want.d[2]));       // the infinity's block
  EXPECT_TRUE(std::isnan(want.d[7 + 3]));   // the NaN's block
}

TEST(QGemm, PathClampsToWhatTheCpuHas) {
  PathGuard guard(KernelPath::kAvx512);
  EXPECT_LE(ActiveKernelPath(), BestKernelPath());
  SetKernelPath(KernelPath::kScalar);
  EXPECT_EQ(ActiveKernelPath(), KernelPath::kScalar);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kernels
