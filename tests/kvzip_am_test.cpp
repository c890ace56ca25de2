// `kvzip-am` (KVzip's selection, Attention Matching's fit) on constructed
// heads: the picks are KVzip's top entries, each weighing at least itself;
// duplicates of a pick fold into its weight exactly; with neither weights nor
// values fitted it is KVzip; the fit beats the plain picks on the reference
// queries' outputs; a budget holding every entry changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>

#include "kv/cache.h"
#include "kv/numerics/eigen.h"
#include "kv/plan.h"
#include "kv/policy.h"
#include "kv/stats.h"
#include "kv/taps/max_prob.h"
#include "head_reference.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using Eigen::MatrixXd;

MatrixXd Gaussian(int r, int c, uint32_t seed) { return test::GaussianMatrix(r, c, seed); }

struct Head {
  HeadStore store;
  HeadStats stats;
};

// Entries from the rows of K and V, reference queries Q (the prefill's,
// G = 1), KVzip's reconstruction scores `mp`.
Head MakeHead(const MatrixXd& K, const MatrixXd& V, const MatrixXd& Q, const std::vector<float>& mp) {
  Head h{test::HeadFromRows(K, V), {}};
  for (int r = 0; r < Q.rows(); ++r)
    for (int j = 0; j < Q.cols(); ++j) h.stats.q_rot.push_back(static_cast<float>(Q(r, j)));
  h.stats.reference.Add(kMaxProbTap, std::make_unique<MaxProbStat>(mp));
  return h;
}

Plan RunKvzipAm(const Head& h, int budget, const Params& p) {
  auto pol = MakePolicy("kvzip-am", p);
  EXPECT_TRUE(pol.ok());
  PolicyContext ctx;
  ctx.store = &h.store;
  ctx.stats = &h.stats;
  ctx.budget = budget;
  ctx.logical_len = h.store.size();
  return pol.value()->Compress(ctx);
}

MatrixXd Outputs(const HeadStore& s, const MatrixXd& Q) { return test::HeadOutputs(s, Q); }

std::vector<float> RandomScores(int n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> U(0.f, 1.f);
  std::vector<float> s(n);
  for (float& x : s) x = U(g);
  return s;
}

// The top `budget` entries by score, increasing (KVzip's plain plan).
std::vector<int> Top(const std::vector<float>& s, int budget) {
  std::vector<int> idx(s.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return s[a] > s[b]; });
  idx.resize(budget);
  std::sort(idx.begin(), idx.end());
  return idx;
}

// exp(q.k/sqrt d - s_q) [M, n] and its row sums m(q), s_q the row's largest
// score (the fit's shift), in float64 from the definition.
std::pair<MatrixXd, Eigen::VectorXd> MassColumns(const MatrixXd& Q, const MatrixXd& K) {
  MatrixXd A = Q * K.transpose() / std::sqrt(static_cast<double>(K.cols()));
  for (int r = 0; r < A.rows(); ++r) A.row(r) = (A.row(r).array() - A.row(r).maxCoeff()).exp().matrix();
  return {A, A.rowwise().sum()};
}

TEST(KvzipAm, KeepsKvzipsPicksEachWeighingAtLeastItself) {
  MatrixXd K = Gaussian(40, 8, 61), V = Gaussian(40, 8, 62), Q = 1.5 * Gaussian(200, 8, 63);
  std::vector<float> mp = RandomScores(40, 64);
  // Entries 3 and 4: near twins, both among the picks; plain NNLS would
  // give one of them (nearly) all the weight, the floor keeps both at >= 1.
  K.row(4) = K.row(3) + 1e-3 * Gaussian(1, 8, 65);
  mp[3] = 2.f, mp[4] = 1.9f;
  const Head h = MakeHead(K, V, Q, mp);
  const Plan plan = RunKvzipAm(h, 8, {});
  EXPECT_EQ(plan.keep, Top(mp, 8));
  ASSERT_EQ(plan.set_logw.size(), 8u);
  // KKT of min ||A_kept w - m|| subject to w >= 1 (the fit, independently):
  // the gradient A^T (A w - m) is 0 where w > 1 and >= 0 where w = 1.
  const auto [A, m] = MassColumns(Q, K);
  MatrixXd Ak(A.rows(), 8);
  Eigen::VectorXd w(8);
  for (int a = 0; a < 8; ++a) {
    ASSERT_EQ(plan.set_logw[a].first, plan.keep[a]);
    Ak.col(a) = A.col(plan.keep[a]);
    w(a) = std::exp(static_cast<double>(plan.set_logw[a].second));
  }
  const Eigen::VectorXd g = Ak.transpose() * (Ak * w - m);
  const double tol = 1e-4 * (Ak.transpose() * m).cwiseAbs().maxCoeff();
  int at_floor = 0;
  for (int a = 0; a < 8; ++a) {
    EXPECT_GE(w(a), 1.0 - 1e-5) << "entry " << plan.keep[a];
    if (w(a) > 1.0 + 1e-4) {
      EXPECT_LT(std::abs(g(a)), tol) << "entry " << plan.keep[a];
    } else {
      EXPECT_GT(g(a), -tol) << "entry " << plan.keep[a];
      ++at_floor;
    }
  }
  EXPECT_GE(at_floor, 1);  // the twins: the floor binds
  double added = 0;  // mass the fit put on top of the picks'
  for (auto& [i, b] : plan.set_logw) {
    EXPECT_GE(b, -1e-6) << i;
    added += b;
  }
  EXPECT_GT(added, 0.1);  // 32 entries dropped: their mass lands somewhere
  EXPECT_EQ(plan.set_value.size(), 8u);
  // The fitted head reproduces the reference queries' outputs better than
  // KVzip's picks kept as they are.
  const test::PlanErrors e = test::ErrorsOfPlan(h.store, plan, Q);
  EXPECT_LT(e.fitted, 0.7 * e.plain) << e.fitted << " vs " << e.plain;
}

