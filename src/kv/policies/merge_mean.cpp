// `merge-mean`: the baseline KVSlimmer is compared against (seed 003). The
// same pairs as `kvslimmer` (kv/merging.h) merge with plain mean keys: the
// mean of every token key the pair stands for (cardinality-weighted, so a
// twice-merged entry is the mean of its four tokens); values and b as
// KVSlimmer.
#include "kv/merging.h"
#include "kv/policies/policies.h"

namespace kvtrim::kv {

namespace {

MergingOptions MergeMeanOptions(const Params& p) {
  MergingOptions o;
  o.rule = KeyRule::kMean;
  o.chunk = static_cast<int>(p.at("merge-chunk"));
  o.sinks = static_cast<int>(p.at("sinks"));
  o.window = static_cast<int>(p.at("obs-window"));
  return o;
}

}  // namespace

PolicyInfo MergeMeanPolicyInfo() {
  return {"merge-mean",
          "KVSlimmer's pairs merged with mean keys (baseline); chunk = min(merge-chunk, budget/4).",
          {{"merge-chunk", 512, "pairs merged per round (used: min(merge-chunk, budget/4), at least 1)", 1, 1e6},
           {"sinks", 32, "sink tokens never merged (positions < S)"},
           {"obs-window", 32, "observation window w: the last w queries observed; the w most recent entries protected",
            1, 1e6}},
          [](const Params& p) { return std::make_unique<MergingPolicy>(MergeMeanOptions(p)); },
          [](const Params& p) { return MergingPolicy::Traits(MergeMeanOptions(p)); }};
}

}  // namespace kvtrim::kv
