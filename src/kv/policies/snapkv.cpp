// `snapkv`: the last w prompt positions observe every earlier key; scores
// summed over window queries and group heads, average-pooled; keep the
// window plus the top (budget - w). Prefill-time only.
#include "kv/policies/policies.h"
#include "kv/taps/window_mass.h"

namespace kvtrim::kv {

namespace {

// The window-mass tap's values (none when the tap is absent).
const std::vector<float>& WindowMass(const PolicyContext& ctx) {
  static const std::vector<float> kNone;
  const auto* obs = ctx.stats->taps.Get<WindowMassStat>(kWindowMassTap);
  return obs ? obs->values() : kNone;
}

// Observation-window mass on every entry before the window, average-pooled
// (kernel k, zero padding as avg_pool1d with count_include_pad).
// With --value-norm, each entry's mass is scaled by its value's norm first.
std::vector<double> Scores(const PolicyContext& ctx, int window, int kernel, int value_norm) {
  const int n = ctx.store->size();
  const int prefix = std::max(0, n - window);
  std::vector<double> raw(n, 0.0), score(n, 0.0);
  const std::vector<float>& obs = WindowMass(ctx);
  for (int i = 0; i < n && i < static_cast<int>(obs.size()); ++i) raw[i] = obs[i];
  if (value_norm != 0) {
    const std::vector<double> vn = ValueNorms(*ctx.store, value_norm);
    for (int i = 0; i < n; ++i) raw[i] *= vn[i];
  }
  const int half = kernel / 2;
  for (int i = 0; i < prefix; ++i) {
    double s = 0;
    for (int j = i - half; j <= i + half; ++j)
      if (j >= 0 && j < prefix) s += raw[j];
    score[i] = s / kernel;
  }
  return score;
}

}  // namespace

PolicyTraits SnapkvPolicy::Traits(int window) {
  return {.decode_time = false,
          .needs = {.taps = {{kWindowMassTap, window}}},
          .protected_entries = window,
          .scores_entries = true};
}

EntryScores SnapkvPolicy::Score(const PolicyContext& ctx) {
  // The window's own entries are protected; they carry the mass the window
  // gave them, so the per-head normalisation divides by the window's whole
  // mass (AdaKV's softmax over all keys) and a head looking mostly at its
  // window draws little budget.
  EntryScores e{Scores(ctx, window_, kernel_, value_norm_), ProtectSinksAndRecent(*ctx.store, 0, window_), true};
  const int n = ctx.store->size();
  const std::vector<float>& obs = WindowMass(ctx);
  for (int i = std::max(0, n - window_); i < n && i < static_cast<int>(obs.size()); ++i) e.score[i] = obs[i];
  return e;
}

Plan SnapkvPolicy::Compress(const PolicyContext& ctx) {
  std::vector<bool> prot = ProtectSinksAndRecent(*ctx.store, 0, window_);
  return Plan::Keep(KeepTop(Scores(ctx, window_, kernel_, value_norm_), prot, ctx.budget));
}

PolicyInfo SnapkvPolicyInfo() {
  return {"snapkv", "Observation window of the last prompt positions votes for keys (pooled); prefill-time.",
          {{"obs-window", 32, "observation window w (last prompt positions)", 1, 1e6},
           Odd({"pool-kernel", 5, "average-pooling kernel (odd)", 1, 101}),
           {"value-norm", 0, "scale attention scores by ||v_j||: none, l2, l1", 0, 2, ValueNormNames()}},
          [](const Params& p) {
            return std::make_unique<SnapkvPolicy>(static_cast<int>(p.at("obs-window")), static_cast<int>(p.at("pool-kernel")),
                                                  static_cast<int>(p.at("value-norm")));
          },
          [](const Params& p) { return SnapkvPolicy::Traits(static_cast<int>(p.at("obs-window"))); }};
}

}  // namespace kvtrim::kv
