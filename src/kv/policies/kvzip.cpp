// `kvzip` (KVzip, query-agnostic; docs/policies-2.md): after the context's
// prefill the engine runs the reconstruction pass (Session::RunReferencePass:
// "Repeat the previous context:" and the context again, teacher-forced over
// a copy of the full cache). Each entry scores the maximum attention it
// receives from those queries over the group's query heads; the top entries
// are kept under ONE budget shared by every KV head of every layer (the
// uniform total r x entries, heads get different counts), or with
// --kvzip-per-head a fixed share per head. Prefill-time only.
// With --prefill-chunk the reconstruction is chunked as the paper does for
// long contexts: after each chunk the engine repeats that chunk alone over
// the compressed past and the chunk (Session::RunReferencePass), and each
// entry keeps the largest score any chunk's reconstruction gave it (the kept
// entries' scores are carried from chunk to chunk). The shared budget
// streams too: after each chunk one top-k runs over every head's entries
// held, the carried scores and the chunk's new ones (Compressor's
// PrepareShared at the whole prompt's total), so a head's share grows or
// shrinks as the prompt goes and no head holds more than its share + chunk.
// The reconstruction repeats --kvzip-pass-chunk tokens (default 256) at a
// time, each over the held entries and the instruction only
// (ReferencePass::repeat_chunk: fewer keys a query, the same entries scored).
// `kvzip+` (KVzip+, kvpress's KVzipPress(kvzip_plus_normalization=True)):
// the same pass, each probability normalised by what the entry adds to the
// residual stream relative to the query's input:
//   s_j = max over queries t and query heads g of p_{t,g,j} ||W_o,g v_j|| / ||h_t||,
// h_t the query's attention input (after the attention norm), W_o,g the
// columns of the output projection head g's output multiplies. The tap
// keeps max_t p / ||h_t|| per (entry, g); Score multiplies by
// ||W_o,g v_j|| = sqrt(v_j^T M_g v_j) (PolicyContext::out_gram).
// --kvzip-pool K ranks each entry by the largest score within K / 2
// positions of it (SnapKV's maxpool option): a needle whose few tokens the
// reconstruction reads hard keeps the tokens beside them, which the copy
// heads read once the question names it. Off (1) by default.
#include "kv/numerics/eigen.h"  // first: before anything that pulls in <immintrin.h>
#include "kv/policies/policies.h"
#include "kv/taps/max_prob.h"
#include "kv/taps/max_prob_over_h.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <mutex>

