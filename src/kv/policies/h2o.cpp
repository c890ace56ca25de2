// `h2o`: heavy hitters by accumulated attention mass plus the most recent
// tokens, with a sink guard protecting the first S tokens permanently.
#include <cmath>

#include "kv/policies/policies.h"
#include "kv/taps/mass.h"

namespace kvtrim::kv {
namespace {

class H2oPolicy : public Policy {
 public:
  H2oPolicy(double heavy_ratio, int sink_guard, int value_norm)
      : heavy_ratio_(heavy_ratio), sinks_(sink_guard), value_norm_(value_norm) {}
  // For --head-budget adaptive: the (value-scaled) mass, sinks and the newest
  // entry protected (the recent share depends on the budget: Compress sets it).
  EntryScores Score(const PolicyContext& ctx) override {
    return {MassScores(ctx), ProtectSinksAndRecent(*ctx.store, sinks_, 0), true};
  }
  Plan Compress(const PolicyContext& ctx) override {
    const HeadStore& s = *ctx.store;
    // Budget split: sinks, then heavy and recent shares of the remainder.
    const int rest = std::max(0, ctx.budget - sinks_);
    const int heavy = static_cast<int>(std::lround(rest * heavy_ratio_));
    const int recent = rest - heavy;
    return Plan::Keep(KeepTop(MassScores(ctx), ProtectSinksAndRecent(s, sinks_, recent), ctx.budget));
  }

 private:
  std::vector<double> MassScores(const PolicyContext& ctx) const {
    const HeadStore& s = *ctx.store;
    std::vector<double> score(s.size(), 0.0);
    if (const auto* mass = ctx.stats->taps.Get<MassStat>(kMassTap))
      for (int i = 0; i < s.size() && i < static_cast<int>(mass->values().size()); ++i) score[i] = mass->values()[i];
    if (value_norm_ != 0) {  // --value-norm: mass times ||v_j||
      const std::vector<double> vn = ValueNorms(s, value_norm_);
      for (int i = 0; i < s.size(); ++i) score[i] *= vn[i];
    }
    return score;
  }
  double heavy_ratio_;
  int sinks_;
  int value_norm_;
};

}  // namespace

PolicyInfo H2oPolicyInfo() {
  return {"h2o", "Heavy hitters (accumulated attention mass) plus recent tokens, sink guard.",
          {Real({"heavy-ratio", 0.5, "share of the budget (after sinks) for heavy hitters; the rest is recent", 0, 1}),
           {"sink-guard", 4, "first tokens protected permanently"},
           {"value-norm", 0, "scale attention scores by ||v_j||: none, l2, l1", 0, 2, ValueNormNames()}},
          [](const Params& p) {
            return std::make_unique<H2oPolicy>(p.at("heavy-ratio"), static_cast<int>(p.at("sink-guard")),
                                               static_cast<int>(p.at("value-norm")));
          },
          [](const Params& p) {
            return PolicyTraits{.needs = {.taps = {kMassTap}},
                                .protected_entries = static_cast<int>(p.at("sink-guard")),
                                .scores_entries = true};
          }};
}

}  // namespace kvtrim::kv
