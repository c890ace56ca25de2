// `kvzip-am`: KVzip's selection with Attention Matching's fit (a combination
// the two seeds allow: METHODS.md sections 4 and 7). One reconstruction pass
// ("Repeat the previous context:" and the context again) gives both KVzip's
// scores (the largest attention each entry receives) and AM's reference
// queries (its rotated queries, with the prefill's own). Each head keeps
// KVzip's top entries (one budget shared by every head, or with
// --kvzip-per-head a fixed share); the kept entries of the block being
// compressed then get AM's log-weights (NNLS on the attention mass of the
// whole block) and values (least squares on its outputs), the slots NNLS
// frees going to the next entries in KVzip's order (--am-refill). KVzip
// picks the entries that hold the needle; AM's fit makes the kept ones
// stand for the dropped ones' mass and output. A prompt prefilled in
// chunks fits each chunk's kept entries against the chunk's own queries;
// entries kept from earlier chunks keep their fit (KVzip may still drop
// them, its scores carried).
#include "kernels/scratch.h"
#include "kv/policies/am_fit.h"
#include "kv/policies/policies.h"
#include "kv/taps/max_prob.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

namespace kvtrim::kv {

namespace {

class KvzipAmPolicy : public KvzipPolicy {
 public:
  KvzipAmPolicy(const AmConfig& c, int pool) : KvzipPolicy(false, pool), c_(c) {}
  std::vector<std::pair<std::string, int64_t>> Counters() const override { return counters_.List(); }

 protected:
  Plan Select(const PolicyContext& ctx, const std::vector<double>& score) override;

 private:
  AmConfig c_;
  AmFitCounters counters_;
  kernels::HugeScratch scratch_;  // the fit's scores buffers, reused
};

// KVzip's top entries; those of the chunk being compressed (every entry
// one-shot) fitted block by block, each block to as many entries as KVzip
// kept in it.
Plan KvzipAmPolicy::Select(const PolicyContext& ctx, const std::vector<double>& score) {
  const HeadStore& s = *ctx.store;
  const int n = s.size();
  const std::vector<int> top = KeepTop(score, std::vector<bool>(score.size(), false), ctx.budget);
  const int from = AmChunkStart(ctx);  // the first entry of the chunk being compressed
  Plan plan;
  plan.noop = false;
  std::vector<int> kept_in(n, 0);
  for (int i : top) kept_in[i] = 1;
  for (int i = 0; i < from; ++i)
    if (kept_in[i]) plan.keep.push_back(i);  // fitted with its own chunk, or kept whole
  std::optional<Eigen::MatrixXf> Q;
  AmConfig c = c_;
  c.bf16 = ctx.bf16_products;
  c.pool = ctx.pool;
  c.scratch = &scratch_;
  for (int c0 = from; c0 < n; c0 += c.chunk) {
    const int c1 = std::min(n, c0 + c.chunk);
    int t = 0;
    for (int i = c0; i < c1; ++i) t += kept_in[i];
    if (t == c1 - c0 || t == 0) {  // nothing to fit: kept whole, or dropped whole
      for (int i = c0; i < c1 && t > 0; ++i) plan.keep.push_back(i);
      continue;
    }
    if (!Q) Q = AmReferenceQueries(ctx, c_);
    const std::vector<double> block(score.begin() + c0, score.begin() + c1);
    AmCompactBlock(s, c0, c1, *Q, t, c, &block, &counters_, &plan);
  }
  return plan;
}

}  // namespace

PolicyInfo KvzipAmPolicyInfo() {
  std::vector<ParamSpec> params = KvzipParams();
  params.push_back({"am-max-queries", 4096, "reference queries per KV head at most (seeded sample above)", 1, 1e7});
  params.push_back({"am-chunk", 4096, "fit blocks of this many entries independently", 1, 1e9});
  params.push_back(Real({"am-ridge", 1e-6, "value fit ridge, relative to the mean squared column norm", 0, 1}));
  params.push_back({"am-refill", 1, "1: slots NNLS frees (weight 0) go to the next entries in KVzip's order; 0: "
                                    "drop them and keep fewer", 0, 1});
  params.push_back({"am-fit-values", 1, "1: refit the kept entries' values (least squares on the outputs); 0: "
                                        "log-weights only", 0, 1});
  params.push_back({"am-fit-weights", 1, "1: fit the kept entries' log-weights (NNLS on the mass); 0: each keeps "
                                         "its own (values only)", 0, 1});
  params.push_back({"am-weight-floor", 1, "1: every kept entry weighs at least itself, the fit adds the dropped "
                                          "entries' mass on top (KVzip's picks all stay); 0: plain NNLS (picks may "
                                          "get weight 0)", 0, 1});
  params.push_back({"kv-seed", 0, "sampling seed of the reference queries"});
  return {"kvzip-am",
          "KVzip's selection (reconstruction scores, one top-k over all heads) with Attention Matching's fit: the "
          "kept entries' log-weights (NNLS on the mass) and values (least squares on the outputs) fitted to the "
          "reconstruction's and the prefill's queries. Prefill-time.",
          params,
          [](const Params& p) {
            AmConfig c;
            c.max_queries = static_cast<int>(p.at("am-max-queries"));
            c.chunk = static_cast<int>(p.at("am-chunk"));
            c.ridge = p.at("am-ridge");
            c.refill = p.at("am-refill") >= 0.5;
            c.fit_values = p.at("am-fit-values") >= 0.5;
            c.weight_floor = p.at("am-weight-floor") >= 0.5;
            c.fit_weights = p.at("am-fit-weights") >= 0.5;
            c.seed = static_cast<uint64_t>(p.at("kv-seed"));
            return std::make_unique<KvzipAmPolicy>(c, static_cast<int>(p.at("kvzip-pool")));
          },
          [](const Params& p) {
            PolicyTraits t = KvzipTraits(false)(p);
            t.reference_pass.queries = true;  // AM's reference queries from the same pass
            t.reference_pass.turn_local = false;  // the fit reads the whole block's queries
            t.needs.prefill_qk = true;        // and the prefill's own
            t.costly = true;
            return t;
          }};
}

}  // namespace kvtrim::kv
