// Drives a policy over a cache: collects the statistics it asks for, applies
// its plans at the two compression points (once after prefill; during decode
// whenever a head exceeds its budget), then quantizes what is kept.
#pragma once
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "kernels/thread_pool.h"
#include "kv/budget.h"
#include "kv/cache.h"
#include "kv/policy.h"
#include "kv/stats.h"
#include "kvtrim/options.h"
#include "kvtrim/status.h"

namespace kvtrim::kv {

using CompressionOptions = KvOptions;  // include/kvtrim/options.h

Expected<GgmlType> ParseKvQuant(const std::string& s);
// The type a cache for `o` stores entries in from the first token:
// o.quant when o.quant_at is "write", f32 when it is "kept" (quantized after
// compression); any other quant_at is an error.
Expected<GgmlType> WriteType(const CompressionOptions& o);
// Whether entries stored in `type` are stored rotated under o.rotate
// (auto: q8_0 and q4_0); any other value is an error.
Expected<bool> RotatesKv(const CompressionOptions& o, GgmlType type);
// Where o.bf16_attention puts attention's tile products in bf16
// (kernels::KvView::bf16_tiles): the prefill's cache ("all") and the
// reference pass's copy ("pass", "all"); "off" neither; any other value is
// an error.
struct Bf16Tiles {
  bool prefill = false;
  bool pass = false;
};
Expected<Bf16Tiles> Bf16TilesOf(const CompressionOptions& o);
// Checks a policy's plan for a head of n entries of dimension d before the
// cache applies it (indices in range, each entry used once, keep in order).
Status ValidatePlan(const Plan& plan, int n, int d);

class Compressor {
 public:
  // `also` lists policies whose statistics are collected too (for forks).
  static Expected<std::unique_ptr<Compressor>> Create(const CompressionOptions& o, int n_layer, int n_head_kv,
                                                      int group, int head_dim,
                                                      const std::vector<CompressionOptions>& also = {});
  // The same for a policy object outside the registry (tests, embedders):
  // its traits().needs decide the statistics; o.policy names it in reports.
  static Expected<std::unique_ptr<Compressor>> CreateFor(std::unique_ptr<Policy> policy, const CompressionOptions& o,
                                                         int n_layer, int n_head_kv, int group, int head_dim,
                                                         const std::vector<CompressionOptions>& also = {});
  // A compressor for `o` that starts from a copy of this one's statistics.
  Expected<std::unique_ptr<Compressor>> Fork(const CompressionOptions& o) const;

  const CompressionOptions& options() const { return o_; }
  // Compress at this retention ratio from now on (context-calibrated r*).
  void SetRatio(double r) {
    o_.ratio = r;
    o_.budget_tokens = 0;
  }
  Policy& policy() { return *policy_; }
  const Policy& policy() const { return *policy_; }
  // Compress with this policy object instead (a policy outside the registry:
  // tests, embedders), reported under `name`; the statistics stay those of
  // the policy the compressor was created with.
  void UsePolicy(std::unique_ptr<Policy> p, std::string name) {
    policy_ = std::move(p);
    o_.policy = std::move(name);
  }
  // Whether every head is checked after each plan (KvOptions::check_finite; debug builds: always).
  bool check_finite() const { return check_finite_; }
  // Tap to pass to the forward pass (null when the policy needs no statistics).
  AttentionTap* tap() {
    return needs_.any_probs() || needs_.prefill_qk || needs_.query_window > 0 ? stats_.get() : nullptr;
  }
  AttentionStats& stats() { return *stats_; }
  // Per-head budget of `layer` at logical length n.
  int Budget(int layer, int64_t n) const;
  // Nonuniform head budgets (METHODS.md section 4): units per KV head, flat
  // l * n_head_kv + h. From now on head (l, h) may keep
  // DistributeBudget(units, base, n, max(1, protected))[l * n_head_kv + h]
  // entries, base the uniform per-head budget: the total stays the uniform
  // one. They replace the policy's allocator (PolicyTraits::budget). Empty: off.
  Status SetHeadUnits(std::vector<int> units);
  bool head_budgets() const { return !head_units_.empty(); }
  // Budgets of every KV head at logical length n, flat l * n_head_kv + h
  // (profile units, else the policy's allocator, kv/budget.h): one
  // distribution per call, so a decode step computes it once for all heads.
  std::vector<int> HeadBudgets(int64_t n) const;
  int HeadBudgetAt(int layer, int h, int64_t n) const;  // HeadBudgets(n)[l * n_head_kv + h]
  // --head-budget adaptive: the budgets of layer l's heads from the policy's
  // entry scores (budget::AdaptiveHeadBudgets), their sum the uniform layer total.
  bool adaptive() const { return adaptive_; }
  bool threshold() const { return threshold_; }  // --kv-threshold
  std::vector<int> AdaptiveBudgets(const KvCache& cache, int layer, Phase phase, kernels::ThreadPool* pool = nullptr,
                                   int64_t n_budget = -1);  // n_budget: the length budgeted for (-1: the cache's)

