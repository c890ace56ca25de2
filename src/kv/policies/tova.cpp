// `tova` (Oren et al., "Transformers are multi-state RNNs"): whenever a head
// is over its budget, the entries with the lowest attention weight from the
// CURRENT query (the latest token's, averaged over the group's query heads)
// go. Decode-time, and once after prefill with the prompt's last query; the
// first --sinks positions and the newest entry are never evicted.
#include "kv/policies/policies.h"
#include "kv/taps/latest_query.h"

namespace kvtrim::kv {
namespace {

class TovaPolicy : public Policy {
 public:
  explicit TovaPolicy(int sinks) : sinks_(sinks) {}
  EntryScores Score(const PolicyContext& ctx) override {
    const HeadStore& s = *ctx.store;
    std::vector<double> score(s.size(), 0.0);  // entries newer than the latest query: 0 (the newest is protected)
    if (const auto* latest = ctx.stats->taps.Get<LatestQueryStat>(kLatestQueryTap)) {
      const std::vector<float>& cur = latest->values();
      for (int i = 0; i < s.size() && i < static_cast<int>(cur.size()); ++i) score[i] = cur[i];
    }
    return {std::move(score), ProtectSinksAndRecent(s, sinks_, 0), true};
  }
  Plan Compress(const PolicyContext& ctx) override {
    const EntryScores e = Score(ctx);
    return Plan::Keep(KeepTop(e.score, e.prot, ctx.budget));
  }

 private:
  int sinks_;
};

}  // namespace

PolicyInfo TovaPolicyInfo() {
  return {"tova", "Evicts the entries the current query attends least (group mean); decode-time.",
          {{"sinks", 0, "sink tokens never evicted"}},
          [](const Params& p) { return std::make_unique<TovaPolicy>(static_cast<int>(p.at("sinks"))); },
          [](const Params& p) {
            return PolicyTraits{.needs = {.taps = {kLatestQueryTap}},
                                .protected_entries = static_cast<int>(p.at("sinks")),
                                .scores_entries = true};
          }};
}

}  // namespace kvtrim::kv
