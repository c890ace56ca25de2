// Numeric guards (docs/reliability.md): the degenerate inputs where a method
// could divide by zero or take log 0 give finite entries or a clear error,
// never NaN in the cache; --check-finite names the policy that breaks it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/attention.h"
#include "kernels/ops.h"
#include "kv/check.h"
#include "kv/compressor.h"
#include "kv/numerics/cardinality.h"
#include "kv/numerics/leverage.h"
#include "kv/numerics/nnls.h"
#include "kv/profile.h"
#include "test_util.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

TEST(NumericGuards, LeverageOfRankDeficientKeysIsFiniteAndSumsToTheRank) {
  // 24 keys of dimension 8 spanning 2 directions (many duplicates, zero columns).
  const int n = 24, d = 8;
  std::vector<float> K(n * d, 0.f);
  for (int i = 0; i < n; ++i) {
    K[i * d + 0] = static_cast<float>(i % 3);
    K[i * d + 5] = static_cast<float>((i % 4) - 1);
  }
  for (int m = 0; m < static_cast<int>(numerics::LeverageMethodNames().size()); ++m) {
    numerics::LeverageOptions o;
    o.method = static_cast<numerics::LeverageMethod>(m);
    o.sketch_dim = 4;
    auto lev = numerics::LeverageScores(K.data(), n, d, o);
    double sum = 0;
    for (double x : lev) {
      ASSERT_TRUE(std::isfinite(x)) << numerics::LeverageMethodNames()[m];
      EXPECT_GE(x, -1e-12);
      EXPECT_LE(x, 1 + 1e-9);
      sum += x;
    }
    EXPECT_NEAR(sum, 2.0, 1e-6) << numerics::LeverageMethodNames()[m];  // trace of a rank-2 projector
  }
  // Non-finite keys: all zeros rather than NaN.
  K[7] = std::numeric_limits<float>::quiet_NaN();
  for (double x : numerics::LeverageScores(K.data(), n, d, {})) EXPECT_EQ(x, 0.0);
}

TEST(NumericGuards, NnlsWithAnAllZeroSolution) {
  // min ||A x - b||, x >= 0 with A^T b <= 0: the solution is x = 0 exactly.
  Eigen::MatrixXd A = Eigen::MatrixXd::Identity(4, 4);
  Eigen::VectorXd b = -Eigen::VectorXd::Ones(4);
  auto r = numerics::Nnls(A, b);
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(r.x, Eigen::VectorXd::Zero(4));
  // b = 0 and A = 0 (a zero Gram matrix): zero, finite.
  auto z = numerics::Nnls(Eigen::MatrixXd::Zero(3, 5), Eigen::VectorXd::Zero(3));
  EXPECT_EQ(z.x, Eigen::VectorXd::Zero(5));
  EXPECT_TRUE(z.x.allFinite());
}

TEST(NumericGuards, CardinalityWeightsNeverDivideByZero) {
  std::vector<double> w;
  // Every exp(b) underflows in double: the same weights as b = (0, log 3).
  double ls = numerics::CardinalityWeights({-1e4, -1e4 + std::log(3.0)}, &w);
  EXPECT_NEAR(w[0], 0.25, 1e-12);
  EXPECT_NEAR(w[1], 0.75, 1e-12);
  EXPECT_NEAR(ls, -1e4 + std::log(4.0), 1e-9);
  // All zero cardinalities: uniform, log-sum -inf; NaN counts as -inf.
  ls = numerics::CardinalityWeights({-INFINITY, NAN, -INFINITY}, &w);
  EXPECT_EQ(ls, -INFINITY);
  for (double x : w) EXPECT_DOUBLE_EQ(x, 1.0 / 3);
  ls = numerics::CardinalityWeights({1.0, INFINITY}, &w);
  EXPECT_EQ(w, (std::vector<double>{0.0, 1.0}));
  EXPECT_EQ(numerics::CardinalityWeights({}, &w), -INFINITY);
}

// A head of 4 entries with keys/values e_i * (i + 1) and the given log-weights.
HeadStore FourEntries(float b, int d = 4) {
  HeadStore h(d, GgmlType::F32);
  for (int i = 0; i < 4; ++i) {
    std::vector<float> k(d, 0.f), v(d, 0.f);
    k[i] = static_cast<float>(i + 1);
    v[i] = static_cast<float>(-(i + 1));
    h.Append(k.data(), v.data(), i, b);
  }
  return h;
}

