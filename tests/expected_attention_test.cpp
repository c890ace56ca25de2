// Expected Attention (docs/policies-2.md): the score against closed forms,
// a Monte-Carlo expectation and hand-computed numbers; the RoPE average
// against the rotation kernel; the policy against a scalar reference; then
// the pre-RoPE query tap and decode-time eviction on the needle model.
#include "engine/engine_impl.h"
#include "kv/numerics/expected_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "io/tokenizer.h"
#include "kernels/ops.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kv/stats.h"
#include "kvtrim/engine.h"
#include "model/config.h"
#include "test_util.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using Eigen::MatrixXd;
using Eigen::VectorXd;

MatrixXd Gaussian(int r, int c, uint32_t seed, double sd = 1.0) {
  std::mt19937 g(seed);
  std::normal_distribution<double> N(0.0, sd);
  MatrixXd m(r, c);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < c; ++j) m(i, j) = N(g);
  return m;
}

TEST(ExpectedAttentionNumerics, ZeroCovarianceIsTheMeanQuerysAttention) {
  const int n = 9, d = 8;
  const MatrixXd K = Gaussian(n, d, 1);
  const VectorXd mu = Gaussian(d, 1, 2).col(0);
  const VectorXd b = Gaussian(n, 1, 3, 0.3).col(0);
  const VectorXd got = numerics::ExpectedAttention(mu, MatrixXd::Zero(d, d), K, b);
  // Plain softmax of the mean query, computed entry by entry.
  std::vector<double> z(n);
  for (int j = 0; j < n; ++j) z[j] = K.row(j).dot(mu) / std::sqrt(double(d)) + b(j);
  double mx = *std::max_element(z.begin(), z.end()), sum = 0;
  for (double& x : z) sum += (x = std::exp(x - mx));
  for (int j = 0; j < n; ++j) EXPECT_NEAR(got(j), z[j] / sum, 1e-12) << j;
}

TEST(ExpectedAttentionNumerics, HandComputedSmallCase) {
  // d = 2: z_j = mu.k_j / sqrt(2) + k_j^T S k_j / 4.
  // k1 = (1,0): 2/sqrt2 + 1/4; k2 = (0,1): 0 + 2/4; k3 = (1,1): 2/sqrt2 + 4/4.
  MatrixXd K(3, 2);
  K << 1, 0, 0, 1, 1, 1;
  VectorXd mu(2);
  mu << 2, 0;
  MatrixXd S(2, 2);
  S << 1, 0.5, 0.5, 2;
  const VectorXd p = numerics::ExpectedAttention(mu, S, K, VectorXd::Zero(3));
  EXPECT_NEAR(p(0), 0.2916159184502212, 1e-12);
  EXPECT_NEAR(p(1), 0.09103317734614001, 1e-12);
  EXPECT_NEAR(p(2), 0.6173509042036388, 1e-12);
}

TEST(ExpectedAttentionNumerics, MatchesTheMonteCarloExpectation) {
  // exp(score) is E[exp(q.k / sqrt d)] for q ~ N(mu, S): sample it.
  const int n = 5, d = 4, m = 200000;
  const MatrixXd K = Gaussian(n, d, 4, 0.7);
  const VectorXd mu = Gaussian(d, 1, 5).col(0);
  const MatrixXd L = Gaussian(d, d, 6, 0.5);
  const MatrixXd S = L * L.transpose();
  const MatrixXd Z = Gaussian(m, d, 7);
  VectorXd e = VectorXd::Zero(n);
  for (int s = 0; s < m; ++s) {
    const VectorXd q = mu + L * Z.row(s).transpose();
    e += (K * q / std::sqrt(double(d))).array().exp().matrix();
  }
  e /= e.sum();
  const VectorXd p = numerics::ExpectedAttention(mu, S, K, VectorXd::Zero(n));
  for (int j = 0; j < n; ++j) EXPECT_NEAR(p(j), e(j), 0.01 * e(j) + 1e-4) << j;
}

TEST(ExpectedAttentionNumerics, QueryMomentsByHand) {
  MatrixXd Q(2, 2);
  Q << 1, 2, 3, 6;
  const numerics::Moments m = numerics::QueryMoments(Q);
  EXPECT_NEAR(m.mean(0), 2, 1e-15);
  EXPECT_NEAR(m.mean(1), 4, 1e-15);
  EXPECT_NEAR(m.cov(0, 0), 1, 1e-15);
  EXPECT_NEAR(m.cov(0, 1), 2, 1e-15);
  EXPECT_NEAR(m.cov(1, 0), 2, 1e-15);
  EXPECT_NEAR(m.cov(1, 1), 4, 1e-15);
}

// Column c of the rotation the kernel applies at `pos`, averaged over `h` positions.
MatrixXd KernelRopeAverage(int d, int rot, float base, kernels::RopeMode mode, int p0, int h) {
  MatrixXd A = MatrixXd::Zero(d, d);
  for (int p = p0; p < p0 + h; ++p)
    for (int c = 0; c < d; ++c) {
      std::vector<float> e(d, 0.f);
      e[c] = 1.f;
      kernels::Rope(e.data(), 1, d, rot, p, base, mode);
      for (int r = 0; r < d; ++r) A(r, c) += e[r];
    }
  return A / h;
}

