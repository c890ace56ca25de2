#include "kv/compressor.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "kvtrim/clock.h"
#include "kv/budget.h"
#include "kv/check.h"

namespace kvtrim::kv {

Expected<GgmlType> ParseKvQuant(const std::string& s) {
  if (s == "f32" || s == "none") return GgmlType::F32;
  if (s == "f16") return GgmlType::F16;
  if (s == "q8_0") return GgmlType::Q8_0;
  if (s == "q4_0") return GgmlType::Q4_0;
  return MakeError("unknown KV quantization '" + s + "' (f32, f16, q8_0, q4_0)");
}

Expected<GgmlType> WriteType(const CompressionOptions& o) {
  auto q = ParseKvQuant(o.quant);
  if (!q.ok()) return q.error();
  if (o.quant_at == "write") return q.value();
  if (o.quant_at == "kept") return GgmlType::F32;
  return MakeError("unknown KV quantization point '" + o.quant_at + "' (write, kept)");
}

Expected<bool> RotatesKv(const CompressionOptions& o, GgmlType type) {
  if (o.rotate == "auto") return type == GgmlType::Q8_0 || type == GgmlType::Q4_0;
  if (o.rotate == "on") return true;
  if (o.rotate == "off") return false;
  return MakeError("unknown KV rotation setting '" + o.rotate + "' (auto, on, off)");
}

Expected<Bf16Tiles> Bf16TilesOf(const CompressionOptions& o) {
  if (o.bf16_attention == "pass") return Bf16Tiles{false, true};
  if (o.bf16_attention == "all") return Bf16Tiles{true, true};
  if (o.bf16_attention == "off") return Bf16Tiles{false, false};
  return MakeError("unknown bf16 attention setting '" + o.bf16_attention + "' (pass, all, off)");
}

namespace {

// Whether statistics collected with `have` serve a policy that needs `want`.
bool Covers(const StatsNeeds& have, const StatsNeeds& want) {
  return CoversTaps(have.taps, want.taps) && (!want.prefill_qk || have.prefill_qk) &&
         (!want.prefill_k || have.prefill_k) &&
         (want.query_window == 0 || want.query_window == have.query_window);
}

Status Merge(StatsNeeds* into, const StatsNeeds& n, const std::string& name) {
  if (n.query_window && into->query_window && n.query_window != into->query_window)
    return MakeError("policy '" + name + "' needs another query window than the others forked from this session");
  KVTRIM_RETURN_IF_ERROR(MergeTaps(&into->taps, n.taps, name));
  into->query_window = std::max(into->query_window, n.query_window);
  into->prefill_qk |= n.prefill_qk;
  into->prefill_k |= n.prefill_k;
  return {};
}

// The registered policies --head-budget adaptive takes (they score entries
// and leave the allocation to the user), read from their traits.
std::string AdaptivePolicies() {
  std::string names;
  for (const PolicyInfo& info : Registry()) {
    auto t = TraitsFor(info.name, {});
    if (!t.ok() || !TakesAdaptiveBudgets(t.value())) continue;
    names += (names.empty() ? "" : ", ") + info.name;
  }
  return names;
}

// A budget that follows a policy's entry scores (AdaKV, threshold eviction)
// needs a policy that scores entries and leaves the allocation to it.
Status CheckScoresEntries(const std::string& flag, const Policy& p, const std::string& name) {
  const budget::Kind k = p.traits().budget.kind;
  if (k == budget::Kind::kShared || k == budget::Kind::kCastes)
    return MakeError(flag + ": policy '" + name + "' allocates its own per-head budgets");
  if (!p.traits().scores_entries)
    return MakeError(flag + " needs a policy that scores entries (" + AdaptivePolicies() + "), not '" + name + "'");
  return {};
}

}  // namespace

Status ValidatePlan(const Plan& plan, int n, int d) {
  // keep: strictly increasing and in range, hence each entry at most once.
  for (size_t k = 1; k < plan.keep.size(); ++k)
    if (plan.keep[k] <= plan.keep[k - 1]) return MakeError("policy plan keeps entries out of order");
  auto in_range = [n](int i) { return i >= 0 && i < n; };
  auto out_of_range = [n](int i) { return MakeError("policy plan names entry " + std::to_string(i) + " of " + std::to_string(n)); };
  if (!plan.keep.empty() && !in_range(plan.keep.front())) return out_of_range(plan.keep.front());
  if (!plan.keep.empty() && !in_range(plan.keep.back())) return out_of_range(plan.keep.back());
  for (const auto& [i, b] : plan.set_logw) {
    if (!in_range(i)) return out_of_range(i);
    if (!ValidLogw(b)) return MakeError("policy plan sets log-weight " + std::to_string(b) + " (NaN or +inf)");
  }
  // Overwritten rows: in range, of the head dimension, finite (no allocation:
  // eviction-only plans run on the decode path).
  auto bad_row = [&](const char* what, int i, const std::vector<float>& r, bool indexed = true) -> Status {
    if (indexed && !in_range(i)) return out_of_range(i);  // not indexed: a synthetic entry's row
    if (static_cast<int>(r.size()) != d)
      return MakeError(std::string("policy plan sets a ") + what + " of dimension " + std::to_string(r.size()) +
                       " (head dimension " + std::to_string(d) + ")");
    for (float x : r)
      if (!std::isfinite(x)) return MakeError(std::string("policy plan sets a non-finite ") + what);
    return {};
  };
  for (const auto& [i, v] : plan.set_value) KVTRIM_RETURN_IF_ERROR(bad_row("value", i, v));
  for (const auto& [i, k] : plan.set_key) KVTRIM_RETURN_IF_ERROR(bad_row("key", i, k));
  if (plan.merge.empty() && plan.add.empty()) return {};  // eviction only: no allocation on the decode path
  std::vector<char> used(n, 0);
  for (int i : plan.keep) used[i] = 1;
  for (const MergeEntry& m : plan.merge) {
    if (m.sources.empty()) return MakeError("policy plan merges no entries");
    if (!m.key_weights.empty() && m.key_weights.size() != m.sources.size())
      return MakeError("policy plan gives " + std::to_string(m.key_weights.size()) + " key weights for " +
                       std::to_string(m.sources.size()) + " merged entries");
    for (float w : m.key_weights)
      if (!std::isfinite(w)) return MakeError("policy plan gives a non-finite key weight");
    for (int i : m.sources) {
      if (!in_range(i)) return out_of_range(i);
      if (used[i]) return MakeError("policy plan uses entry " + std::to_string(i) + " twice");
      used[i] = 1;
    }
  }
  for (const SyntheticEntry& e : plan.add) {
    if (static_cast<int>(e.k.size()) != d || static_cast<int>(e.v.size()) != d)
      return MakeError("policy plan adds an entry of the wrong head dimension");
    KVTRIM_RETURN_IF_ERROR(bad_row("key", 0, e.k, false));
    KVTRIM_RETURN_IF_ERROR(bad_row("value", 0, e.v, false));
    if (!ValidLogw(e.logw)) return MakeError("policy plan adds an entry of log-weight " + std::to_string(e.logw));
  }
  return {};
}

Expected<std::unique_ptr<Compressor>> Compressor::Create(const CompressionOptions& o, int n_layer, int n_head_kv,
                                                         int group, int head_dim,
                                                         const std::vector<CompressionOptions>& also) {
  if (!(o.ratio > 0.0 && o.ratio <= 1.0)) {
    return MakeError("retention ratio " + std::to_string(o.ratio) + " is outside (0, 1]");
  }
  if (o.budget_tokens < 0) return MakeError("token budget must be positive");
  auto p = MakePolicy(o.policy, o.params);
  if (!p.ok()) return p.error();
  return CreateFor(std::move(p.value()), o, n_layer, n_head_kv, group, head_dim, also);
}

Expected<std::unique_ptr<Compressor>> Compressor::CreateFor(std::unique_ptr<Policy> policy,
                                                            const CompressionOptions& o, int n_layer, int n_head_kv,
                                                            int group, int head_dim,
                                                            const std::vector<CompressionOptions>& also) {
  if (!policy) return MakeError("no policy");
  if (!(o.ratio > 0.0 && o.ratio <= 1.0)) {
    return MakeError("retention ratio " + std::to_string(o.ratio) + " is outside (0, 1]");
  }
  if (o.budget_tokens < 0) return MakeError("token budget must be positive");
  auto q = ParseKvQuant(o.quant);
  if (!q.ok()) return q.error();
  if (auto w = WriteType(o); !w.ok()) return w.error();
  auto rot = RotatesKv(o, q.value());
  if (!rot.ok()) return rot.error();
  std::unique_ptr<Compressor> c(new Compressor());
  auto tiles = Bf16TilesOf(o);
  if (!tiles.ok()) return tiles.error();
  c->rotate_ = rot.value();
  c->bf16_products_ = tiles.value().pass;
  c->o_ = o;
  c->policy_ = std::move(policy);
#if !defined(NDEBUG) || defined(KVTRIM_CHECK_FINITE)
  c->check_finite_ = true;  // debug and sanitizer builds always verify the cache
#else
  c->check_finite_ = o.check_finite;
#endif
  c->quant_ = q.value();
  c->n_layer_ = n_layer;
  c->n_head_kv_ = n_head_kv;
  if (o.budget_tokens > 0) {
    const budget::Spec spec = c->policy_->traits().budget;
    for (int l = 0; l < n_layer; ++l) {
      int b = budget::LayerBudget(spec, l, n_layer, o.budget_tokens);
      if (b < c->policy_->traits().protected_entries || b < 1) {
        return MakeError("token budget " + std::to_string(o.budget_tokens) + " (layer " + std::to_string(l) + ": " +
                         std::to_string(b) + ") is smaller than the " + std::to_string(c->policy_->traits().protected_entries) +
                         " tokens policy '" + o.policy + "' protects");
      }
    }
  }
  c->group_ = group;
  c->head_dim_ = head_dim;
  if (o.threshold != 0) {
    if (!(o.threshold > 0 && o.threshold <= 1e6))
      return MakeError("--kv-threshold " + std::to_string(o.threshold) + " is outside (0, 1e6]");
    if (o.head_budget == "adaptive") return MakeError("--kv-threshold and --head-budget adaptive exclude each other");
    KVTRIM_RETURN_IF_ERROR(CheckScoresEntries("--kv-threshold", *c->policy_, o.policy));
    c->threshold_ = true;
  }
  if (o.head_budget == "adaptive") {
    KVTRIM_RETURN_IF_ERROR(CheckScoresEntries("--head-budget adaptive", *c->policy_, o.policy));
    if (!(o.min_head_share >= 0.0 && o.min_head_share <= 1.0))
      return MakeError("--min-head-share " + std::to_string(o.min_head_share) + " is outside [0, 1]");
    c->adaptive_ = true;
  } else if (!o.head_budget.empty() && o.head_budget != "uniform") {
    return MakeError("unknown --head-budget '" + o.head_budget + "' (uniform, adaptive)");
  }
  c->needs_ = c->policy_->traits().needs;
  KVTRIM_RETURN_IF_ERROR(CheckTaps(c->needs_.taps));
  for (const auto& a : also) {
    auto t = TraitsFor(a.policy, a.params);
    if (!t.ok()) return t.error();
    KVTRIM_RETURN_IF_ERROR(Merge(&c->needs_, t.value().needs, a.policy));
  }
  c->stats_ = std::make_unique<AttentionStats>(n_layer, n_head_kv, group, head_dim, c->needs_);
  return c;
}

Expected<std::unique_ptr<Compressor>> Compressor::Fork(const CompressionOptions& o) const {
  auto c = Create(o, n_layer_, n_head_kv_, group_, head_dim_);
  if (!c.ok()) return c.error();
  if (!Covers(needs_, c.value()->needs_)) {
    return MakeError("policy '" + o.policy + "' needs statistics this session did not collect (add it to fork_targets)");
  }
  c.value()->needs_ = needs_;  // keep collecting what was collected (the copy stays consistent)
  c.value()->stats_ = std::make_unique<AttentionStats>(*stats_);
  return c;
}

budget::Target Compressor::target() const { return {o_.ratio, o_.budget_tokens, o_.ratio_explicit}; }

int Compressor::BaseBudget(int64_t n) const {
  return static_cast<int>(std::min<int64_t>(budget::Uniform(target(), n), INT32_MAX));
}

int Compressor::Budget(int layer, int64_t n) const {
  const int base = BaseBudget(n);
  if (base >= n) return static_cast<int>(std::min<int64_t>(n, INT32_MAX));
  const int b = budget::LayerBudget(policy_->traits().budget, layer, n_layer_, std::max(1, base));
  return std::max({1, b, policy_->traits().protected_entries});
}

Status Compressor::SetHeadUnits(std::vector<int> units) {
  if (!units.empty() && adaptive_) return MakeError("--head-budget adaptive and profile head budgets exclude each other");
  if (!units.empty() && threshold_) return MakeError("--kv-threshold and profile head budgets exclude each other");
  if (!units.empty() && static_cast<int>(units.size()) != n_layer_ * n_head_kv_)
    return MakeError("head budgets: " + std::to_string(units.size()) + " units for " +
                     std::to_string(n_layer_ * n_head_kv_) + " KV heads");
  head_units_ = std::move(units);
  return {};
}

std::vector<int> Compressor::HeadBudgets(int64_t n) const {
  const int base = BaseBudget(n);
  // Never below what the policy protects.
  const int min_e = std::max(1, policy_->traits().protected_entries);
  if (head_units_.empty())
    return budget::HeadBudgets(policy_->traits().budget, base, n, n_layer_, n_head_kv_, min_e, &shared_);
  const int nn = static_cast<int>(std::min<int64_t>(n, INT32_MAX));
  if (base >= n) return std::vector<int>(head_units_.size(), nn);
  return budget::DistributeBudget(head_units_, std::max(min_e, base), nn, min_e);
}

int Compressor::HeadBudgetAt(int layer, int h, int64_t n) const {
  return HeadBudgets(n)[static_cast<size_t>(layer) * n_head_kv_ + h];
}

PolicyContext Compressor::Context(const KvCache& cache, int layer, int h, Phase phase) const {
  PolicyContext ctx;
  ctx.phase = phase;
  ctx.layer = layer;
  ctx.head = h;
  ctx.n_layer = n_layer_;
  ctx.n_head_kv = n_head_kv_;
  ctx.store = &cache.head(layer, h);
  ctx.stats = &stats_->head(layer, h);
  ctx.all_stats = stats_.get();
  ctx.logical_len = cache.logical_length();
  ctx.rope_len = cache.rope_length();
  ctx.rope = &rope_;
  ctx.bf16_products = bf16_products_;
  const size_t block = static_cast<size_t>(group_) * head_dim_ * head_dim_;
  if (out_gram_.size() == block * n_layer_ * n_head_kv_) {  // this head's G query heads are consecutive
    ctx.out_gram = out_gram_.data() + (static_cast<size_t>(layer) * n_head_kv_ + h) * block;
  }
  return ctx;
}

std::vector<EntryScores> Compressor::LayerScores(const KvCache& cache, int layer, Phase phase,
                                                kernels::ThreadPool* pool) {
  std::vector<EntryScores> sc(n_head_kv_);
  auto run = [&](int64_t a, int64_t e) {
    for (int64_t h = a; h < e; ++h) sc[h] = policy_->Score(Context(cache, layer, static_cast<int>(h), phase));
  };
  if (pool) pool->ParallelFor(n_head_kv_, run);
  else run(0, n_head_kv_);
  return sc;
}

std::vector<int> Compressor::AdaptiveBudgets(const KvCache& cache, int layer, Phase phase, kernels::ThreadPool* pool,
                                             int64_t n_budget) {
  const int64_t n = n_budget >= 0 ? n_budget : cache.logical_length();
  return budget::AdaptiveHeadBudgets(LayerScores(cache, layer, phase, pool), Budget(layer, n), o_.min_head_share);
}

void Compressor::PrepareShared(const KvCache& cache, int64_t n, kernels::ThreadPool* pool) {
  shared_.clear();
  const budget::Spec spec = policy_->traits().budget;
  const int64_t base = budget::Uniform(target(), n);
  if (spec.kind != budget::Kind::kShared || base >= n) return;  // nothing is compressed
  // Every head's entries held (in a chunked prefill: the carried past and
  // the chunk) compete for the whole prompt's total.
  std::vector<std::vector<double>> scores;
  scores.reserve(static_cast<size_t>(n_layer_) * n_head_kv_);
  for (int l = 0; l < n_layer_; ++l)
    for (EntryScores& e : LayerScores(cache, l, Phase::kPrefill, pool)) scores.push_back(std::move(e.score));
  const int64_t total = std::max<int64_t>(1, base) * n_layer_ * n_head_kv_;
  // The floor: a share of the uniform budget (at most all of it), or entries.
  const int64_t share_floor = static_cast<int64_t>(std::ceil(std::clamp(spec.shared_floor_share, 0.0, 1.0) * base));
  shared_ = budget::SharedTopK(scores, total, static_cast<int>(std::max<int64_t>(spec.shared_floor, share_floor)));
}

std::vector<std::pair<std::string, int64_t>> Compressor::counters() const {
  auto c = policy_->Counters();
  if (!shared_.empty()) {  // the shared allocator's spread over heads
    auto [lo, hi] = std::minmax_element(shared_.begin(), shared_.end());
    c.emplace_back("head-min", *lo);
    c.emplace_back("head-max", *hi);
  }
  if (ref_pass_s_ >= 0) {
    c.emplace_back("ref-pass-us", std::llround(ref_pass_s_ * 1e6));
    c.emplace_back("prefill-us", std::llround(prefill_s_ * 1e6));
    c.emplace_back("ref-pass-tokens", ref_pass_tokens_);
    if (reused_pass_s_ > 0) c.emplace_back("ref-pass-reused-us", std::llround(reused_pass_s_ * 1e6));
    // Either interval spanning fewer than kMinClockSteps steps of the
    // wall clock (20 ms on some machines) is below its resolution: say so.
    const double min_s = SteadyClock().Span() * 1e-9;
    if (ref_pass_s_ < min_s || prefill_s_ < min_s) c.emplace_back("timing-below-clock-res", 1);
  }
  return c;
}

Status Compressor::CompressHead(KvCache& cache, int layer, int h, Phase phase, int budget, int64_t budget_len,
                                kernels::ThreadPool* alone) {
  HeadStore& hs = cache.head(layer, h);
  PolicyContext ctx = Context(cache, layer, h, phase);
  ctx.budget = budget;
  ctx.pool = alone;
  if (phase == Phase::kPrefill && chunk_from_ >= 0) ctx.chunk_from = chunk_from_, ctx.budget_len = budget_len;
  if (phase == Phase::kPrefill) ctx.hold_from = hold_from_;
  Plan plan = policy_->Compress(ctx);
  if (plan.noop) return {};
  KVTRIM_RETURN_IF_ERROR(ValidatePlan(plan, hs.size(), hs.head_dim()));
  const int before = hs.size();
  auto from = hs.Apply(plan);
  if (check_finite_) {
    if (Status st = CheckHead(hs); !st.ok())
      return MakeError("--check-finite: policy '" + o_.policy + "' left layer " + std::to_string(layer) + " head " +
                       std::to_string(h) + " inconsistent (" + (phase == Phase::kPrefill ? "prefill" : "decode") +
                       "): " + st.message());
  }
  if (plan.merge.empty() && plan.add.empty()) stats_->Retain(layer, h, plan.keep);
  else stats_->Rebuild(layer, h, from);
  evicted_ += before - hs.size();
  return {};
}

Status Compressor::CompressPrefill(KvCache& cache, kernels::ThreadPool* pool) {
  KVTRIM_RETURN_IF_ERROR(CompressLayers(cache, 0, n_layer_, cache.logical_length(), pool));
  FinishPrefill(cache);
  return {};
}

Status Compressor::CompressPrefillLayer(KvCache& cache, int l, kernels::ThreadPool* pool) {
  return CompressLayers(cache, l, l + 1, cache.logical_length(), pool);
}

void Compressor::LayerBudgets(KvCache& cache, int l, int64_t n_budget, kernels::ThreadPool* pool,
                              std::vector<int>* budgets) {
  if (threshold_) {  // each head's count over the threshold; the ratio plays no part
    const std::vector<int> a = budget::ThresholdHeadBudgets(LayerScores(cache, l, Phase::kPrefill, pool), o_.threshold);
    std::copy(a.begin(), a.end(), budgets->begin() + static_cast<std::ptrdiff_t>(l) * n_head_kv_);
  } else if (adaptive_ && Budget(l, n_budget) < n_budget) {
    const std::vector<int> a = AdaptiveBudgets(cache, l, Phase::kPrefill, pool, n_budget);
    std::copy(a.begin(), a.end(), budgets->begin() + static_cast<std::ptrdiff_t>(l) * n_head_kv_);
  }
}

// Layers [l0, l1) to the budgets of logical length n_budget: every head's
// budget first, then the (layer, head) pairs in one parallel loop, so the
// threads share all the heads (3 KV heads on 2 threads, layer by layer,
// left a thread idle a quarter of the time).
Status Compressor::CompressLayers(KvCache& cache, int l0, int l1, int64_t n_budget, kernels::ThreadPool* pool) {
  if (!policy_->traits().prefill_time) return {};
  const int64_t t0 = SteadyNowNs();
  if (layer_s_.size() != static_cast<size_t>(n_layer_)) layer_s_.assign(n_layer_, 0.0);
  // The whole-cache target first (razor solves its window, or answers
  // kUnreachable), before any head changes.
  if (l0 == 0) {
    KVTRIM_RETURN_IF_ERROR(policy_->Prepare({target(), n_budget, n_layer_, n_head_kv_}));
    PrepareShared(cache, n_budget, pool);
  }
  std::vector<int> budgets = HeadBudgets(n_budget);
  for (int l = l0; l < l1; ++l) LayerBudgets(cache, l, n_budget, pool, &budgets);
  // Heads are independent (plans, rows and statistics are per head).
  const int64_t jobs = static_cast<int64_t>(l1 - l0) * n_head_kv_;
  std::vector<Status> st(jobs);
  std::vector<int64_t> ns(jobs, 0);  // each head's time, summed per layer below
  const bool each_chunk = chunk_from_ >= 0 && policy_->traits().compresses_each_chunk;
  auto run_with = [&](int64_t a, int64_t e, kernels::ThreadPool* alone) {
    for (int64_t j = a; j < e; ++j) {
      const int l = l0 + static_cast<int>(j / n_head_kv_), h = static_cast<int>(j % n_head_kv_);
      const int b = budgets[static_cast<size_t>(l) * n_head_kv_ + h];
      const int64_t h0 = SteadyNowNs();
      if (cache.head(l, h).size() > b || each_chunk) st[j] = CompressHead(cache, l, h, Phase::kPrefill, b, n_budget, alone);
      ns[j] = SteadyNowNs() - h0;
    }
  };
  // The heads that do not divide among the threads (one of a layer's three
  // on two threads, as a pass compacting layer by layer has it) run one at a
  // time after the others, each with the pool for its own work
  // (PolicyContext::pool), instead of leaving a thread idle.
  const int64_t rest = pool && pool->size() > 1 ? jobs % pool->size() : 0;
  if (pool) pool->ParallelFor(jobs - rest, [&](int64_t a, int64_t e) { run_with(a, e, nullptr); });
  else run_with(0, jobs, nullptr);
  for (int64_t j = jobs - rest; j < jobs; ++j) run_with(j, j + 1, pool);
  for (const Status& s : st) KVTRIM_RETURN_IF_ERROR(s);
  std::fill(layer_s_.begin() + l0, layer_s_.begin() + l1, 0.0);
  for (int64_t j = 0; j < jobs; ++j) layer_s_[l0 + j / n_head_kv_] += static_cast<double>(ns[j]) * 1e-9;
  compress_s_ += static_cast<double>(SteadyNowNs() - t0) * 1e-9;
  return {};
}

void Compressor::BeginChunk(int64_t chunk_end, bool first, int64_t chunk_from, int64_t hold_from) {
  chunk_from_ = chunk_from;
  hold_from_ = hold_from;
  stats_->SetPromptEnd(chunk_end);
  if (!first) stats_->StartChunk();
}

Status Compressor::CheckStreams(const CompressionOptions& o, const Policy& p) {
  if (o.prefill_chunk < 0) return MakeError("--prefill-chunk " + std::to_string(o.prefill_chunk) + " is negative");
  if (o.prefill_chunk == 0 || !p.traits().prefill_time) return {};
  const std::string why = StreamBlocker(p.traits());
  if (!why.empty())
    return MakeError("--prefill-chunk: policy '" + o.policy + "' cannot compress as the prompt is prefilled: " + why +
                     " (run it without --prefill-chunk)");
  if (o.quality > 0)
    return MakeError("--prefill-chunk and --kv-quality exclude each other: the ratio is chosen from the whole "
                     "context's NLL, after its prefill");
  return {};
}

Status Compressor::RefusesChunks() const {
  if (const std::string why = StreamBlocker(policy_->traits()); !why.empty())
    return MakeError("policy '" + o_.policy + "' cannot compress a prefill in chunks: " + why);
  return {};
}

Status Compressor::CompressChunk(KvCache& cache, int64_t prompt_end, kernels::ThreadPool* pool) {
  if (!policy_->traits().prefill_time) return {};
  KVTRIM_RETURN_IF_ERROR(RefusesChunks());
  auto end_chunk = [&](int64_t a, int64_t e) {  // every (layer, head)
    for (int64_t j = a; j < e; ++j)
      policy_->EndChunk(Context(cache, static_cast<int>(j / n_head_kv_), static_cast<int>(j % n_head_kv_), Phase::kPrefill));
  };
  if (pool) pool->ParallelFor(static_cast<int64_t>(n_layer_) * n_head_kv_, end_chunk);
  else end_chunk(0, static_cast<int64_t>(n_layer_) * n_head_kv_);
  KVTRIM_RETURN_IF_ERROR(CompressLayers(cache, 0, n_layer_, prompt_end, pool));
  stats_->DropPrefillQK();
  return {};
}

Status Compressor::CompressChunkLayer(KvCache& cache, int l, int64_t prompt_end, kernels::ThreadPool* pool) {
  if (!policy_->traits().prefill_time) return {};
  KVTRIM_RETURN_IF_ERROR(RefusesChunks());
  for (int h = 0; h < n_head_kv_; ++h) policy_->EndChunk(Context(cache, l, h, Phase::kPrefill));
  KVTRIM_RETURN_IF_ERROR(CompressLayers(cache, l, l + 1, prompt_end, pool));
  if (l == n_layer_ - 1) stats_->DropPrefillQK();
  return {};
}

void Compressor::FinishPrefill(KvCache& cache) {
  auto t0 = std::chrono::steady_clock::now();
  chunk_from_ = hold_from_ = -1;
  stats_->DropPrefillQK();
  cache.Convert(quant_, rotate_);  // evict first, then quantize what stays
  compress_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Status Compressor::AfterDecodeStep(KvCache& cache, kernels::ThreadPool* pool) {
  if (!policy_->traits().decode_time) return {};
  auto t0 = std::chrono::steady_clock::now();
  struct Job { int layer, head, budget; };
  std::vector<Job> jobs;
  const std::vector<int> budgets = HeadBudgets(cache.logical_length());  // once per step, all heads
  for (int l = 0; l < n_layer_; ++l) {
    if (threshold_) {  // every step: each head's entries over the threshold
      const std::vector<int> a = budget::ThresholdHeadBudgets(LayerScores(cache, l, Phase::kDecode, pool), o_.threshold);
      for (int h = 0; h < n_head_kv_; ++h)
        if (cache.head(l, h).size() > a[h]) jobs.push_back({l, h, a[h]});
      continue;
    }
    if (adaptive_) {  // the layer's total is what is bounded; over it, its heads share it anew
      int64_t held = 0, total = 0;
      for (int h = 0; h < n_head_kv_; ++h) held += cache.head(l, h).size(), total += budgets[static_cast<size_t>(l) * n_head_kv_ + h];
      if (held <= total) continue;
      const std::vector<int> a = AdaptiveBudgets(cache, l, Phase::kDecode, pool);
      for (int h = 0; h < n_head_kv_; ++h)
        if (cache.head(l, h).size() > a[h]) jobs.push_back({l, h, a[h]});
      continue;
    }
    for (int h = 0; h < n_head_kv_; ++h) {
      const int b = budgets[static_cast<size_t>(l) * n_head_kv_ + h];
      if (cache.head(l, h).size() > b) jobs.push_back({l, h, b});
    }
  }
  // Heads are independent (plans, rows and statistics are per head).
  std::vector<Status> st(jobs.size());
  auto run = [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) st[i] = CompressHead(cache, jobs[i].layer, jobs[i].head, Phase::kDecode, jobs[i].budget);
  };
  if (pool) pool->ParallelFor(static_cast<int64_t>(jobs.size()), run);
  else run(0, static_cast<int64_t>(jobs.size()));
  for (const Status& s : st) KVTRIM_RETURN_IF_ERROR(s);
  compress_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {};
}

}  // namespace kvtrim::kv
