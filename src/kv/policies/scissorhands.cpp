// `scissorhands`: importance = number of the last m query steps in which the
// entry got attention >= 1/n; the recent r and the sinks are protected; when
// full, a batch of the least important is evicted so bookkeeping amortizes.
#include <cmath>

#include "kv/policies/policies.h"
#include "kv/taps/history.h"

namespace kvtrim::kv {
namespace {

class ScissorhandsPolicy : public Policy {
 public:
  ScissorhandsPolicy(int recent, int sinks, double batch)
      : recent_(recent), sinks_(sinks), batch_(batch) {}
  Plan Compress(const PolicyContext& ctx) override {
    const HeadStore& s = *ctx.store;
    int target = ctx.budget;
    if (ctx.phase == Phase::kDecode)  // evict a batch: room for the next steps
      target = std::max(sinks_ + recent_, ctx.budget - static_cast<int>(std::ceil(batch_ * ctx.budget)) + 1);
    std::vector<double> score(s.size(), 0.0);
    if (const auto* hist = ctx.stats->taps.Get<HistoryStat>(kHistoryTap))
      for (int i = 0; i < s.size(); ++i) score[i] = static_cast<double>(hist->Count(i));
    return Plan::Keep(KeepTop(score, ProtectSinksAndRecent(s, sinks_, recent_), target));
  }

 private:
  int recent_, sinks_;
  double batch_;
};

}  // namespace

PolicyInfo ScissorhandsPolicyInfo() {
  return {"scissorhands", "Importance = count of recent steps with attention >= 1/n; batch eviction.",
          {{"history", 400, "steps m counted for importance", 1, 1e6},
           {"recent", 10, "most recent tokens protected"},
           {"sinks", 4, "sink tokens protected"},
           Real({"evict-batch", 0.1, "fraction of the budget evicted at once when full", 0, 1})},
          [](const Params& p) {
            return std::make_unique<ScissorhandsPolicy>(static_cast<int>(p.at("recent")), static_cast<int>(p.at("sinks")),
                                                        p.at("evict-batch"));
          },
          [](const Params& p) {
            return PolicyTraits{.needs = {.taps = {{kHistoryTap, static_cast<int>(p.at("history"))}}},
                                .protected_entries = static_cast<int>(p.at("sinks") + p.at("recent"))};
          }};
}

}  // namespace kvtrim::kv
