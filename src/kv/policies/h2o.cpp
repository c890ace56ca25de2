// `h2o`: heavy hitters by accumulated attention mass plus the most recent
// tokens, with a sink guard protecting the first S tokens permanently.
#include <cmath>

#include "kv/policies/policies.h"

namespace kvtrim::kv {
namespace {

class H2oPolicy : public Policy {
 public:
  H2oPolicy(double heavy_ratio, int sink_guard) : heavy_ratio_(heavy_ratio), sinks_(sink_guard) {}
  StatsNeeds needs() const override {
    StatsNeeds n;
    n.acc_mass = true;
    return n;
  }
  int protected_entries() const override { return sinks_; }
  Plan Compress(const PolicyContext& ctx) override {
    const HeadStore& s = *ctx.store;
    // Budget split: sinks, then heavy and recent shares of the remainder.
    const int rest = std::max(0, ctx.budget - sinks_);
    const int heavy = static_cast<int>(std::lround(rest * heavy_ratio_));
    const int recent = rest - heavy;
    std::vector<double> score(s.size(), 0.0);
    for (int i = 0; i < s.size() && i < static_cast<int>(ctx.stats->acc.size()); ++i) score[i] = ctx.stats->acc[i];
    return Plan::Keep(KeepTop(score, ProtectSinksAndRecent(s, sinks_, recent), ctx.budget));
  }

 private:
  double heavy_ratio_;
  int sinks_;
};

}  // namespace

PolicyInfo H2oPolicyInfo() {
  return {"h2o", "Heavy hitters (accumulated attention mass) plus recent tokens, sink guard.",
          {{"heavy-ratio", 0.5, "share of the budget (after sinks) for heavy hitters; the rest is recent", 0, 1},
           {"sink-guard", 4, "first tokens protected permanently"}},
          [](const Params& p) {
            return std::make_unique<H2oPolicy>(p.at("heavy-ratio"), static_cast<int>(p.at("sink-guard")));
          }};
}

}  // namespace kvtrim::kv