TEST(NumericGuards, MergeWhoseWeightsVanish) {
  for (float b : {-1e4f, kNegInf}) {
    HeadStore h = FourEntries(b);
    Plan p;
    p.noop = false;
    p.keep = {3};
    p.merge.push_back({{0, 1, 2}, {}});
    ASSERT_TRUE(ValidatePlan(p, h.size(), 4).ok());
    h.Apply(p);
    ASSERT_EQ(h.size(), 2);
    ASSERT_TRUE(CheckHead(h).ok()) << CheckHead(h).message();
    // Equal cardinalities: the plain mean (1/3, 2/3, 1, 0), position 1.
    std::vector<float> k(4), v(4);
    h.ReadKey(0, k.data());
    h.ReadValue(0, v.data());
    for (int j = 0; j < 3; ++j) {
      EXPECT_NEAR(k[j], (j + 1) / 3.0, 1e-6) << b;
      EXPECT_NEAR(v[j], -(j + 1) / 3.0, 1e-6) << b;
    }
    EXPECT_EQ(h.pos(0), 1);
    if (b == kNegInf) EXPECT_EQ(h.logw(0), kNegInf);  // no cardinality: still invisible
    else EXPECT_NEAR(h.logw(0), -1e4 + std::log(3.0), 2e-3);
  }
}

TEST(NumericGuards, RazorCompensationOverVanishingAndZeroCardinality) {
  // Razor's decode-time fold (a compensation entry whose tokens have
  // cardinality exp(-1e4) or 0) stays finite; the key is their mean.
  // 1 layer, 4 query heads, 2 KV heads: KV head 1 is retrieval, 0 is not.
  auto prof = std::make_shared<ModelProfile>();
  prof->n_layer = 1, prof->n_head = 4, prof->n_head_kv = 2, prof->ctx = 64, prof->probe_len = 15;
  prof->echo = {0.1, 0.2, 0.9, 0.3};
  prof->induction = {0.1, 0.2, 0.3, 0.8};
  prof->heads = SelectRetrievalHeads(prof->echo, prof->induction, 1, 4, 2, prof->echo_frac, prof->induction_frac);
  for (float b : {-1e4f, kNegInf}) {
    KvOptions o;
    o.policy = "razor";
    o.check_finite = true;
    o.params = {{"sinks", 1}, {"min-window", 2}, {"compress-factor", 1000}, {"razor-fold", 1}};
    auto c = Compressor::Create(o, 1, 2, 2, 2);
    ASSERT_TRUE(c.ok()) << c.error().message;
    c.value()->policy().SetProfile(prof);
    KvCache cache(1, 2, 2);
    for (int i = 0; i < 12; ++i) {
      const float k[2] = {static_cast<float>(i), 1.f}, v[2] = {1.f, static_cast<float>(-i)};
      for (int hh = 0; hh < 2; ++hh) cache.head(0, hh).Append(k, v, i, b);
      cache.AdvanceLogical(1);
      Status st = i < 8 ? Status{} : c.value()->AfterDecodeStep(cache);
      if (i == 7) st = c.value()->CompressPrefill(cache);
      ASSERT_TRUE(st.ok()) << st.message();
    }
    const HeadStore& h = cache.head(0, 0);
    ASSERT_EQ(h.size(), 4);  // sink, compensation, window of 2
    ASSERT_TRUE(CheckHead(h).ok()) << CheckHead(h).message();
    std::vector<float> k(2);
    h.ReadKey(1, k.data());
    if (b == kNegInf) {
      // No cardinality anywhere: each fold is the plain mean of the two it
      // joins: 3 (prefill merge of 1..5), then (3 + 6) / 2, ... = 7.9375.
      EXPECT_NEAR(k[0], 7.9375, 1e-5);
      EXPECT_EQ(h.logw(1), kNegInf);
    } else {
      // Cardinality-weighted: the mean of positions 1..9 (log-weights near
      // -1e4 are floats, spaced ~1e-3 apart: cardinalities to ~0.1%).
      EXPECT_NEAR(k[0], (1 + 9) / 2.0, 5e-3);
      EXPECT_NEAR(h.logw(1), -1e4 + std::log(9.0), 2e-3);
    }
  }
}

