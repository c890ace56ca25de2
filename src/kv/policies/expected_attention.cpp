// `expected-attention` (Expected Attention, kvpress; docs/policies-2.md):
// the next queries of each query head are modelled as a Gaussian from the
// pre-RoPE queries of the last --ea-window positions, carried to the
// --ea-horizon positions ahead by the average RoPE rotation A (mu' = A mu,
// Sigma' = A Sigma A^T); each key scores its expected attention
// softmax_j(mu'.k_j/sqrt d + k_j^T Sigma' k_j/(2d)), averaged over the
// group's query heads, times ||v_j||; the first --ea-sinks positions are
// kept, then the top scores. Prefill-time and decode-time.
#include "kv/numerics/expected_attention.h"

#include "kv/policies/policies.h"

namespace kvtrim::kv {

namespace {

class ExpectedAttentionPolicy : public Policy {
 public:
  ExpectedAttentionPolicy(int horizon, int sinks, bool covariance, bool value_norm, double batch)
      : horizon_(horizon), sinks_(sinks), covariance_(covariance), value_norm_(value_norm), batch_(batch) {}
  Plan Compress(const PolicyContext& ctx) override {
    const HeadStore& s = *ctx.store;
    int target = ctx.budget;
    if (ctx.phase == Phase::kDecode && batch_ > 0)  // --ea-evict-batch: room for the next steps
      target = std::max(sinks_ + 1, ctx.budget - static_cast<int>(std::ceil(batch_ * ctx.budget)) + 1);
    return Plan::Keep(KeepTop(Scores(ctx), ProtectSinksAndRecent(s, sinks_, 0), std::min(target, ctx.budget)));
  }

 private:
  std::vector<double> Scores(const PolicyContext& ctx) const;
  int horizon_, sinks_;
  bool covariance_, value_norm_;
  double batch_;
};

std::vector<double> ExpectedAttentionPolicy::Scores(const PolicyContext& ctx) const {
  const HeadStore& s = *ctx.store;
  const int n = s.size(), d = s.head_dim();
  std::vector<double> score(n, 0.0);
  if (!ctx.stats) return score;
  const HeadStats& st = *ctx.stats;
  std::vector<const float*> rows;  // the window's queries of the group, [G * d] each
  size_t gd = 0;
  for (size_t r = 0; r < st.q_pre.size(); ++r) {
    if (st.q_pre_pos[r] < 0 || st.q_pre[r].empty()) continue;
    gd = st.q_pre[r].size();
    rows.push_back(st.q_pre[r].data());
  }
  if (rows.empty() || gd % d != 0) return score;  // nothing observed: KeepTop keeps the most recent
  const int G = static_cast<int>(gd) / d;
  Eigen::MatrixXd K(n, d);
  Eigen::VectorXd b(n);
  std::vector<float> row(d);
  for (int j = 0; j < n; ++j) {
    s.ReadKey(j, row.data());
    for (int c = 0; c < d; ++c) K(j, c) = row[c];
    b(j) = s.logw(j);
  }
  const RopeSpec rope = ctx.rope ? *ctx.rope : RopeSpec{d, 10000.0, false};
  const Eigen::MatrixXd A = numerics::RopeAverage(d, rope.rot_dims > 0 ? rope.rot_dims : d, rope.base, rope.neox,
                                                  ctx.rope_len, horizon_);
  Eigen::VectorXd mean_att = Eigen::VectorXd::Zero(n);
  Eigen::MatrixXd Q(static_cast<Eigen::Index>(rows.size()), d);
  for (int g = 0; g < G; ++g) {
    for (size_t r = 0; r < rows.size(); ++r)
      for (int c = 0; c < d; ++c) Q(static_cast<Eigen::Index>(r), c) = rows[r][g * d + c];
    const numerics::Moments m = numerics::QueryMoments(Q);
    const Eigen::MatrixXd cov = covariance_ ? Eigen::MatrixXd(A * m.cov * A.transpose()) : Eigen::MatrixXd::Zero(d, d);
    mean_att += numerics::ExpectedAttention(A * m.mean, cov, K, b);
  }
  mean_att /= G;
  const std::vector<double> vn = ValueNorms(s, value_norm_ ? 1 : 0);
  for (int j = 0; j < n; ++j) score[j] = mean_att(j) * vn[j];
  return score;
}

}  // namespace

PolicyInfo ExpectedAttentionPolicyInfo() {
  return {"expected-attention",
          "Expected Attention: keys scored by the attention the next queries (a Gaussian from the last pre-RoPE "
          "queries, rotated to the positions ahead) can expect, times ||v||. Prefill-time and decode-time.",
          {{"ea-window", 128, "recent positions whose pre-RoPE queries estimate the query distribution", 1, 1e6},
           {"ea-horizon", 512, "future positions the RoPE rotation is averaged over", 1, 1e6},
           {"ea-sinks", 4, "first positions always kept", 0, 1e6},
           {"ea-covariance", 1, "1: use the query covariance (0: the mean query only)", 0, 1},
           {"ea-value-norm", 1, "1: scores times ||v_j||", 0, 1},
           Real({"ea-evict-batch", 0, "decode-time: fraction of the budget evicted at once when full (0: one entry per step)",
            0, 1})},
          [](const Params& p) {
            return std::make_unique<ExpectedAttentionPolicy>(
                static_cast<int>(p.at("ea-horizon")), static_cast<int>(p.at("ea-sinks")), p.at("ea-covariance") >= 0.5, p.at("ea-value-norm") >= 0.5,
                p.at("ea-evict-batch"));
          },
          [](const Params& p) {
            return PolicyTraits{.needs = {.query_window = static_cast<int>(p.at("ea-window"))},
                                .protected_entries = static_cast<int>(p.at("ea-sinks"))};
          }};
}

}  // namespace kvtrim::kv
