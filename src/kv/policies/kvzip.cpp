// `kvzip` (KVzip, query-agnostic; docs/policies-2.md): after the context's
// prefill the engine runs the reconstruction pass (Session::RunReferencePass:
// "Repeat the previous context:" and the context again, teacher-forced over
// a copy of the full cache). Each entry scores the maximum attention it
// receives from those queries over the group's query heads; the top entries
// are kept under ONE budget shared by every KV head of every layer (the
// uniform total r x entries, heads get different counts), or with
// --kvzip-per-head a fixed share per head. Prefill-time only.
#include "kv/policies/policies.h"
#include "kv/taps/max_prob.h"

namespace kvtrim::kv {

namespace {

std::vector<double> Scores(const HeadStats* st, int n) {
  std::vector<double> s(n, 0.0);
  const auto* m = st ? st->reference.Get<MaxProbStat>(kMaxProbTap) : nullptr;
  if (!m) return s;
  for (int i = 0; i < n && i < static_cast<int>(m->values().size()); ++i) s[i] = m->values()[i];
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
    rp.taps = {kMaxProbTap};
    return rp;
  }
  // One top-k over every head of every layer (budget::SharedTopK over
  // Score), or with --kvzip-per-head the uniform share.
  budget::Spec budget() const override {
    budget::Spec s;
    if (!per_head_) s.kind = budget::Kind::kShared, s.shared_floor = floor_;
    return s;
  }
  bool has_entry_scores() const override { return true; }
  EntryScores Score(const PolicyContext& ctx) override {
    const int n = ctx.store->size();
    return {Scores(ctx.stats, n), std::vector<bool>(n, false), true};
  }
  Plan Compress(const PolicyContext& ctx) override {
    const int n = ctx.store->size();
    return Plan::Keep(KeepTop(Scores(ctx.stats, n), std::vector<bool>(n, false), ctx.budget));
  }

 private:
  bool per_head_;
  int floor_;
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