TEST(NumericGuards, SoftmaxAndAttentionOfAnAllMinusInfRow) {
  float row[5] = {kNegInf, kNegInf, kNegInf, kNegInf, kNegInf};
  kernels::Softmax(row, 5);
  for (float x : row) EXPECT_EQ(x, 0.f);
  // Every entry of a head masked (log-weight -inf): the output is zero, not NaN.
  for (int d : {4, 8}) {  // the generic and the vectorized path
    HeadStore h = FourEntries(kNegInf, d);
    std::vector<float> q(2 * d, 1.f), out(2 * d, 7.f), scratch(2 * 4);
    kernels::AttendOne(h.View(), q.data(), 2, 0.5f, out.data(), scratch.data());
    for (float x : out) EXPECT_EQ(x, 0.f) << d;
    // Causal prefill over the same head (one query position, all masked).
    std::fill(out.begin(), out.end(), 7.f);
    kernels::AttendCausal(h.View(), q.data(), 1, 2, 2 * d, 3, 0.5f, out.data(), 2 * d);
    for (float x : out) EXPECT_EQ(x, 0.f) << d;
  }
}

TEST(NumericGuards, ValidatePlanRefusesNonFiniteNumbers) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto refused = [](const Plan& p, const std::string& what) {
    Status st = ValidatePlan(p, 4, 4);
    ASSERT_FALSE(st.ok()) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  };
  Plan p = Plan::Keep({0, 1});
  p.set_logw = {{1, nan}};
  refused(p, "log-weight");
  p.set_logw = {{1, kNegInf}};  // zero cardinality is allowed
  EXPECT_TRUE(ValidatePlan(p, 4, 4).ok());
  p = Plan::Keep({0});
  p.set_value = {{0, {1.f, nan, 0.f, 0.f}}};
  refused(p, "non-finite value");
  p.set_value = {{0, {1.f, 2.f}}};
  refused(p, "dimension 2");
  p.set_value = {{-1, {1.f, 2.f, 3.f, 4.f}}};
  refused(p, "entry -1");
  p = Plan::Keep({0});
  p.set_key = {{4, {1.f, 2.f, 3.f, 4.f}}};
  refused(p, "entry 4");
  p = Plan::Keep({0});
  p.merge.push_back({{1, 2}, {0.5f, std::numeric_limits<float>::infinity()}});
  refused(p, "key weight");
  p = Plan::Keep({0});
  p.add.push_back({{0.f, 0.f, 0.f, 0.f}, {0.f, nan, 0.f, 0.f}, 5, 0.f});
  refused(p, "non-finite value");
}

// A policy that merges its first two entries with key weights so large that
// the merged key overflows to inf: a plan ValidatePlan accepts (finite
// numbers) that leaves a non-finite cache.
class OverflowPolicy : public Policy {
 public:
  Plan Compress(const PolicyContext& ctx) override {
    Plan p;
    p.noop = false;
    p.merge.push_back({{0, 1}, {3e38f, 3e38f}});
    for (int i = 2; i < ctx.store->size(); ++i) p.keep.push_back(i);
    return p;
  }
};

TEST(NumericGuards, CheckFiniteNamesThePolicyThatBrokeTheCache) {
  for (bool check : {true, false}) {
    KvOptions o;
    o.policy = "window";
    o.params = {{"sinks", 0}};
    o.budget_tokens = 3;
    o.check_finite = check;
    auto c = Compressor::Create(o, 1, 1, 1, 4);
    ASSERT_TRUE(c.ok());
    c.value()->UsePolicy(std::make_unique<OverflowPolicy>(), "overflow-test");
    KvCache cache(1, 1, 4);
    for (int i = 0; i < 4; ++i) {
      const float k[4] = {1.f, 2.f, 3.f, 4.f};
      cache.head(0, 0).Append(k, k, i, 0.f);
      cache.AdvanceLogical(1);
    }
    Status st = c.value()->CompressPrefill(cache);
    if (!c.value()->check_finite()) {  // a release build without the flag: not verified
      EXPECT_TRUE(st.ok());
      EXPECT_FALSE(CheckHead(cache.head(0, 0)).ok());
      continue;
    }
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("policy 'overflow-test'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("layer 0 head 0"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("key component 0 of entry 0"), std::string::npos) << st.message();
  }
}

TEST(NumericGuards, CliCheckFiniteFlag) {
  // The flag reaches the compressor: a merging policy under it runs clean,
  // with the same output as without it.
  const std::string cmd = std::string(KVTRIM_CLI) + " run -m " + test::ModelPath("stories260K.gguf") +
                          " -p 'Once upon a time' -n 8 --temp 0 --kv kvslimmer --kv-ratio 0.5";
  auto plain = test::RunCommand(cmd + " 2>/dev/null");
  auto checked = test::RunCommand(cmd + " --check-finite 2>/dev/null");
  ASSERT_EQ(plain.code, 0) << plain.out;
  ASSERT_EQ(checked.code, 0) << checked.out;
  EXPECT_EQ(plain.out, checked.out);
  EXPECT_FALSE(plain.out.empty());
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