namespace kvtrim::kv {

namespace {

std::vector<double> Scores(const HeadStats* st, int n) {
  std::vector<double> s(n, 0.0);
  const auto* m = st ? st->reference.Get<MaxProbStat>(kMaxProbTap) : nullptr;
  if (!m) return s;
  for (int i = 0; i < n && i < static_cast<int>(m->values().size()); ++i) s[i] = m->values()[i];
  return s;
}

// KVzip+: max over g of ||W_o,g v_j|| max_t p_{t,g,j} / ||h_t||, the norms
// as row quadratic forms sqrt(v_j^T M_g v_j) (as numerics' k^T S k).
std::vector<double> PlusScores(const PolicyContext& ctx) {
  const HeadStore& store = *ctx.store;
  const int d = store.head_dim();
  const auto* m = ctx.stats ? ctx.stats->reference.Get<MaxProbOverHStat>(kMaxProbOverHTap) : nullptr;
  std::vector<double> s(store.size(), 0.0);
  if (!m || !ctx.out_gram) return s;
  const int n = std::min(store.size(), m->size());
  Eigen::MatrixXd V(n, d);
  std::vector<float> v(d);
  for (int j = 0; j < n; ++j) {
    store.ReadValue(j, v.data());
    for (int a = 0; a < d; ++a) V(j, a) = v[a];
  }
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  for (int g = 0; g < m->group(); ++g) {
    const Eigen::MatrixXd M = Eigen::Map<const RowMajor>(ctx.out_gram + static_cast<size_t>(g) * d * d, d, d).cast<double>();
    const Eigen::VectorXd norm = (V * M).cwiseProduct(V).rowwise().sum().cwiseMax(0.0).cwiseSqrt();
    for (int j = 0; j < n; ++j) s[j] = std::max(s[j], norm(j) * m->at(j, g));
  }
  return s;
}

}  // namespace

std::vector<double> MaxPoolByPosition(const HeadStore& store, const std::vector<double>& score, int kernel) {
  const int half = kernel / 2, n = std::min<int>(store.size(), static_cast<int>(score.size()));
  if (half <= 0) return score;
  // Entries are in position order, so each side's scan stops at the first
  // entry out of reach.
  auto near = [&](int i, int j) { return std::llabs(int64_t{store.pos(i)} - store.pos(j)) <= half; };
  std::vector<double> out = score;
  for (int i = 0; i < n; ++i) {
    for (int j = i - 1; j >= 0 && near(i, j); --j) out[i] = std::max(out[i], score[j]);
    for (int j = i + 1; j < n && near(i, j); ++j) out[i] = std::max(out[i], score[j]);
  }
  return out;
}

EntryScores KvzipPolicy::Score(const PolicyContext& ctx) {
  return {Ranked(ctx, Combined(ctx)), std::vector<bool>(ctx.store->size(), false), true};
}

Plan KvzipPolicy::Select(const PolicyContext& ctx, const std::vector<double>& score) {
  return Plan::Keep(KeepTop(score, std::vector<bool>(score.size(), false), ctx.budget));
}

// The kept entries' scores go on with them (a later chunk's or turn's pass
// repeats only its own tokens: ReferencePass::turn_local).
Plan KvzipPolicy::Compress(const PolicyContext& ctx) {
  const std::vector<double> score = Combined(ctx);
  Plan plan = Select(ctx, Ranked(ctx, score));
  std::vector<double> kept;
  kept.reserve(plan.keep.size());
  for (int i : plan.keep) kept.push_back(score[i]);
  *Carried(ctx) = std::move(kept);
  return plan;
}

// The chunk's reconstruction has run: every entry's score so far.
void KvzipPolicy::EndChunk(const PolicyContext& ctx) { *Carried(ctx) = Combined(ctx); }

// Sized once for every head, whichever head's thread comes first (call_once
// makes the sizing visible to all of them before any reads it).
std::vector<double>* KvzipPolicy::Carried(const PolicyContext& ctx) {
  std::call_once(sized_, [&] { carried_.resize(static_cast<size_t>(ctx.n_layer) * ctx.n_head_kv); });
  const size_t i = static_cast<size_t>(ctx.layer) * ctx.n_head_kv + ctx.head;
  return i < carried_.size() ? &carried_[i] : nullptr;
}

// This pass's scores, each raised to what earlier chunks' passes gave it.
std::vector<double> KvzipPolicy::Combined(const PolicyContext& ctx) {
  std::vector<double> s = plus_ ? PlusScores(ctx) : Scores(ctx.stats, ctx.store->size());
  if (const std::vector<double>* c = Carried(ctx))
    for (size_t i = 0; i < s.size() && i < c->size(); ++i) s[i] = std::max(s[i], (*c)[i]);
  return s;
}

std::vector<double> KvzipPolicy::Ranked(const PolicyContext& ctx, const std::vector<double>& combined) const {
  return MaxPoolByPosition(*ctx.store, combined, pool_);
}

std::vector<ParamSpec> KvzipParams(int pool_default, double floor_share_default) {
  return {{"kvzip-per-head", 0, "a fixed share per KV head instead of one budget shared by all heads", 0, 1, {}, true},
          {"kvzip-floor", 1, "entries every KV head keeps at least under the shared budget", 1, 1e6},
          Real({"kvzip-floor-share", floor_share_default,
                "and at least this share of its uniform budget (0-1; AdaKV's safeguard: the rest by the shared top-k)", 0, 1}),
          {"kvzip-pass-chunk", 256,
           "reconstruction: tokens repeated per rewind of its copy, each chunk reading the held entries and its own "
           "repeat only (0: the whole range at once)",
           0, 1e9},
          Odd({"kvzip-pool", static_cast<double>(pool_default),
               "rank each entry by the largest score within kernel/2 positions of it (max-pooling, odd; 1: off)", 1,
               101})};
}

// A reconstruction pass scores every entry (max-prob, or KVzip+'s normalised
// max-prob over ||h|| with the output projection); one top-k over every head
// of every layer (budget::SharedTopK over Score), or with --kvzip-per-head
// the uniform share; both stream with chunked reconstruction.
std::function<PolicyTraits(const Params&)> KvzipTraits(bool plus) {
  return [plus](const Params& p) {
    PolicyTraits t{.decode_time = false, .scores_entries = true};
    t.reference_pass.repeat = true;
    t.reference_pass.past_context = true;  // every entry is scored by the reconstruction
    t.reference_pass.instruction = "\nRepeat the previous context:\n";
    t.reference_pass.queries = false;
    t.reference_pass.taps = {plus ? kMaxProbOverHTap : kMaxProbTap};
    t.reference_pass.output_weights = plus;
    t.reference_pass.repeat_chunk = static_cast<int>(p.at("kvzip-pass-chunk"));
    t.reference_pass.turn_local = true;  // the kept entries' scores are carried (KvzipPolicy::Compress)
    t.stream_blocker = "";  // each chunk's reconstruction scores what the chunk's compression weighs
    if (p.at("kvzip-per-head") < 0.5) {
      t.budget.kind = budget::Kind::kShared;
      t.budget.shared_floor = static_cast<int>(p.at("kvzip-floor"));
      t.budget.shared_floor_share = p.at("kvzip-floor-share");
    }
    t.costly = plus;  // not in the default eval sweep (name it): its cells match kvzip's cost
    return t;
  };
}

PolicyInfo KvzipPolicyInfo() {
  return {"kvzip",
          "KVzip: entries scored by the max attention the context's reconstruction pays them; one top-k over all "
          "heads of all layers. Prefill-time.",
          // Pooled scores with a floor: at 8k (YaRN, the held-out text, 3 x 32
          // contexts a task) the worst task's retention 0.943 / 0.925 / 0.887
          // at r = 0.1 / 0.05 / 0.02 against 0.894 / 0.868 / 0.774 without;
          // level at 976 tokens (docs/policies-2.md).
          KvzipParams(3, 0.25),
          [](const Params& p) { return std::make_unique<KvzipPolicy>(false, static_cast<int>(p.at("kvzip-pool"))); },
          KvzipTraits(false)};
}

PolicyInfo KvzipPlusPolicyInfo() {
  return {"kvzip+",
          "KVzip+ (kvpress): KVzip's reconstruction scores normalised, p ||W_o v|| / ||h|| (what the entry adds to "
          "the residual stream relative to the query's input); one top-k over all heads of all layers. Prefill-time.",
          KvzipParams(),
          [](const Params& p) { return std::make_unique<KvzipPolicy>(true, static_cast<int>(p.at("kvzip-pool"))); },
          KvzipTraits(true)};
}

}  // namespace kvtrim::kv
