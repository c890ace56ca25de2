// KVzip's nonuniform allocation: one top-k over the entries of every head
// (of every layer), so heads keep different counts under one total budget.
#pragma once
#include <cstdint>
#include <vector>

namespace kvtrim::kv::numerics {

// Entries each head keeps when the `total` highest scores over all heads are
// kept, every head keeping at least min(floor, its size) (its own best
// ones). scores[h] has one score per entry of head h. Order: higher score
// first, ties to the later entry (as KeepTop), then to the later head, so a
// head's kept entries are its top count[h] under KeepTop's order. The counts
// sum to min(total, entries), never below the floors' sum.
std::vector<int> SharedTopK(const std::vector<std::vector<double>>& scores, int64_t total, int floor);

}  // namespace kvtrim::kv::numerics