TEST(ExpectedAttentionNumerics, RopeAverageOfOnePositionIsThatRotation) {
  for (auto mode : {kernels::RopeMode::kNormal, kernels::RopeMode::kNeox})
    for (int rot : {8, 4}) {  // 4: partial rotary, dimensions 4..7 untouched
      const bool neox = mode == kernels::RopeMode::kNeox;
      const MatrixXd A = numerics::RopeAverage(8, rot, 10000.0, neox, 37, 1);
      EXPECT_LT((A - KernelRopeAverage(8, rot, 10000.f, mode, 37, 1)).cwiseAbs().maxCoeff(), 1e-6) << neox << rot;
      // A rotation: orthogonal with determinant 1.
      EXPECT_LT((A * A.transpose() - MatrixXd::Identity(8, 8)).cwiseAbs().maxCoeff(), 1e-12);
    }
}

TEST(ExpectedAttentionNumerics, RopeAverageIsTheMeanRotation) {
  const MatrixXd A = numerics::RopeAverage(8, 8, 100.0, true, 5, 64);
  EXPECT_LT((A - KernelRopeAverage(8, 8, 100.f, kernels::RopeMode::kNeox, 5, 64)).cwiseAbs().maxCoeff(), 1e-5);
  // The fastest frequency (theta = 1) averages out: |mean cos| well below 1.
  EXPECT_LT(std::abs(A(0, 0)), 0.1);
}

// Scalar reference of the policy: for each query head, mean and covariance
// of the window's pre-RoPE queries, rotated by the average RoPE matrix (from
// the kernel), the expected attention normalised, averaged over the group,
// times ||v||.
std::vector<double> ScalarScores(const std::vector<std::vector<double>>& q /*[m][G*d]*/, int G, const MatrixXd& K,
                                 const MatrixXd& V, const MatrixXd& A, bool value_norm = true) {
  const int n = K.rows(), d = K.cols(), m = q.size();
  std::vector<double> out(n, 0.0);
  for (int g = 0; g < G; ++g) {
    std::vector<double> mu(d, 0.0);
    for (int r = 0; r < m; ++r)
      for (int c = 0; c < d; ++c) mu[c] += q[r][g * d + c] / m;
    std::vector<std::vector<double>> S(d, std::vector<double>(d, 0.0));
    for (int r = 0; r < m; ++r)
      for (int a = 0; a < d; ++a)
        for (int c = 0; c < d; ++c) S[a][c] += (q[r][g * d + a] - mu[a]) * (q[r][g * d + c] - mu[c]) / m;
    std::vector<double> z(n);
    for (int j = 0; j < n; ++j) {
      std::vector<double> ka(d, 0.0);  // A^T k: mu'.k = mu.(A^T k), k^T A S A^T k = (A^T k)^T S (A^T k)
      for (int a = 0; a < d; ++a)
        for (int c = 0; c < d; ++c) ka[a] += A(c, a) * K(j, c);
      double lin = 0, quad = 0;
      for (int a = 0; a < d; ++a) {
        lin += mu[a] * ka[a];
        for (int c = 0; c < d; ++c) quad += ka[a] * S[a][c] * ka[c];
      }
      z[j] = lin / std::sqrt(double(d)) + quad / (2.0 * d);
    }
    const double mx = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double x : z) sum += std::exp(x - mx);
    for (int j = 0; j < n; ++j) out[j] += std::exp(z[j] - mx) / sum / G;
  }
  if (value_norm)
    for (int j = 0; j < n; ++j) out[j] *= V.row(j).norm();
  return out;
}

