// Budgets: how many entries each KV head may keep. The one place a retention
// target (a ratio or a token count) becomes entries, and the allocators that
// spread a total over heads. Plain numbers in, per-head budgets out: no
// cache, no policy, no statistics, so it sits below the Compressor and every
// allocator is testable by hand.
//
// The path of --kv-ratio: KvOptions::ratio -> Target -> Uniform(target, n)
// (ceil(r n), the uniform per-head budget) -> the policy's allocator
// (PolicyTraits::budget: uniform, pyramid, shared top-k, castes) or the user's
// (profile units, adaptive) -> one budget per KV head -> Policy::Compress.
#pragma once
#include <cstdint>
#include <vector>

namespace kvtrim::kv::budget {

// What compression is asked to reach.
struct Target {
  double ratio = 1.0;   // retention ratio in (0, 1]
  int64_t tokens = 0;   // > 0: a fixed per-head budget in entries, wins over ratio
  // The ratio was asked for (KvOptions::ratio_explicit: --kv-ratio, an eval
  // cell, a request's kv_ratio): a policy with a sizing rule of its own
  // (razor's compression factor) follows it then, and ratio 1 keeps all.
  bool ratio_explicit = false;
};

// The uniform per-head budget at logical length n: `tokens` when given, else
// ceil(ratio * n) (1e-9 of slack so that r n landing on an integer stays it).
int64_t Uniform(const Target& t, int64_t n);
// The retention the target means at length n: tokens / n (at most 1) or ratio.
double Ratio(const Target& t, int64_t n);

// Allocators a policy can ask for (PolicyTraits::budget).
enum class Kind {
  kUniform,  // every head the uniform budget
  kPyramid,  // PyramidKV: layer budgets fall linearly, the total unchanged
  kShared,   // KVzip: one top-k over the entry scores of every head of every layer
  kCastes,   // RazorAttention: some heads whole, the others one fixed budget
};

struct Spec {
  Kind kind = Kind::kUniform;
  double pyramid_beta = 20;   // kPyramid: top layer b (2 - 1/beta), bottom b / beta
  int shared_floor = 1;       // kShared: entries every head keeps at least
  double shared_floor_share = 0;  // kShared: and at least this share of the uniform per-head budget (AdaKV's safeguard)
  std::vector<char> whole;    // kCastes: [n_layer * n_head_kv], 1 = kept whole
  int caste_budget = -1;      // kCastes: every other head's budget; < 0: nothing compressed
};

// Budget of layer `layer` (of n_layer) from the uniform budget `base`:
// kPyramid interpolates linearly from b (2 - 1/beta) at layer 0 to b / beta
// at the last, rounded to nearest; every other kind returns base.
int LayerBudget(const Spec& s, int layer, int n_layer, int base);

// Per-head budgets, flat l * n_head_kv + h, of a cache of logical length n
// whose uniform per-head budget is `base`, never below `min_entries` (what
// the policy protects, at least 1). A base covering the whole sequence
// compresses nothing: every head gets n. kCastes gives whole heads INT_MAX;
// kShared (without `shared` counts) behaves as kUniform: the shared counts
// come from SharedTopK over the policy's scores.
std::vector<int> HeadBudgets(const Spec& s, int64_t base, int64_t n, int n_layer, int n_head_kv, int min_entries,
                             const std::vector<int>* shared = nullptr);

// KVzip's shared budget: `total` entries over all heads, each head keeping
// at least min(floor, its size) of its own best; the rest by one global
// ranking of scores (ties: the later entry, then the later head), so a head's
// kept entries are its top count[h] under KeepTop's order. The counts sum to
// min(total, entries), never below the floors' sum.
std::vector<int> SharedTopK(const std::vector<std::vector<double>>& scores, int64_t total, int floor);

// Per-entry scores of one head for head-adaptive budgets (AdaKV): higher =
// more worth keeping; `prot` marks entries the policy keeps whatever its
// budget. `mass`: the scores are attention mass (>= 0), normalised per head
// by their sum; otherwise any real numbers, shifted by the head's minimum
// first. Scores of protected entries are their real values.
struct EntryScores {
  std::vector<double> score;
  std::vector<bool> prot;
  bool mass = true;
};

// One head's scores made comparable across heads: mass scores divided by
// their sum; other scores shifted by their minimum, then divided by the sum.
// Every entry counts; a head whose sum is 0 gets 1/n each.
std::vector<double> NormalizeHeadScores(const EntryScores& e);

// AdaKV (--head-budget adaptive): budgets of the heads of one layer whose
// uniform per-head budget is `b` (layer total T = heads * b). Head h first
// gets its floor f_h = min(n_h, max(ceil(min_share * b), protected_h)); the
// other T - sum f_h places go to the highest normalised scores among all
// heads' remaining entries (ties: the newer entry, then the lower head).
// Budgets sum to min(T, sum n_h) (more only when the floors exceed T).
std::vector<int> AdaptiveHeadBudgets(const std::vector<EntryScores>& heads, int b, double min_share);

// Threshold eviction (--kv-threshold): each head keeps its protected entries
// and every other entry whose normalised score (NormalizeHeadScores, times
// the head's n: relative to the head's mean) exceeds `t`; the budget is
// their count, at least 1 for a non-empty head. Relative to the mean, the
// same t keeps about the same share of a longer context.
std::vector<int> ThresholdHeadBudgets(const std::vector<EntryScores>& heads, double t);

// Profile units (kvtrim profile --head-budgets, METHODS.md 4): budget_h =
// base * units_h / mean(units), rounded by largest remainder so they sum to
// base * heads exactly; each at least `min_entries` (taken from the largest
// budgets) and at most n.
std::vector<int> DistributeBudget(const std::vector<int>& units, int base, int n, int min_entries);

}  // namespace kvtrim::kv::budget
