// `keydiff`: keep the keys least similar (cosine) to the head's anchor, the
// mean of its unit-normalised keys (Park et al., "KeyDiff: key similarity-
// based KV cache eviction"): distinctive keys are kept, redundant ones go.
// Keys as stored (post-RoPE). Query-agnostic, prefill-time; the newest entry
// is always kept.
#include "kv/policies/key_scores.h"
#include "kv/policies/policies.h"

namespace kvtrim::kv {
namespace {

class KeydiffPolicy : public Policy {
 public:
  EntryScores Score(const PolicyContext& ctx) override {
    return {KeyDiffScores(*ctx.store), ProtectSinksAndRecent(*ctx.store, 0, 0), false};
  }
  Plan Compress(const PolicyContext& ctx) override {
    const EntryScores e = Score(ctx);
    return Plan::Keep(KeepTop(e.score, e.prot, ctx.budget));
  }
};

}  // namespace

PolicyInfo KeydiffPolicyInfo() {
  return {"keydiff", "Keeps the keys least similar (cosine) to the mean unit key of the head; prefill-time.", {},
          [](const Params&) { return std::make_unique<KeydiffPolicy>(); },
          Fixed({.decode_time = false, .scores_entries = true})};
}

}  // namespace kvtrim::kv
