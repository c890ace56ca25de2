// Attention Matching's scores pass (kv/policies/am_scores.h) against float64
// sums: the masses, full outputs, RMS ranking scores and stored scores of a
// block with non-zero log-weights, copies of a key and a query count that
// is not a multiple of the pass's row block; and the attention columns the
// fit reads against the exponentials of the stored scores; the same pass
// with its products in bf16 against float64 sums of the rounded operands,
// and the setting that asks for it reaching a policy; the pass spread over a
// pool's threads against the pass on one, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "head_reference.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/numerics/eigen.h"
#include "kv/policies/am_scores.h"
#include "kernels/thread_pool.h"

namespace kvtrim::kv {
namespace {

using Eigen::MatrixXd;
using Eigen::MatrixXf;
using Eigen::VectorXd;

struct Block {
  MatrixXf Q, K, V;
  VectorXd b0;
  std::vector<int> of;  // entry -> distinct key
  int nu = 0;
};

// M = 300 queries (two full blocks of 128 and a tail), n = 70 entries of
// head dim 32, entries 5 and 9 copies of entry 3, some log-weights set.
Block MakeBlock() {
  Block b;
  b.Q = (test::GaussianMatrix(300, 32, 1, 0.25)).cast<float>();
  b.K = test::GaussianMatrix(70, 32, 2).cast<float>();
  b.V = test::GaussianMatrix(70, 32, 3).cast<float>();
  b.K.row(5) = b.K.row(3);
  b.K.row(9) = b.K.row(3);
  b.b0 = VectorXd::Zero(70);
  b.b0(3) = std::log(4.0), b.b0(10) = -2.0, b.b0(40) = 1.5;
  std::vector<int> rep;
  for (int i = 0; i < 70; ++i) {
    if (i == 5 || i == 9) {
      b.of.push_back(b.of[3]);
    } else {
      b.of.push_back(static_cast<int>(rep.size()));
      rep.push_back(i);
    }
  }
  b.nu = static_cast<int>(rep.size());
  return b;
}

// The float64 reference over the scores S (computed by the caller).
void ExpectMatches(const Block& b, const MatrixXd& S, const AmScores& r, double rel_y_tol, double y_abs_tol) {
  const int M = static_cast<int>(S.rows()), n = static_cast<int>(S.cols());
  VectorXd rms = VectorXd::Zero(b.nu);
  for (int q = 0; q < M; ++q) {
    double shift = -1e300;
    for (int j = 0; j < n; ++j) shift = std::max({shift, S(q, j), S(q, j) + b.b0(j)});
    VectorXd e(n), w = VectorXd::Zero(b.nu), y = VectorXd::Zero(b.V.cols());
    for (int j = 0; j < n; ++j) e(j) = std::exp(S(q, j) + b.b0(j) - shift);
    const double m = e.sum();
    for (int j = 0; j < n; ++j) y += e(j) / m * b.V.row(j).cast<double>().transpose(), w(b.of[j]) += e(j) / m;
    rms += w.cwiseAbs2();
    ASSERT_NEAR(r.shift(q), shift, 1e-5 * std::abs(shift) + 1e-5) << "query " << q;
    ASSERT_NEAR(r.mass(q), m, 1e-5 * m) << "query " << q;
    for (int c = 0; c < y.size(); ++c) ASSERT_NEAR(r.Y(q, c), y(c), rel_y_tol * std::abs(y(c)) + y_abs_tol) << q << " " << c;
  }
  for (int u = 0; u < b.nu; ++u) EXPECT_NEAR(r.rms(u), rms(u), 1e-4 * rms(u)) << "key " << u;
}

TEST(AmScores, PassMatchesFloat64Sums) {
  const Block b = MakeBlock();
  const MatrixXd S = b.Q.cast<double>() * b.K.cast<double>().transpose();
  MatrixXf stored(300, 70);
  const AmScores r = AmScoresPass(b.Q, b.K, b.V, b.b0, b.of, b.nu, true, stored);
  EXPECT_LT((stored.cast<double>() - S).cwiseAbs().maxCoeff(), 1e-5 * S.cwiseAbs().maxCoeff());
  ExpectMatches(b, S, r, 1e-4, 1e-6);
}

TEST(AmScores, ColumnsAreTheExponentialsOfTheStoredScores) {
  // A_qu = row_scale_q exp(S_q,rep[u] - s_q): a key's column against the
  // float exp of the stored score, and a scaled copy.
  const Block b = MakeBlock();
  MatrixXf S(300, 70);
  const AmScores r = AmScoresPass(b.Q, b.K, b.V, b.b0, b.of, b.nu, false, S);
  EXPECT_EQ(r.rms.size(), 0);
  std::vector<int> rep;
  for (int i = 0; i < 70; ++i)
    if (i != 5 && i != 9) rep.push_back(i);
  AmColumns cols(S, rep, r.shift_f, Eigen::VectorXf());
  Eigen::VectorXf scale = Eigen::VectorXf::LinSpaced(300, 0.5f, 2.0f);
  AmColumns scaled(S, rep, r.shift_f, scale);
  for (int u : {0, 3, 40, b.nu - 1}) {
    const Eigen::VectorXf& a = cols.A(u);
    for (int q = 0; q < 300; q += 37) {
      const double want = std::exp(static_cast<double>(S(q, rep[u])) - r.shift_f(q));
      ASSERT_NEAR(a(q), want, 2e-6 * want + 1e-30) << u << " " << q;
      ASSERT_NEAR(scaled.A(u)(q), scale(q) * a(q), 1e-6 * scale(q) * a(q) + 1e-30);
    }
    EXPECT_EQ(cols.S(u), S.col(rep[u]));
  }
  EXPECT_EQ(cols.computed(), 4);
}

// x rounded to bf16 (round to nearest even) by Eigen's type: an independent rounding.
MatrixXf RoundBf16(const MatrixXf& x) {
  return x.unaryExpr([](float v) { return static_cast<float>(Eigen::bfloat16(v)); });
}

TEST(AmScores, Bf16PassMatchesFloat64SumsOfRoundedOperands) {
  if (!AmScoresBf16(32)) GTEST_SKIP() << "no AVX512-BF16 on this CPU: the scores stay f32";
  // The scores are the float64 products of the rounded queries and keys (a
  // product of two bf16 numbers is exact in float; 32 of them summed in
  // float); the masses, ranking and shifts follow from those scores exactly
  // as in f32. The outputs multiply the exponentials rounded to bf16 (a
  // relative error of at most 2^-8 each: bf16's unit roundoff, an 8-bit
  // significand) by the rounded values: within 2^-8 max|v| of the float64
  // outputs of the rounded values.
  Block b = MakeBlock();
  const MatrixXd S = RoundBf16(b.Q).cast<double>() * RoundBf16(b.K).cast<double>().transpose();
  MatrixXf stored(300, 70);
  const AmScores r = AmScoresPass(b.Q, b.K, b.V, b.b0, b.of, b.nu, true, stored, true);
  EXPECT_LT((stored.cast<double>() - S).cwiseAbs().maxCoeff(), 1e-6 * S.cwiseAbs().maxCoeff());
  // Not the f32 products: the unrounded scores differ by far more.
  const MatrixXd S32 = b.Q.cast<double>() * b.K.cast<double>().transpose();
  EXPECT_GT((stored.cast<double>() - S32).cwiseAbs().maxCoeff(), 1e-4 * S32.cwiseAbs().maxCoeff());
  b.V = RoundBf16(b.V);
  ExpectMatches(b, S, r, 1e-4, std::ldexp(1.0, -8) * b.V.cwiseAbs().maxCoeff());
}

// A policy that records whether its context allowed bf16 products.
class Bf16Probe : public Policy {
 public:
  explicit Bf16Probe(bool* seen) : seen_(seen) {}
  Plan Compress(const PolicyContext& ctx) override {
    *seen_ = ctx.bf16_products;
    return Plan::Keep({0});
  }

