// Head-adaptive budgets (AdaKV, `--head-budget adaptive`): instead of a fixed
// share per KV head, one top-k over the normalised entry scores of all heads
// of a layer decides how many entries each head keeps; a floor guarantees
// every head a share of the uniform budget, and the layer's total stays the
// uniform one. Pure bookkeeping on numbers: the Compressor gathers the scores
// from the policy (Policy::Score) and hands each head its budget.
#pragma once
#include <vector>

#include "kv/policy.h"

namespace kvtrim::kv {

// One head's scores made comparable across heads: mass scores divided by
// their sum; other scores shifted by their minimum, then divided by the sum.
// Every entry (protected ones too) counts; a head whose sum is 0 gets 1/n each.
std::vector<double> NormalizeHeadScores(const EntryScores& e);

// Budgets of the heads of one layer whose uniform per-head budget is `b`
// (layer total T = heads * b). Head h first gets its floor
//   f_h = min(n_h, max(ceil(min_share * b), protected_h)),
// taken from its own best entries (protected first, then by score); the other
// T - sum f_h places go to the highest normalised scores among all heads'
// remaining entries (ties: the newer entry, then the lower head). Each budget
// is at most n_h, so the budgets sum to min(T, sum n_h) (more only when the
// floors alone exceed T).
std::vector<int> AdaptiveHeadBudgets(const std::vector<EntryScores>& heads, int b, double min_share);

}  // namespace kvtrim::kv
