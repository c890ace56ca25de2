// `kvzip` (KVzip, query-agnostic; docs/policies-2.md): after the context's
// prefill the engine runs the reconstruction pass (Session::RunReferencePass:
// "Repeat the previous context:" and the context again, teacher-forced over
// a copy of the full cache). Each entry scores the maximum attention it
// receives from those queries over the group's query heads; the top entries
// are kept under ONE budget shared by every KV head of every layer (the
// uniform total r x entries, heads get different counts), or with
// --kvzip-per-head a fixed share per head. Prefill-time only.
#include <algorithm>
#include <cmath>

#include "kv/numerics/shared_budget.h"
#include "kv/policies/policies.h"

namespace kvtrim::kv {

namespace {

std::vector<double> Scores(const HeadStats* st, int n) {
  std::vector<double> s(n, 0.0);
  if (!st) return s;
  for (int i = 0; i < n && i < static_cast<int>(st->max_prob.size()); ++i) s[i] = st->max_prob[i];
  return s;
}

class KvzipPolicy : public Policy {
 public:
  KvzipPolicy(bool per_head, int floor) : per_head_(per_head), floor_(floor) {}
  bool decode_time() const override { return false; }
  int protected_entries() const override { return 0; }
  ReferencePass reference_pass() const override {
    ReferencePass rp;
    rp.repeat = true;
    rp.past_context = true;  // every entry is scored by the reconstruction
    rp.instruction = "\nRepeat the previous context:\n";
    rp.queries = false;
    rp.max_prob = true;
    return rp;
  }
  std::vector<std::pair<std::string, int64_t>> Counters() const override {
    if (counts_.empty()) return {};
    auto [lo, hi] = std::minmax_element(counts_.begin(), counts_.end());
    return {{"head-min", *lo}, {"head-max", *hi}};
  }

  Status Prepare(const CompressionTarget& t) override {
    counts_.clear();
    if (per_head_ || !t.stats || !t.cache) return {};
    const int64_t base =
        t.budget_tokens > 0 ? t.budget_tokens : static_cast<int64_t>(std::ceil(t.ratio * static_cast<double>(t.n) - 1e-9));
    if (base >= t.n) return {};  // nothing is compressed
    std::vector<std::vector<double>> scores;
    scores.reserve(static_cast<size_t>(t.n_layer) * t.n_head_kv);
    for (int l = 0; l < t.n_layer; ++l)
      for (int h = 0; h < t.n_head_kv; ++h) scores.push_back(Scores(&t.stats->head(l, h), t.cache->head(l, h).size()));
    const int64_t total = std::max<int64_t>(1, base) * t.n_layer * t.n_head_kv;
    counts_ = numerics::SharedTopK(scores, total, floor_);
    n_head_kv_ = t.n_head_kv;
    return {};
  }
  int HeadBudget(int layer, int head, int layer_budget) const override {
    return counts_.empty() ? layer_budget : counts_[static_cast<size_t>(layer) * n_head_kv_ + head];
  }
  Plan Compress(const PolicyContext& ctx) override {
    const int n = ctx.store->size();
    return Plan::Keep(KeepTop(Scores(ctx.stats, n), std::vector<bool>(n, false), ctx.budget));
  }

 private:
  bool per_head_;
  int floor_;
  std::vector<int> counts_;  // [n_layer * n_head_kv] from the shared top-k; empty: uniform
  int n_head_kv_ = 1;
};

}  // namespace

PolicyInfo KvzipPolicyInfo() {
  return {"kvzip",
          "KVzip: entries scored by the max attention the context's reconstruction pays them; one top-k over all "
          "heads of all layers. Prefill-time.",
          {{"kvzip-per-head", 0, "a fixed share per KV head instead of one budget shared by all heads", 0, 1, {}, true},
           {"kvzip-floor", 1, "entries every KV head keeps at least under the shared budget", 1, 1e6}},
          [](const Params& p) {
            return std::make_unique<KvzipPolicy>(p.at("kvzip-per-head") >= 0.5, static_cast<int>(p.at("kvzip-floor")));
          }};
}

}  // namespace kvtrim::kv
