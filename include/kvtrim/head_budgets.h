// Nonuniform per-head budgets (METHODS.md section 4, Attention Matching):
// from each KV head's measured sensitivity (loss or KL against the full
// cache when only that head is compacted, at a grid of ratios), greedily move
// budget units from insensitive to sensitive heads until no move lowers the
// summed loss. Budgets are in units of 1/units_per_head of a head's tokens,
// so they apply to any context length; the average retention stays r.
//
// Pure bookkeeping on numbers (no model): measuring the sensitivities needs
// the engine (kvtrim profile --head-budgets); the result is stored in the
// model profile as one share per KV head (ShareOfUniform below).
#pragma once
#include <cstdint>
#include <vector>

#include "kvtrim/profile.h"
#include "kvtrim/status.h"

namespace kvtrim {

struct HeadSensitivity {
  std::vector<double> ratios;             // increasing, in (0, 1]
  std::vector<std::vector<double>> loss;  // [head][ratio]: loss with only this head compacted to that ratio
};

struct HeadBudgetOptions {
  double ratio = 0.1;        // target average retention r
  int units_per_head = 128;  // budget unit = 1/128 of a head's tokens (2% is 2.56 units)
  int min_units = 1;         // per-head minimum
};

// The ratio grid of the defaults: {r/4, r/2, r, 2r, 4r} clipped to (0, 1],
// duplicates removed.
std::vector<double> DefaultRatioGrid(double r);

// Loss of head h at retention x: linear interpolation in the grid, 0 at
// x = 1 (an uncompressed head loses nothing), the first grid value below it
// (never asked by the search, which keeps every head at or above the grid).
double InterpolateLoss(const HeadSensitivity& s, int h, double x);

// The least non-increasing majorant of each head's curve over the grid
// (loss[i] = max over j >= i of loss[j]): more budget never costs more. A
// measured curve that dips at a small ratio (noise, or a fit that happens to
// land well) would otherwise make a sensitive head look like a free donor.
HeadSensitivity NonIncreasing(HeadSensitivity s);

// Units per head: start uniform (round(r * units_per_head) each, the
// remainder spread over the first heads), then repeatedly make the single
// move of one unit (donor -> receiver) that lowers the summed interpolated
// loss most, while it lowers it by more than 1e-12. Never below min_units
// nor below the smallest measured share (ceil(ratios[0] * units_per_head):
// the curve is not known below it), never above units_per_head. The sum is
// preserved. Errors name bad shapes; a ratio below the smallest measured
// one is unreachable.
Expected<std::vector<int>> SearchHeadBudgets(const HeadSensitivity& s, const HeadBudgetOptions& o);

// Applying the units to a sequence: budget::DistributeBudget (kv/budget.h).

// The search's result as the model profile stores it, under
// extra["head_budgets"] (a profile without that key has no head budgets):
// the units per KV head, flat l * n_head_kv + h, found at `ratio`, and the
// measured curves they came from.
struct StoredHeadBudgets {
  double ratio = 0;         // the baseline / target ratio of the search
  int units_per_head = 128;
  std::vector<int> units;   // [n_layer * n_head_kv]
  HeadSensitivity sensitivity;
  int contexts = 0, context_tokens = 0, continuation_tokens = 0;
  uint64_t seed = 0;
  double seconds = 0;       // time the measurement took
};
inline constexpr const char* kHeadBudgetsKey = "head_budgets";
// The units for target ratio r: the stored ones at the profile's ratio,
// else the search run again at r on the stored curves (their non-increasing
// majorant), so budgets measured at one ratio are never applied unchecked at
// another; r below the curves' smallest ratio, or a profile without curves,
// is an error that says what to measure.
Expected<std::vector<int>> UnitsAtRatio(const StoredHeadBudgets& b, double r);
// A profile's head budgets (its field kHeadBudgetsKey): written into it, and
// read back checked (n_heads units, each in [0, units_per_head], a positive
// sum; an error names the problem, or says the profile has none).
void SetHeadBudgets(ModelProfile* p, const StoredHeadBudgets& b);
bool HasHeadBudgets(const ModelProfile& p);
Expected<StoredHeadBudgets> HeadBudgetsOf(const ModelProfile& p, int n_heads);

}  // namespace kvtrim