TEST(KvzipAm, DroppedDuplicatesFoldIntoTheirPicksWeight) {
  // 5 distinct keys with 1, 2, 3, 4, 6 copies (copies share the value and the
  // score 1 - u / 10): every distinct key is picked, once, with
  // b = log(copies), and the outputs are the head's exactly.
  const std::vector<int> mult = {1, 2, 3, 4, 6};
  const MatrixXd K0 = Gaussian(5, 8, 71), V0 = Gaussian(5, 8, 72), Q = 1.5 * Gaussian(64, 8, 73);
  std::vector<int> order;
  for (int u = 0; u < 5; ++u)
    for (int c = 0; c < mult[u]; ++c) order.push_back(u);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  MatrixXd K(order.size(), 8), V(order.size(), 8);
  std::vector<float> mp(order.size());
  std::vector<int> first(5, -1);
  for (size_t i = 0; i < order.size(); ++i) {
    K.row(i) = K0.row(order[i]), V.row(i) = V0.row(order[i]);
    mp[i] = 1.f - 0.1f * order[i];
    if (first[order[i]] < 0) first[order[i]] = static_cast<int>(i);
  }
  const Head h = MakeHead(K, V, Q, mp);
  for (double values : {0.0, 1.0}) {
    const Plan plan = RunKvzipAm(h, 5, {{"am-fit-values", values}});
    std::vector<int> want(first);
    std::sort(want.begin(), want.end());
    ASSERT_EQ(plan.keep, want) << "values " << values;
    for (auto& [i, b] : plan.set_logw) EXPECT_NEAR(b, std::log(double(mult[order[i]])), 1e-5) << i;
    HeadStore out = h.store;
    out.Apply(plan);
    EXPECT_LT((Outputs(out, Q) - Outputs(h.store, Q)).cwiseAbs().maxCoeff(), 1e-4) << "values " << values;
  }
}

TEST(KvzipAm, WithoutTheFitItIsKvzip) {
  const MatrixXd K = Gaussian(30, 8, 81), V = Gaussian(30, 8, 82), Q = Gaussian(90, 8, 83);
  const std::vector<float> mp = RandomScores(30, 84);
  const Head h = MakeHead(K, V, Q, mp);
  const Plan plan = RunKvzipAm(h, 6, {{"am-fit-weights", 0}, {"am-fit-values", 0}});
  EXPECT_EQ(plan.keep, Top(mp, 6));
  for (auto& [i, b] : plan.set_logw) EXPECT_EQ(b, 0.f) << i;
  EXPECT_TRUE(plan.set_value.empty());
  // Plain NNLS (no floor) may free picks; refill hands their slots to the
  // next entries in KVzip's order, so the head still holds its budget.
  const Plan nnls = RunKvzipAm(h, 6, {{"am-weight-floor", 0}});
  EXPECT_EQ(nnls.keep.size(), 6u);
  const std::vector<int> top12 = Top(mp, 12);
  for (int i : nnls.keep) EXPECT_TRUE(std::binary_search(top12.begin(), top12.end(), i)) << i;
}

TEST(KvzipAm, ABudgetHoldingEveryEntryChangesNothing) {
  const MatrixXd K = Gaussian(12, 8, 91), V = Gaussian(12, 8, 92), Q = Gaussian(40, 8, 93);
  const Head h = MakeHead(K, V, Q, RandomScores(12, 94));
  const Plan plan = RunKvzipAm(h, 12, {});
  std::vector<int> all(12);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(plan.keep, all);
  EXPECT_TRUE(plan.set_logw.empty());
  EXPECT_TRUE(plan.set_value.empty());
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
