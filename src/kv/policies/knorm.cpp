// `knorm`: keep the keys with the SMALLEST L2 norm (Devoto et al., "A simple
// and effective L2 norm-based strategy for KV cache compression": low-norm
// keys draw high attention). Keys as stored (post-RoPE: the same norm as
// pre-RoPE). Query-agnostic, prefill-time; the newest entry is always kept.
#include "kv/policies/key_scores.h"
#include "kv/policies/policies.h"

namespace kvtrim::kv {
namespace {

class KnormPolicy : public Policy {
 public:
  EntryScores Score(const PolicyContext& ctx) override {
    return {KNormScores(*ctx.store), ProtectSinksAndRecent(*ctx.store, 0, 0), false};
  }
  Plan Compress(const PolicyContext& ctx) override {
    const EntryScores e = Score(ctx);
    return Plan::Keep(KeepTop(e.score, e.prot, ctx.budget));
  }
};

}  // namespace

PolicyInfo KnormPolicyInfo() {
  return {"knorm", "Keeps the keys of smallest L2 norm; query-agnostic, prefill-time.", {},
          [](const Params&) { return std::make_unique<KnormPolicy>(); },
          Fixed({.decode_time = false, .scores_entries = true})};
}

}  // namespace kvtrim::kv
