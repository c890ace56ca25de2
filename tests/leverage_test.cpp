// Leverage scores (src/kv/numerics/leverage) against closed forms: the hat
// matrix diag(K (K^T K)^-1 K^T), sums equal to the rank, sketch k >= d equal
// to exact, the SVD, QR and Gram routes agreeing, centring as an intercept.
// GCC 12 reports false "may be used uninitialized" warnings inside Eigen's
// AVX-512 double-precision packets (_mm512_undefined_pd) with -march=native.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "kv/numerics/leverage.h"

namespace kvtrim::kv::numerics {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// Row-major [n, d] floats: a product of [n, r] and [r, d] Gaussians (rank r).
std::vector<float> LowRank(int n, int d, int r, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> nd;
  Eigen::MatrixXd A(n, r), B(r, d);
  for (int i = 0; i < A.size(); ++i) A.data()[i] = nd(g);
  for (int i = 0; i < B.size(); ++i) B.data()[i] = nd(g);
  Eigen::MatrixXd K = A * B;
  std::vector<float> out(static_cast<size_t>(n) * d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) out[static_cast<size_t>(i) * d + j] = static_cast<float>(K(i, j));
  return out;
}

Eigen::MatrixXd ToMat(const std::vector<float>& k, int n, int d) {
  Eigen::MatrixXd m(n, d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) m(i, j) = k[static_cast<size_t>(i) * d + j];
  return m;
}

// The closed form for full column rank: diag(K (K^T K)^-1 K^T).
std::vector<double> HatDiagonal(const Eigen::MatrixXd& K) {
  const Eigen::MatrixXd H = K * (K.transpose() * K).inverse() * K.transpose();
  std::vector<double> out(H.rows());
  for (Eigen::Index i = 0; i < H.rows(); ++i) out[i] = H(i, i);
  return out;
}

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

LeverageOptions With(LeverageMethod m, int k = 64, uint64_t seed = 3) {
  LeverageOptions o;
  o.method = m;
  o.sketch_dim = k;
  o.seed = seed;
  return o;
}

TEST(Leverage, ExactEqualsHatDiagonalAndSumsToRank) {
  const int n = 40, d = 8;
  auto K = LowRank(n, d, d, 1);
  auto lev = LeverageScores(K.data(), n, d, With(LeverageMethod::kExact));
  auto ref = HatDiagonal(ToMat(K, n, d));
  for (int i = 0; i < n; ++i) EXPECT_NEAR(lev[i], ref[i], 1e-5) << i;
  EXPECT_NEAR(Sum(lev), 8.0, 1e-6);
}

TEST(Leverage, RankDeficientSumsToRankOnEveryRoute) {
  const int n = 30, d = 8, r = 3;
  auto K = LowRank(n, d, r, 2);
  for (auto m : {LeverageMethod::kExact, LeverageMethod::kSketch, LeverageMethod::kQr, LeverageMethod::kSrht}) {
    auto lev = LeverageScores(K.data(), n, d, With(m));
    EXPECT_NEAR(Sum(lev), 3.0, 1e-4) << LeverageMethodNames()[static_cast<int>(m)];
    for (double x : lev) EXPECT_TRUE(x >= -1e-9 && x <= 1 + 1e-9);
  }
  // The Gram route clamps small eigenvalues instead of dropping them: what the
  // null directions add is ~ eps^2 / 1e-6, far below the tolerance.
  EXPECT_NEAR(Sum(LeverageScores(K.data(), n, d, With(LeverageMethod::kEig))), 3.0, 1e-4);
}

TEST(Leverage, SketchWithKAtLeastDEqualsExact) {
  for (int d : {8, 12}) {  // 12: the SRHT pads to 16 and samples 12 of its columns
    const int n = 50;
    auto K = LowRank(n, d, d, 4 + d);
    auto exact = LeverageScores(K.data(), n, d, With(LeverageMethod::kExact));
    for (auto m : {LeverageMethod::kSketch, LeverageMethod::kSrht, LeverageMethod::kQr, LeverageMethod::kEig}) {
      for (int k : {d, 64}) {  // k is capped at d
        auto sk = LeverageScores(K.data(), n, d, With(m, k));
        for (int i = 0; i < n; ++i) EXPECT_NEAR(sk[i], exact[i], 1e-5) << "d " << d << " k " << k << " row " << i;
      }
    }
    // The reason: K Phi with an invertible Phi [d, d] spans the column space of K.
    const Eigen::MatrixXd Km = ToMat(K, n, d);
    const Eigen::VectorXd g = LeverageSvd(Km * GaussianSketch(d, d, 5));
    for (int i = 0; i < n; ++i) EXPECT_NEAR(g(i), exact[i], 1e-8);
  }
  // SRHT at k = d = 16 (a power of two) is orthogonal, hence exact too.
  auto K = LowRank(30, 16, 16, 21);
  const Eigen::VectorXd s = LeverageSvd(ToMat(K, 30, 16) * SrhtSketch(16, 16, 2));
  auto exact = LeverageScores(K.data(), 30, 16, With(LeverageMethod::kExact));
  for (int i = 0; i < 30; ++i) EXPECT_NEAR(s(i), exact[i], 1e-8);
}

TEST(Leverage, QrEigAndSvdAgreeOnTheSameSketch) {
  const int n = 60, d = 16, k = 6;
  auto K = LowRank(n, d, d, 7);
  auto svd = LeverageScores(K.data(), n, d, With(LeverageMethod::kSketch, k, 11));
  auto qr = LeverageScores(K.data(), n, d, With(LeverageMethod::kQr, k, 11));
  auto eig = LeverageScores(K.data(), n, d, With(LeverageMethod::kEig, k, 11));
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(qr[i], svd[i], 1e-8);
    EXPECT_NEAR(eig[i], svd[i], 1e-8);
  }
  EXPECT_NEAR(Sum(svd), k, 1e-8);  // the sketch K Phi has rank k
  // Against the closed form on the same sketched matrix.
  auto ref = HatDiagonal(ToMat(K, n, d) * GaussianSketch(d, k, 11));
  for (int i = 0; i < n; ++i) EXPECT_NEAR(svd[i], ref[i], 1e-6);
}

