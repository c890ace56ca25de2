// `window` (StreamingLLM): the first S sink tokens and the most recent W,
// budget S + W; at decode time the oldest non-sink entry goes.
#include "kv/policies/policies.h"

namespace kvtrim::kv {
namespace {

class WindowPolicy : public Policy {
 public:
  explicit WindowPolicy(int sinks) : sinks_(sinks) {}
  Plan Compress(const PolicyContext& ctx) override {
    const HeadStore& s = *ctx.store;
    std::vector<double> score(s.size());
    for (int i = 0; i < s.size(); ++i) score[i] = i;  // newer scores higher
    return Plan::Keep(KeepTop(score, ProtectSinksAndRecent(s, sinks_, 0), ctx.budget));
  }

 private:
  int sinks_;
};

}  // namespace

PolicyInfo WindowPolicyInfo() {
  return {"window", "StreamingLLM: S attention sinks plus the most recent tokens.",
          {{"sinks", 4, "sink tokens kept at the start"}},
          [](const Params& p) { return std::make_unique<WindowPolicy>(static_cast<int>(p.at("sinks"))); },
          [](const Params& p) { return PolicyTraits{.protected_entries = static_cast<int>(p.at("sinks"))}; }};
}

}  // namespace kvtrim::kv