  // The model's RoPE, passed to the policies (Expected Attention).
  void SetRope(const RopeSpec& r) { rope_ = r; }
  // The output projection's per-query-head Gram blocks [n_layer][n_head][hd][hd]
  // (model/output_gram.h), for policies that weigh entries by ||W_o v||.
  void SetOutputGram(std::vector<float> g) { out_gram_ = std::move(g); }
  bool has_output_gram() const { return !out_gram_.empty(); }
  // Seconds the last reference pass (ReferencePass) took, and the prefill
  // before it: reported as the counters ref-pass-us and prefill-us.
  // A reference pass took pass_s (summed over the passes: one per chunk of
  // a chunked prefill, one per layer on-policy); prefill_s: the prefill's time so far.
  // reused: the pass was another fork's (Session's memo), not run here; its
  // time is still charged (counter ref-pass-reused-us: what Compress() did
  // not spend on it, for callers timing Compress themselves).
  // tokens: how many the pass repeated (counter ref-pass-tokens, summed).
  void AddReferenceTiming(double pass_s, double prefill_s, bool reused = false, int64_t tokens = 0) {
    ref_pass_s_ = std::max(ref_pass_s_, 0.0) + pass_s;
    prefill_s_ = prefill_s;
    if (reused) reused_pass_s_ += pass_s;
    ref_pass_tokens_ += tokens;
  }
  double reused_pass_seconds() const { return reused_pass_s_; }

  // The prompt will end at this logical length (SnapKV's observation window).
  void BeginPrompt(int64_t prompt_end) { stats_->SetPromptEnd(prompt_end); }
  // Chunked prefill (KvOptions::prefill_chunk): the next chunk ends at
  // logical length `chunk_end`, so SnapKV's window is that chunk's last w
  // positions; after the first chunk the window mass of the one before is
  // cleared (each chunk's window votes afresh over every entry held).
  // chunk_from: the chunk's first logical position when the prompt is
  // prefilled in more than one chunk, -1 for a single chunk
  // (PolicyContext::chunk_from, until FinishPrefill).
  // hold_from: the first logical position held whole (PolicyContext::hold_from).
  void BeginChunk(int64_t chunk_end, bool first, int64_t chunk_from = -1, int64_t hold_from = -1);
  // After every chunk of a chunked prefill but the last: each head over its
  // budget for the whole prompt (logical length prompt_end) is brought back
  // within it (Policy::EndChunk on every head first), then the chunk's
  // pre-RoPE keys and queries are dropped; nothing is quantized (the last
  // chunk's CompressPrefill does that). A policy that cannot stream
  // (Policy::StreamBlocker) is an error.
  Status CompressChunk(KvCache& cache, int64_t prompt_end, kernels::ThreadPool* pool = nullptr);
  // The same for one layer (a pass that compresses each layer as it reaches
  // it, ReferencePass::compress_in_pass), layers in increasing order; after
  // the last layer the chunk's prefill keys and queries are dropped.
  Status CompressChunkLayer(KvCache& cache, int layer, int64_t prompt_end, kernels::ThreadPool* pool = nullptr);
  // An error naming why `o`'s policy cannot compress a prefill in chunks;
  // OK when it can or prefill_chunk is off.
  static Status CheckStreams(const CompressionOptions& o, const Policy& p);
  // Prefill-time compression, then quantization of what is kept.
  // Heads run in parallel on `pool` when given.
  Status CompressPrefill(KvCache& cache, kernels::ThreadPool* pool = nullptr);
  // The same in steps (on-policy reference passes between layers): one
  // layer's prefill-time compression, then FinishPrefill once.
  Status CompressPrefillLayer(KvCache& cache, int layer, kernels::ThreadPool* pool = nullptr);
  void FinishPrefill(KvCache& cache);
  // Decode-time: heads over budget are brought back under it (heads in
  // parallel on `pool` when given).
  Status AfterDecodeStep(KvCache& cache, kernels::ThreadPool* pool = nullptr);

