// `kvslimmer` (METHODS.md section 5, seed 003): decode-time merging of
// adjacent entry pairs with closed-form key weights from the attention the
// pair receives; values are cardinality-weighted means with b = log l. The
// rounds, observation and pair choice are shared with `merge-mean`
// (kv/merging.h).
#include "kv/merging.h"
#include "kv/policies/policies.h"

namespace kvtrim::kv {

namespace {

MergingOptions SlimmerOptions(const Params& p) {
  MergingOptions o;
  o.rule = KeyRule::kClosedForm;
  o.chunk = static_cast<int>(p.at("merge-chunk"));
  o.sinks = static_cast<int>(p.at("sinks"));
  o.window = static_cast<int>(p.at("obs-window"));
  o.l1 = p.at("norm") < 1.5;
  o.diag_only = p.at("diag-only") >= 0.5;
  o.renorm = p.at("renorm") >= 0.5;
  return o;
}

}  // namespace

PolicyInfo KvslimmerPolicyInfo() {
  return {"kvslimmer",
          "Merges the lowest-attention adjacent pairs (closed-form key weights, b = log l) when a head holds budget + "
          "chunk; chunk = min(merge-chunk, budget/4).",
          {{"merge-chunk", 512, "pairs merged per round (used: min(merge-chunk, budget/4), at least 1)", 1, 1e6},
           {"sinks", 32, "sink tokens never merged (positions < S)"},
           {"obs-window", 32, "observation window w: the last w queries observed; the w most recent entries protected",
            1, 1e6},
           {"norm", 2, "norm of the closed form's vectors: 2 (L2, the paper) or 1 (L1)", 1, 2},
           {"diag-only", 0, "1: ablation with c12 = 0 (no off-diagonal coupling)", 0, 1},
           {"renorm", 0, "1: ablation: alpha renormalised over the non-sink entries and o without the sinks "
                         "(0: the seed's eqs. 9, 23-25, over every entry)", 0, 1}},
          [](const Params& p) { return std::make_unique<MergingPolicy>(SlimmerOptions(p)); },
          [](const Params& p) { return MergingPolicy::Traits(SlimmerOptions(p)); }};
}

}  // namespace kvtrim::kv
