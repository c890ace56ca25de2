// `razor` (RazorAttention, METHODS.md section 2): retrieval KV heads (from the
// model profile) keep every entry; every other KV head keeps S sinks, a
// recent window L = max(S0, N / C) and ONE compensation entry standing for
// everything in between (mean key, mean value, b = log N_d: a Plan merge).
// Prefill-time; with --razor-fold also decode-time: the entry leaving a
// window is merged into the compensation entry (a running mean).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

#include "kv/numerics/cardinality.h"
#include "kv/policies/policies.h"
#include "kv/profile.h"

namespace kvtrim::kv {
namespace {

std::string Fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.4g", x);
  return b;
}

class RazorPolicy : public Policy {
 public:
  explicit RazorPolicy(const Params& p)
      : sinks_(static_cast<int>(p.at("sinks"))),
        min_window_(static_cast<int>(p.at("min-window"))),
        factor_(p.at("compress-factor")),
        echo_frac_(p.at("echo-frac")),
        induction_frac_(p.at("induction-frac")) {}

  // Castes: retrieval heads whole, every other head S + L + 1 (once prepared).
  static budget::Spec Castes(std::vector<char> whole, int caste_budget) {
    budget::Spec s;
    s.kind = budget::Kind::kCastes;
    s.whole = std::move(whole);
    s.caste_budget = caste_budget;
    return s;
  }

  void SetProfile(std::shared_ptr<const ModelProfile> p) override {
    profile_ = std::move(p);
    if (profile_)
      heads_ = SelectRetrievalHeads(profile_->echo, profile_->induction, profile_->n_layer, profile_->n_head,
                                    profile_->n_head_kv, echo_frac_, induction_frac_);
    UpdateBudget();
  }

  Status Prepare(const CompressionTarget& t) override {
    const Status st = SolveWindow(t);
    UpdateBudget();
    return st;
  }

  // L from the target: f N + (1 - f)(S + L + 1) = r N.
  Status SolveWindow(const CompressionTarget& t) {
    if (!profile_) return MakeError("razor: no model profile (give --profile FILE, or run through an Engine)");
    if (profile_->n_layer != t.n_layer || profile_->n_head_kv != t.n_head_kv)
      return MakeError("razor: the profile's head layout does not match the cache");
    n_head_kv_ = t.n_head_kv;
    const double n = static_cast<double>(t.n);
    const double r = budget::Ratio(t.target, t.n);
    if (r >= 1.0 && t.target.ratio_explicit && t.target.tokens <= 0) {  // ratio 1 asked for: keep everything
      window_ = -1;
      return {};
    }
    if (r >= 1.0) {  // no target: the compression factor decides
      window_ = std::max(min_window_, static_cast<int>(std::floor(n / factor_)));
      return {};
    }
    // f N + (1 - f)(S + L + 1) = r N, in whole heads (entries are equal-sized).
    const double total = static_cast<double>(heads_.kv.size());
    const double ret = heads_.f_ret * total;
    const double others = total - ret;
    const double per_other = others > 0 ? (r * n * total - ret * n) / others : -1.0;
    const double L = per_other - sinks_ - 1;
    const double min_r = MinReachableRatio(heads_, t.n, sinks_, min_window_);
    if (others <= 0 || L < min_window_ - 1e-9 || r < min_r - 1e-12) {
      return MakeUnreachable("razor: retention ratio " + Fmt(r) + " is below the " + Fmt(min_r) + " reachable at N = " +
                             std::to_string(t.n) + ": " + std::to_string(static_cast<int>(ret)) + " of " +
                             std::to_string(static_cast<int>(total)) + " KV heads are retrieval heads kept whole (f_ret " +
                             Fmt(heads_.f_ret) + "), every other keeps at least " + std::to_string(sinks_) + " sinks + " +
                             std::to_string(min_window_) + " window + 1 compensation entries");
    }
    window_ = static_cast<int>(std::floor(L + 1e-9));
    return {};
  }

  // The castes as the profile and the window now stand (traits().budget).
  void UpdateBudget() { mutable_traits().budget = Castes(heads_.kv, window_ < 0 ? -1 : sinks_ + window_ + 1); }

