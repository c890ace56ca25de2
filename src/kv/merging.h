// Merging of adjacent entry pairs (METHODS.md section 5), shared by the
// `kvslimmer` and `merge-mean` policies: the observation (attention of the
// most recent queries, its output o), the pair choice (lowest pair mass),
// and rounds of at most `chunk` non-overlapping pair merges; the two
// policies differ only in the key weights of a pair.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kv/policy.h"

namespace kvtrim::kv {

// How the merged key of a pair is chosen.
enum class KeyRule {
  kClosedForm,  // KVSlimmer's closed-form weights
  kMean,        // plain mean (cardinality-weighted: the mean of every token the pair stands for)
};

struct MergingOptions {
  KeyRule rule = KeyRule::kClosedForm;
  int chunk = 512;        // pairs merged per round (scaled down for small budgets: EffectiveChunk)
  int sinks = 32;         // entries at positions < sinks are never merged
  int window = 32;        // observation window w: queries observed, and most recent entries protected
  bool l1 = false;        // norm of the c vectors: L2 (false) or L1
  bool diag_only = false; // ablation: c12 = 0
  // Ablation (the pre-audit reading): alpha renormalised over the non-sink
  // entries and o = sum alpha_i v_i without the sinks. Default: the seed's
  // eqs. 9 and 23-25, alpha over every entry of the head, sinks included,
  // and o over every entry (METHODS.md section 5, audit 2).
  bool renorm = false;
};

// Key weights (w_m, w_{m+1}) of a pair, and whether the closed form failed
// and the attention-weighted mean was used instead.
struct PairWeights {
  double wm = 0.5, wn = 0.5;
  bool fallback = false;
};

// KVSlimmer's closed form: with c11 = a_m (1 - 2 a_m)(v_m - o),
// c22 = a_n (1 - 2 a_n)(v_n - o), c12 = -a_m a_n (v_m + v_n - 2 o) (n = m+1),
// w_m = (|c11| - |c12|) / (|c11| - 2|c12| + |c22|), w_n = (|c22| - |c12|) / (same).
// Falls back to (a_m, a_n) / (a_m + a_n) (or 1/2, 1/2 if both are 0) when the
// denominator is ~0 or a weight leaves [0, 1]. v_m, v_n, o: [d].
PairWeights SlimmerWeights(double a_m, double a_n, const float* v_m, const float* v_n, const float* o, int d, bool l1,
                           bool diag_only);

// The chunk actually used for a budget: min(chunk, max(1, budget / 4))
// (the seed's 512 for a budget of 2048).
int EffectiveChunk(int chunk, int budget);

// Lowest-mass non-overlapping adjacent pairs: pair i is (i, i+1), eligible
// when both entries are; pairs are taken greedily by increasing mass
// `mass[i] + mass[i+1]` (ties: the older pair), at most `count`. Returns the
// first index of each chosen pair, increasing.
std::vector<int> ChoosePairs(const std::vector<double>& mass, const std::vector<bool>& eligible, int count);

class MergingPolicy : public Policy {
 public:
  explicit MergingPolicy(MergingOptions o) : o_(o) {}
  // The recent rows of the observation window; protected: the sinks, the
  // recent window, and one entry to merge into; the fallback rate printed.
  static PolicyTraits Traits(const MergingOptions& o);
  // Decode: a no-op until the head holds budget + chunk, then `chunk` pairs
  // merge. Prefill: rounds of up to `chunk` merges until the budget is met
  // (merged entries merge again).
  Plan Compress(const PolicyContext& ctx) override;
  std::vector<std::pair<std::string, int64_t>> Counters() const override;

 private:
  MergingOptions o_;
  std::atomic<int64_t> merges_{0}, fallbacks_{0}, rounds_{0};
};

}  // namespace kvtrim::kv