TEST(ExpectedAttentionPolicy, EvictsTheScalarReferencesLowestScores) {
  const int n = 24, d = 4, G = 2, m = 6, sinks = 2, budget = 10;
  const MatrixXd K = Gaussian(n, d, 11, 1.5), V = Gaussian(n, d, 12);
  HeadStore h(d, GgmlType::F32);
  for (int j = 0; j < n; ++j) {
    std::vector<float> k(d), v(d);
    for (int c = 0; c < d; ++c) k[c] = static_cast<float>(K(j, c)), v[c] = static_cast<float>(V(j, c));
    h.Append(k.data(), v.data(), j, 0.f);
  }
  MatrixXd Kf(n, d), Vf(n, d);  // what the store holds (f32)
  for (int j = 0; j < n; ++j)
    for (int c = 0; c < d; ++c) Kf(j, c) = static_cast<float>(K(j, c)), Vf(j, c) = static_cast<float>(V(j, c));
  HeadStats st;  // a ring of m queries (window 8: two slots empty)
  st.q_pre.resize(8);
  st.q_pre_pos.assign(8, -1);
  const MatrixXd Qm = Gaussian(m, G * d, 13);
  std::vector<std::vector<double>> qd(m, std::vector<double>(G * d));
  for (int r = 0; r < m; ++r) {
    const int pos = n - m + r;
    st.q_pre_pos[pos % 8] = pos;
    for (int c = 0; c < G * d; ++c) st.q_pre[pos % 8].push_back(static_cast<float>(Qm(r, c))), qd[r][c] = static_cast<float>(Qm(r, c));
  }
  RopeSpec rope{d, 10000.0, false};
  const MatrixXd A = KernelRopeAverage(d, d, 10000.f, kernels::RopeMode::kNormal, n, 16);
  // By hand from the reference: sinks, the newest entry, then the top scores.
  auto want_of = [&](const std::vector<double>& ref) {
    std::vector<int> order(n - sinks - 1);
    std::iota(order.begin(), order.end(), sinks);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return ref[a] > ref[b]; });
    std::vector<int> want = {0, 1, n - 1};
    want.insert(want.end(), order.begin(), order.begin() + (budget - 3));
    std::sort(want.begin(), want.end());
    return want;
  };
  const std::vector<int> want = want_of(ScalarScores(qd, G, Kf, Vf, A));
  const std::vector<int> want_flat = want_of(ScalarScores(qd, G, Kf, Vf, A, false));
  ASSERT_NE(want, want_flat);  // the value norm matters on this case

  PolicyContext ctx;
  ctx.store = &h;
  ctx.stats = &st;
  ctx.budget = budget;
  ctx.logical_len = n;
  ctx.rope_len = n;
  ctx.rope = &rope;
  auto pol = MakePolicy("expected-attention", {{"ea-window", 8}, {"ea-horizon", 16}, {"ea-sinks", sinks}});
  ASSERT_TRUE(pol.ok());
  EXPECT_EQ(pol.value()->Compress(ctx).keep, want);
  auto flat = MakePolicy("expected-attention", {{"ea-window", 8}, {"ea-horizon", 16}, {"ea-sinks", sinks}, {"ea-value-norm", 0}});
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat.value()->Compress(ctx).keep, want_flat);
}

TEST(ExpectedAttentionStats, PreRopeQueriesAreTappedOnlyWhenAsked) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  std::vector<int> toks = e->impl().tokenizer().Encode(test::ReadFile(test::SharedPath("data/frankenstein.txt")).substr(1000, 3000), true);
  toks.resize(160);
  const auto& c = e->impl().config();
  SessionOptions so;
  so.kv.policy = "expected-attention";
  so.kv.ratio = 0.25;
  so.kv.params = {{"ea-window", 16}};
  auto s = Session::Create(*e, so);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s.value()->Prefill(toks).ok());
  // The ring holds the last 16 positions' queries of every group.
  const HeadStats& st = s.value()->impl().compressor().stats().head(1, 2);
  ASSERT_EQ(st.q_pre.size(), 16u);
  for (size_t r = 0; r < 16; ++r) {
    EXPECT_GE(st.q_pre_pos[r], 160 - 16);
    EXPECT_EQ(st.q_pre_pos[r] % 16, static_cast<int64_t>(r));
    EXPECT_EQ(st.q_pre[r].size(), static_cast<size_t>(c.group() * c.head_dim));
  }
  ASSERT_TRUE(s.value()->Compress().ok());
  const int budget = static_cast<int>(std::ceil(0.25 * 160));
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head_kv; ++h) EXPECT_EQ(s.value()->impl().cache().head(l, h).size(), budget);
  // Decode-time: the budget holds step after step, and the ring moves on.
  for (int t = 0; t < 5; ++t) ASSERT_TRUE(s.value()->Decode(toks[t + 1]).ok());
  const int b2 = static_cast<int>(std::ceil(0.25 * 165));
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head_kv; ++h) EXPECT_LE(s.value()->impl().cache().head(l, h).size(), b2);
  EXPECT_EQ(*std::max_element(st.q_pre_pos.begin(), st.q_pre_pos.end()), 164);
  // --ea-evict-batch 0.25: a full head drops to budget - ceil(0.25 budget) + 1 at once.
  SessionOptions sb = so;
  sb.kv.params["ea-evict-batch"] = 0.25;
  auto s3 = Session::Create(*e, sb);
  ASSERT_TRUE(s3.ok());
  ASSERT_TRUE(s3.value()->Prefill(toks).ok());
  ASSERT_TRUE(s3.value()->Compress().ok());  // prefill-time: exactly the budget
  EXPECT_EQ(s3.value()->impl().cache().head(0, 0).size(), budget);
  ASSERT_TRUE(s3.value()->Decode(toks[1]).ok());  // 41 entries, budget ceil(0.25 * 161) = 41: no eviction
  EXPECT_EQ(s3.value()->impl().cache().head(0, 0).size(), 41);
  ASSERT_TRUE(s3.value()->Decode(toks[2]).ok());  // 42 > 41: down to 41 - 11 + 1 = 31
  EXPECT_EQ(s3.value()->impl().cache().head(0, 0).size(), 31);
  // Another policy collects none.
  SessionOptions so2;
  so2.kv.policy = "snapkv";
  auto s2 = Session::Create(*e, so2);
  ASSERT_TRUE(s2.ok());
  ASSERT_TRUE(s2.value()->Prefill(toks).ok());
  EXPECT_TRUE(s2.value()->impl().compressor().stats().head(1, 2).q_pre.empty());
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
