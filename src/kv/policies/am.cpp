// `am`: Attention Matching compaction (METHODS.md section 4, seed 002).
// Per (layer, KV head), prefill-time: from reference queries Q_ref (the
// context's own prefill queries, and with `--am-queries 1` also those of a
// "Repeat the previous context." pass the engine runs; `--am-queries 2`, the
// default, that pass's, one query head's a token, with the prefill's picked
// the same way added for a short prompt, --am-min-queries), pick t = budget of
// the original keys (highest RMS attention, or OMP on the mass target), fit
// log-weights b = log w by NNLS so the kept keys reproduce every query's
// attention mass, then refit their values by ridge least squares so they
// reproduce the attention outputs (the fit: am_fit.h). Kept entries keep
// their rotated keys and positions; the plan sets their b and values.
// `--am-onpolicy 1` re-runs the pass before each layer over the compacted
// lower layers; `2` (the default) gives the same in one pass that compacts
// each layer as it reaches it (ReferencePass::compress_in_pass), and streams.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "kernels/scratch.h"
#include "kv/policies/am_fit.h"
#include "kv/policies/policies.h"

namespace kvtrim::kv {

std::vector<std::pair<std::string, int64_t>> AmPolicy::Counters() const { return counters_->List(); }

AmPolicy::AmPolicy(const AmConfig& c)
    : c_(std::make_unique<AmConfig>(c)),
      counters_(std::make_unique<AmFitCounters>()),
      scratch_(std::make_unique<kernels::HugeScratch>()) {}
int64_t AmPolicy::dropped() const { return counters_->dropped(); }
AmPolicy::~AmPolicy() = default;

// Prefill-time, on the prefill's queries and keys and a repeat pass; a
// prompt prefilled in chunks has each chunk compacted to its share of the
// budget with its own reference queries (its prefill queries and its repeat
// pass), the entries of earlier chunks left as they are; not with
// --am-onpolicy 1. 6-15 prefills per context (docs/results/am.md): left out of
// the default sweep; METHODS.md 4: nonuniform head budgets from the profile
// when it has them.
namespace {

PolicyTraits AmTraits(const Params& p) {
  PolicyTraits t{.decode_time = false, .needs = {.prefill_qk = true}, .compresses_each_chunk = true, .costly = true,
                 .profile_head_budgets = true};
  const bool repeat = p.at("am-queries") >= 0.5;
  const bool onpolicy = repeat && p.at("am-onpolicy") >= 0.5 && p.at("am-onpolicy") < 1.5;  // 1: a pass per layer
  t.reference_pass.repeat = repeat;
  t.reference_pass.past_context = p.at("am-repeat-past-ctx") >= 0.5;
  t.reference_pass.on_policy = onpolicy;
  t.reference_pass.compress_in_pass = repeat && p.at("am-onpolicy") >= 1.5;  // 2: one pass, each layer compacted in it
  t.reference_pass.repeat_chunk = static_cast<int>(p.at("am-pass-chunk"));
  // After a first compression (a conversation's next turn, a continued
  // session) only what came since is repeated and compacted, to its share;
  // the entries compacted before stay as they are (as a prompt's chunks).
  t.reference_pass.turn_local = repeat && !onpolicy;
  t.reference_pass.turn_lag = t.reference_pass.turn_local;  // a compacted turn would answer from fitted values
  t.stream_blocker = onpolicy ? "--am-onpolicy 1 re-runs the repeat pass layer by layer over the whole context "
                                "(--am-onpolicy 2 streams)"
                              : "";
  return t;
}

}  // namespace

// The entries this call compacts, [from, to), and how many they keep.
// One-shot: every entry, to the head's budget. A prompt prefilled in chunks:
// the entries of the chunk being compressed (positions >= chunk_from, the
// last ones held), to the chunk's share of the budget, ceil(B c1 / N) -
// ceil(B c0 / N) for the chunk [c0, c1) of a prompt ending at N; the entries
// compacted with the chunks before stay as they are (METHODS.md section 4's
// chunked compaction, each chunk with its own reference queries). In a
// conversation the newest turn (positions >= hold_from) is held whole: c1 is
// where it starts, and it is compacted with the next turn.
struct CompactRange {
  int from = 0, to = 0, t = 0;
};

CompactRange RangeToCompact(const PolicyContext& ctx) {
  const int to = AmHoldStart(ctx);
  if (ctx.chunk_from < 0 || ctx.budget_len <= 0) return {0, to, ctx.budget};
  auto share = [&](int64_t c) {
    return static_cast<int>(std::ceil(static_cast<double>(ctx.budget) * std::min(c, ctx.budget_len) / ctx.budget_len - 1e-9));
  };
  const int64_t c1 = ctx.hold_from >= 0 ? std::min(ctx.hold_from, ctx.logical_len) : ctx.logical_len;
  return {std::min(AmChunkStart(ctx), to), to, std::max(0, share(c1) - share(ctx.chunk_from))};
}

Plan AmPolicy::Compress(const PolicyContext& ctx) {
  const HeadStore& s = *ctx.store;
  const int n = s.size();
  if (ctx.budget <= 0) return {};
  const CompactRange range = RangeToCompact(ctx);
  const int span = range.to - range.from;
  Plan plan;
  plan.noop = false;
  for (int i = 0; i < range.from; ++i) plan.keep.push_back(i);  // compacted with earlier chunks
  if (ctx.chunk_from >= 0 && span <= range.t) {  // the chunk fits its share: kept whole
    for (int i = range.from; i < n; ++i) plan.keep.push_back(i);
    return plan;
  }
  const Eigen::MatrixXf Q = AmReferenceQueries(ctx, *c_);
  AmConfig c = *c_;
  c.bf16 = ctx.bf16_products;
  c.pool = ctx.pool;
  c.scratch = scratch_.get();
  for (int c0 = 0; c0 < span; c0 += c.chunk) {  // blocks compacted independently
    const int c1 = std::min(span, c0 + c.chunk);
    const int t = static_cast<int>(std::ceil(static_cast<double>(range.t) * c1 / span - 1e-9)) -
                  static_cast<int>(std::ceil(static_cast<double>(range.t) * c0 / span - 1e-9));
    if (t <= 0) continue;
    AmCompactBlock(s, range.from + c0, range.from + c1, Q, t, c, nullptr, counters_.get(), &plan);
  }
  for (int i = range.to; i < n; ++i) plan.keep.push_back(i);  // the turn held whole
  return plan;
}

PolicyInfo AmPolicyInfo() {
  return {"am",
          "Attention Matching: keep t keys, fit log-weights (NNLS on the attention mass) and values (least squares on "
          "the outputs) to reference queries; prefill-time.",
          {{"am-queries", 2, "reference queries: 0 context (prefill queries), 1 repeat (also a repeat-the-context pass), "
                           "2 the repeat pass's, one query head's a repeated token (see --am-query-pick; at most "
                           "--am-max-queries, a row from each of equal runs of tokens), the prefill's added for a "
                           "short prompt (--am-min-queries)", 0, 2},
           {"am-select", 0, "key selection: 0 highest (RMS attention), 1 omp (matching pursuit on the mass)", 0, 1},
           {"am-omp-step", 4, "OMP: keys picked per refit", 1, 1e6},
           {"am-max-queries", 4096, "reference queries per KV head at most (seeded sample above)", 1, 1e7},
           {"am-chunk", 4096, "compact chunks of this many entries independently", 1, 1e9},
           Real({"am-ridge", 1e-6, "value fit ridge, relative to the mean squared column norm", 0, 1}),
           {"am-repeat-past-ctx", 1, "repeat pass: 1 teacher-forces the whole context again, past the model's trained "
                                     "context if need be (RoPE extrapolation); 0 stops at the trained context", 0, 1},
           {"am-pass-chunk", 0, "repeat pass: tokens repeated per rewind of its copy, each chunk reading the held "
                                "entries and its own repeat only (0: the whole range at once)", 0, 1e9},
           {"am-onpolicy", 2, "1: compact layer by layer, the repeat pass re-run over the compacted lower layers; "
                              "2: the same in one repeat pass, each layer compacted when the pass reaches it (its "
                              "attention reads the compacted layer; streams with --prefill-chunk)", 0, 2},
           {"am-refill", 1, "1: slots NNLS frees (weight 0) go to the next-best keys, weights refit, so a head holds its "
                            "budget; 0: drop them and keep fewer", 0, 1},
           {"am-refill-rounds", 1, "refill: NNLS refits at most (the keys still missing after them are the next-ranked "
                                   "ones with their own cardinality); 8 was the default before, at 1.09x the "
                                   "cost on Qwen2.5-0.5B at 8k with the same 8k answers", 0, 1000},
           {"am-fit-rows", 0, "rows (reference queries) the weights and values are fitted on, a weighted sample of "
                              "them (0: every one)", 0, 1e9},
           {"am-fit-sample", 0, "how --am-fit-rows samples: 0 leverage (RandNLA, reweighted), 1 uniform", 0, 1},
           {"am-query-pick", 1, "--am-queries 2: a token's (or run's) row drawn at random (0), or its largest-norm "
                                "one (1)", 0, 1},
           {"am-prefill-tail", 0, "--am-queries 2: also the prefill's rows of the last this many tokens compacted (a "
                                  "chunk's, or the prompt's)", 0, 1e9},
           Real({"am-prefill-mix", 0, "--am-queries 2: also the prefill's queries, picked the same way from this "
                                      "fraction of as many equal runs of its tokens (1: one of each a token, twice the "
                                      "queries)", 0, 1}),
           {"am-min-queries", 2048, "--am-queries 2, a prompt compacted as one block (one-shot, or one chunk): when its "
                                    "repeat gives fewer queries (one a token), the prefill's, picked the same way, are "
                                    "added up to this many (at most as many again)", 0, 1e7},
           {"kv-seed", 0, "sampling seed of the kept sample"}},
          [](const Params& p) {
            AmConfig c;
            c.repeat = p.at("am-queries") >= 0.5;
            c.repeat_only = p.at("am-queries") >= 1.5;
            c.pick = static_cast<int>(p.at("am-query-pick"));
            c.prefill_tail = static_cast<int>(p.at("am-prefill-tail"));
            c.prefill_mix = p.at("am-prefill-mix");
            c.min_queries = static_cast<int>(p.at("am-min-queries"));
            c.omp = p.at("am-select") >= 0.5;
            c.omp_step = static_cast<int>(p.at("am-omp-step"));
            c.max_queries = static_cast<int>(p.at("am-max-queries"));
            c.chunk = static_cast<int>(p.at("am-chunk"));
            c.ridge = p.at("am-ridge");
            c.repeat_past_ctx = p.at("am-repeat-past-ctx") >= 0.5;
            c.onpolicy = p.at("am-onpolicy") >= 0.5;
            c.seed = static_cast<uint64_t>(p.at("kv-seed"));
            c.refill = p.at("am-refill") >= 0.5;
            c.refill_rounds = static_cast<int>(p.at("am-refill-rounds"));
            c.fit_rows = static_cast<int>(p.at("am-fit-rows"));
            c.fit_uniform = p.at("am-fit-sample") >= 0.5;
            return std::make_unique<AmPolicy>(c);
          },
          AmTraits};
}

}  // namespace kvtrim::kv