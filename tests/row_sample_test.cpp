// Row sampling for least squares (src/kv/numerics/row_sample): the weights
// by their closed form, the sampled sum of squares unbiased, and on a
// hand-made head where a few queries alone carry two keys' mass, the NNLS
// fit on a leverage sample within the sampling bound of the full fit while a
// uniform sample of the same size misses those queries and fits measurably
// worse.
// GCC 12 reports false "may be used uninitialized" warnings inside Eigen's
// AVX-512 double-precision packets (_mm512_undefined_pd) with -march=native.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kv/numerics/nnls.h"
#include "kv/numerics/row_sample.h"

namespace kvtrim::kv::numerics {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

TEST(RowSample, WeightsByTheirClosedForm) {
  // Equal leverage: p = 1/n, so a row drawn c times weighs c n / s.
  const Eigen::VectorXd lev = Eigen::VectorXd::Constant(10, 0.3);
  const RowSample r = SampleRows(lev, 4, 0.0, 7);
  double draws = 0;
  for (Eigen::Index a = 0; a < r.weight.size(); ++a) {
    const double c = r.weight(a) * 4 / 10.0;
    EXPECT_NEAR(c, std::round(c), 1e-12);
    draws += c;
  }
  EXPECT_NEAR(draws, 4.0, 1e-12);
  EXPECT_TRUE(std::is_sorted(r.rows.begin(), r.rows.end()));
  // The same seed, the same sample; s >= n: every row, weight 1.
  EXPECT_EQ(SampleRows(lev, 4, 0.0, 7).rows, r.rows);
  const RowSample all = SampleRows(lev, 10, 0.0, 7);
  EXPECT_EQ(all.rows.size(), 10u);
  EXPECT_DOUBLE_EQ(all.weight.sum(), 10.0);
  // A row of zero leverage is never drawn without a uniform share.
  Eigen::VectorXd one = Eigen::VectorXd::Zero(5);
  one(3) = 1.0;
  const RowSample only = SampleRows(one, 3, 0.0, 1);
  ASSERT_EQ(only.rows, std::vector<int>{3});
  EXPECT_DOUBLE_EQ(only.weight(0), 1.0);  // 3 draws / (3 * 1)
}

TEST(RowSample, SampledSumOfSquaresIsUnbiased) {
  std::mt19937_64 g(3);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const int n = 200;
  Eigen::VectorXd res(n), lev(n);
  for (int i = 0; i < n; ++i) res(i) = u(g) * (i % 17 == 0 ? 5.0 : 1.0), lev(i) = u(g);
  const double full = res.squaredNorm();
  double mean = 0;
  const int reps = 2000;
  for (int s = 0; s < reps; ++s) {
    const RowSample r = SampleRows(lev, 20, 0.2, 100 + s);
    for (size_t a = 0; a < r.rows.size(); ++a) mean += r.weight(a) * res(r.rows[a]) * res(r.rows[a]) / reps;
  }
  EXPECT_NEAR(mean / full, 1.0, 0.03);
}

// A head's mass target: 3,980 diffuse queries attend keys 0-5, 20 queries
// alone attend keys 6 and 7 (the needle); A [M, 8] >= 0, b = A x* + noise.
struct Head {
  Eigen::MatrixXd A;
  Eigen::VectorXd b;
};

Head NeedleHead() {
  const int M = 4000, k = 8, needle = 20;
  std::mt19937_64 g(11);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  std::normal_distribution<double> noise(0.0, 0.05);
  Head h{Eigen::MatrixXd::Constant(M, k, 1e-3), Eigen::VectorXd(M)};
  for (int i = 0; i < M; ++i) {
    const bool is_needle = i % (M / needle) == 0;
    for (int j = is_needle ? 6 : 0; j < (is_needle ? 8 : 6); ++j) h.A(i, j) = u(g);
  }
  Eigen::VectorXd x(k);
  for (int j = 0; j < k; ++j) x(j) = 0.25 * (j + 1);
  h.b = h.A * x;
  for (int i = 0; i < M; ++i) h.b(i) += noise(g);
  return h;
}

double SampledFitResidual(const Head& h, const RowSample& r) {
  Eigen::MatrixXd As(r.rows.size(), h.A.cols());
  Eigen::VectorXd bs(r.rows.size());
  for (size_t a = 0; a < r.rows.size(); ++a) {
    const double sw = std::sqrt(r.weight(a));
    As.row(a) = sw * h.A.row(r.rows[a]);
    bs(a) = sw * h.b(r.rows[a]);
  }
  return (h.A * Nnls(As, bs).x - h.b).norm();  // the full problem's residual
}

TEST(RowSample, LeverageSampleFitsWithinTheBoundUniformDoesNot) {
  const Head h = NeedleHead();
  const double best = (h.A * Nnls(h.A, h.b).x - h.b).norm();
  const int s = 200, rank = 8;
  // Sampling theory: s = O(r log r / eps^2) rows give (1 + eps); the
  // constant taken as 1.
  const double eps = std::sqrt(rank * std::log(rank) / s);
  const Eigen::VectorXd lev = RowLeverage(h.A, 64, 5);
  std::vector<double> lev_ratio, uni_ratio;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    lev_ratio.push_back(SampledFitResidual(h, SampleRows(lev, s, 0.1, seed)) / best);
    uni_ratio.push_back(SampledFitResidual(h, SampleRows(Eigen::VectorXd::Ones(h.A.rows()), s, 1.0, seed)) / best);
  }
  for (double q : lev_ratio) EXPECT_LE(q, 1.0 + eps);
  std::sort(uni_ratio.begin(), uni_ratio.end());
  EXPECT_GT(uni_ratio[10], 2.0);  // the median uniform sample: more than twice the best residual
  EXPECT_GT(*std::max_element(uni_ratio.begin(), uni_ratio.end()), 1.0 + eps);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv::numerics