  double compress_seconds() const { return compress_s_; }  // total time in plans + applying
  // Seconds the last prefill-time compression spent per layer (plans +
  // applying, summed over the layer's heads, which run in parallel with
  // other layers' heads).
  const std::vector<double>& prefill_layer_seconds() const { return layer_s_; }
  int64_t evictions() const { return evicted_.load(); }
  // The shared allocator's last counts per head (l * n_head_kv + h; KVzip's
  // shared budget), empty when none ran.
  const std::vector<int>& shared_counts() const { return shared_; }
  // The policy's own counters (e.g. KVSlimmer's merges and fallbacks).
  // With a reference pass, also its time and the prefill's (microseconds).
  std::vector<std::pair<std::string, int64_t>> counters() const;

 private:
  Compressor() = default;
  budget::Target target() const;   // the options' ratio or token count
  int BaseBudget(int64_t n) const;  // uniform per-head budget before layer/head shaping
  PolicyContext Context(const KvCache& cache, int layer, int h, Phase phase) const;
  // Layers [l0, l1)'s prefill-time compression to the budgets of logical
  // length n_budget, their heads in one parallel loop.
  Status CompressLayers(KvCache& cache, int l0, int l1, int64_t n_budget, kernels::ThreadPool* pool);
  // Layer l's head budgets in `budgets` ([n_layer * n_head_kv]) where they
  // depend on its scores (--kv-threshold, adaptive budgets).
  void LayerBudgets(KvCache& cache, int l, int64_t n_budget, kernels::ThreadPool* pool, std::vector<int>* budgets);
  // The policy's entry scores of every head of one layer (Policy::Score).
  std::vector<EntryScores> LayerScores(const KvCache& cache, int layer, Phase phase, kernels::ThreadPool* pool);
  // The shared allocator's counts (KVzip) for a prompt of logical length
  // n, before any head changes.
  void PrepareShared(const KvCache& cache, int64_t n, kernels::ThreadPool* pool);
  // An error when the policy cannot compress a prefill in chunks (StreamBlocker).
  Status RefusesChunks() const;
  // alone: the pool when this head runs by itself (PolicyContext::pool).
  Status CompressHead(KvCache& cache, int layer, int h, Phase phase, int budget, int64_t budget_len = 0,
                      kernels::ThreadPool* alone = nullptr);
  CompressionOptions o_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<AttentionStats> stats_;
  StatsNeeds needs_;
  GgmlType quant_ = GgmlType::F32;
  bool rotate_ = false;  // the kept entries stored rotated (RotatesKv)
  bool bf16_products_ = false;  // Bf16TilesOf(o).pass: PolicyContext::bf16_products
  bool check_finite_ = false;
  int n_layer_ = 0, n_head_kv_ = 0, group_ = 1, head_dim_ = 0;
  double compress_s_ = 0;
  std::vector<double> layer_s_;
  std::vector<int> head_units_;
  std::vector<int> shared_;  // [n_layer * n_head_kv] budget::SharedTopK's counts; empty: none
  bool adaptive_ = false;
  bool threshold_ = false;  // --kv-threshold
  RopeSpec rope_;
  std::vector<float> out_gram_;
  double ref_pass_s_ = -1, prefill_s_ = 0, reused_pass_s_ = 0;
  int64_t ref_pass_tokens_ = 0;
  std::atomic<int64_t> evicted_{0};
  int64_t chunk_from_ = -1;  // BeginChunk's, -1 outside a prefill in several chunks
  int64_t hold_from_ = -1;   // BeginChunk's, -1 but in a conversation's turn
};

}  // namespace kvtrim::kv