TEST(Leverage, SeededAndGaussianSketchHasTheRightScale) {
  const int n = 40, d = 16;
  auto K = LowRank(n, d, d, 9);
  EXPECT_EQ(LeverageScores(K.data(), n, d, With(LeverageMethod::kSketch, 4, 1)),
            LeverageScores(K.data(), n, d, With(LeverageMethod::kSketch, 4, 1)));
  EXPECT_NE(LeverageScores(K.data(), n, d, With(LeverageMethod::kSketch, 4, 1)),
            LeverageScores(K.data(), n, d, With(LeverageMethod::kSketch, 4, 2)));
  // E[Phi Phi^T] = I for entries N(0, 1/k): the mean of the diagonal over many columns.
  const Eigen::MatrixXd phi = GaussianSketch(64, 4096, 5);
  const Eigen::MatrixXd ppt = phi * phi.transpose();
  EXPECT_NEAR(ppt.diagonal().mean(), 1.0, 0.01);
  EXPECT_NEAR((ppt - Eigen::MatrixXd::Identity(64, 64)).cwiseAbs().maxCoeff(), 0.0, 0.12);
  // SRHT with k = d = a power of two is orthogonal up to sqrt(d / k) = 1.
  const Eigen::MatrixXd s = SrhtSketch(16, 16, 3);
  EXPECT_NEAR((s.transpose() * s - Eigen::MatrixXd::Identity(16, 16)).norm(), 0.0, 1e-12);
}

TEST(Leverage, CentringIsTheInterceptHatMatrixMinusOneOverN) {
  // h_i of the centred K = h_i of [1, K] - 1/n (closed form).
  const int n = 25, d = 5;
  auto K = LowRank(n, d, d, 13);
  for (float& x : K) x += 3.f;
  LeverageOptions o = With(LeverageMethod::kExact);
  o.center = true;
  auto lev = LeverageScores(K.data(), n, d, o);
  Eigen::MatrixXd X(n, d + 1);
  X << Eigen::VectorXd::Ones(n), ToMat(K, n, d);
  auto ref = HatDiagonal(X);
  for (int i = 0; i < n; ++i) EXPECT_NEAR(lev[i], ref[i] - 1.0 / n, 1e-5);
}

TEST(Leverage, DegenerateInputsAreFinite) {
  const int n = 10, d = 4;
  std::vector<float> same(n * d), zero(n * d, 0.f);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) same[i * d + j] = 0.5f + j;
  for (auto m : {LeverageMethod::kExact, LeverageMethod::kSketch, LeverageMethod::kQr, LeverageMethod::kEig,
                 LeverageMethod::kSrht}) {
    auto a = LeverageScores(same.data(), n, d, With(m));  // rank 1: every row 1/n
    for (double x : a) EXPECT_NEAR(x, 1.0 / n, 1e-9);
    auto z = LeverageScores(zero.data(), n, d, With(m));
    for (double x : z) EXPECT_EQ(x, 0.0);
    LeverageOptions c = With(m);
    c.center = true;  // centred equal keys are all zero
    for (double x : LeverageScores(same.data(), n, d, c)) EXPECT_EQ(x, 0.0);
  }
  EXPECT_TRUE(LeverageScores(same.data(), 0, d, {}).empty());
  auto one = LeverageScores(same.data(), 1, d, With(LeverageMethod::kExact));
  EXPECT_NEAR(one[0], 1.0, 1e-12);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv::numerics
