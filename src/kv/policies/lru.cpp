// `lru`: an entry is accessed at a query step when its attention weight (max
// over the group's query heads) is >= 1/n; the least recently accessed go.
#include "kv/policies/policies.h"
#include "kv/taps/last_access.h"

namespace kvtrim::kv {
namespace {

class LruPolicy : public Policy {
 public:
  explicit LruPolicy(int sinks) : sinks_(sinks) {}
  Plan Compress(const PolicyContext& ctx) override {
    const HeadStore& s = *ctx.store;
    std::vector<double> score(s.size(), -1.0);
    if (const auto* last = ctx.stats->taps.Get<LastAccessStat>(kLastAccessTap))
      for (int i = 0; i < s.size() && i < static_cast<int>(last->values().size()); ++i)
        score[i] = static_cast<double>(last->values()[i]);
    return Plan::Keep(KeepTop(score, ProtectSinksAndRecent(s, sinks_, 0), ctx.budget));
  }

 private:
  int sinks_;
};

}  // namespace

PolicyInfo LruPolicyInfo() {
  return {"lru", "Least recently accessed (attention >= 1/n) entries are evicted.",
          {{"sinks", 0, "sink tokens never evicted"}},
          [](const Params& p) { return std::make_unique<LruPolicy>(static_cast<int>(p.at("sinks"))); },
          [](const Params& p) {
            return PolicyTraits{.needs = {.taps = {kLastAccessTap}}, .protected_entries = static_cast<int>(p.at("sinks"))};
          }};
}

}  // namespace kvtrim::kv