  Plan Compress(const PolicyContext& ctx) override {
    const int n = ctx.store->size();
    if (window_ < 0 || IsRetrieval(ctx.layer, ctx.head) || n <= sinks_ + window_ + 1) return {};
    Plan plan;
    plan.noop = false;
    MergeEntry comp;  // [S, n - L): the compensation entry (at decode: it and the entries leaving the window)
    for (int i = 0; i < n; ++i) {
      if (i < sinks_ || i >= n - window_) plan.keep.push_back(i);
      else comp.sources.push_back(i);
    }
    if (ctx.phase == Phase::kDecode) return Fold(*ctx.store, std::move(plan), comp.sources);
    plan.merge.push_back(std::move(comp));
    return plan;
  }

  // Decode-time: the same cardinality-weighted mean as the merge, written over
  // entry S (the compensation entry) so the plan only evicts: no new store
  // per step. Its position stays where prefill put it (metadata only).
  static Plan Fold(const HeadStore& s, Plan plan, const std::vector<int>& sources) {
    if (sources.empty()) return plan;  // a compensation entry over zero tokens: nothing to fold
    const int d = s.head_dim();
    std::vector<double> k(d, 0.0), v(d, 0.0), b(sources.size()), w;
    for (size_t a = 0; a < sources.size(); ++a) b[a] = s.logw(sources[a]);
    // Normalized cardinalities, finite even when every exp(b) underflows.
    const double log_card = numerics::CardinalityWeights(b, &w);
    std::vector<float> row(d);
    for (size_t a = 0; a < sources.size(); ++a) {
      s.ReadKey(sources[a], row.data());
      for (int j = 0; j < d; ++j) k[j] += w[a] * row[j];
      s.ReadValue(sources[a], row.data());
      for (int j = 0; j < d; ++j) v[j] += w[a] * row[j];
    }
    std::vector<float> kf(d), vf(d);
    for (int j = 0; j < d; ++j) kf[j] = static_cast<float>(k[j]), vf[j] = static_cast<float>(v[j]);
    const int at = sources.front();
    plan.keep.insert(std::lower_bound(plan.keep.begin(), plan.keep.end(), at), at);
    plan.set_key.emplace_back(at, std::move(kf));
    plan.set_value.emplace_back(at, std::move(vf));
    plan.set_logw.emplace_back(at, static_cast<float>(log_card));
    return plan;
  }

 private:
  bool IsRetrieval(int layer, int head) const {
    const size_t i = static_cast<size_t>(layer) * n_head_kv_ + head;
    return i < heads_.kv.size() && heads_.kv[i];
  }
  int sinks_, min_window_;
  double factor_, echo_frac_, induction_frac_;
  std::shared_ptr<const ModelProfile> profile_;
  RetrievalHeads heads_;
  int n_head_kv_ = 1;
  int window_ = -1;  // L, set by Prepare; -1: not prepared (nothing compressed)
};

}  // namespace

PolicyInfo RazorPolicyInfo() {
  return {"razor",
          "RazorAttention: retrieval heads (model profile) keep all; others sinks + window + one compensation entry.",
          {{"sinks", 4, "sink tokens kept at the start"},
           {"min-window", 64, "razor: minimum recent window S0", 0, 1e9},
           Real({"compress-factor", 5, "razor: window N / C on non-retrieval heads (used when no --kv-ratio/--kv-budget)", 1, 1e9}),
           Real({"echo-frac", 0.01, "razor: top fraction of query heads by echo score", 1e-9, 1}),
           Real({"induction-frac", 0.14, "razor: top fraction of query heads by induction score", 1e-9, 1}),
           {"razor-fold", 0, "razor: fold tokens leaving a window into the compensation entry at decode time", 0, 1, {}, true}},
          [](const Params& p) { return std::make_unique<RazorPolicy>(p); },
          [](const Params& p) {
            return PolicyTraits{.decode_time = p.at("razor-fold") != 0,
                                .wants_profile = true,
                                .protected_entries = static_cast<int>(p.at("sinks")),
                                .budget = RazorPolicy::Castes({}, -1)};
          }};
}

}  // namespace kvtrim::kv