 private:
  bool* seen_;
};

TEST(AmScores, Bf16AttentionSettingReachesThePolicy) {
  // `pass` (the default) and `all` allow the reference computations' bf16
  // products, `off` keeps them f32.
  for (const auto& [setting, want] : std::vector<std::pair<std::string, bool>>{{"pass", true}, {"all", true}, {"off", false}}) {
    bool seen = !want;
    KvOptions o;
    o.ratio = 0.5;
    o.bf16_attention = setting;
    auto c = Compressor::CreateFor(std::make_unique<Bf16Probe>(&seen), o, 1, 1, 1, 4);
    ASSERT_TRUE(c.ok()) << c.error().message;
    KvCache cache(1, 1, 4);
    const std::vector<float> row(4, 0.5f);
    for (int i = 0; i < 4; ++i) cache.head(0, 0).Append(row.data(), row.data(), i, 0.f);
    cache.AdvanceLogical(4);
    ASSERT_TRUE(c.value()->CompressPrefill(cache).ok());
    EXPECT_EQ(seen, want) << setting;
  }
}

// The pass's blocks over a pool (a head compacted alone, PolicyContext::pool)
// give what one thread gives, bit for bit: each block's share of the keys'
// sums of squares is added in block order either way. 300 queries are three
// blocks (two of 128 and a tail); f32 and, where the CPU has them, bf16
// products; with and without the ranking.
TEST(AmScores, PoolGivesTheOneThreadNumbersBitForBit) {
  const Block b = MakeBlock();
  for (int threads : {2, 3, 4})
    for (bool bf16 : {false, true})
      for (bool rank : {true, false}) {
        kernels::ThreadPool pool(threads);
        MatrixXf s1(300, 70), s2(300, 70);
        const AmScores one = AmScoresPass(b.Q, b.K, b.V, b.b0, b.of, b.nu, rank, s1, bf16);
        const AmScores many = AmScoresPass(b.Q, b.K, b.V, b.b0, b.of, b.nu, rank, s2, bf16, &pool);
        const std::string at = std::to_string(threads) + " threads, bf16 " + std::to_string(bf16);
        EXPECT_EQ(s1, s2) << at;
        EXPECT_EQ(one.shift_f, many.shift_f) << at;
        EXPECT_EQ(one.mass, many.mass) << at;
        EXPECT_EQ(one.Y, many.Y) << at;
        EXPECT_EQ(one.rms, many.rms) << at;
        EXPECT_EQ(one.rms.size(), rank ? b.nu : 0) << at;
      }
}

}  // namespace
}  // namespace kvtrim::kv
