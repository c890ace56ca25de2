// The tap `max-prob` (KVzip's reconstruction scores): the largest
// probability each entry receives from any query of the tiles it is fed,
// over the group's query heads; 0 for entries no query has seen. Merged
// entries hold the largest of their sources'.
#pragma once
#include "kv/taps/fold.h"

namespace kvtrim::kv {

inline constexpr const char kMaxProbTap[] = "max-prob";

struct MaxProbFold {
  static constexpr float kFresh = 0.f;
  static void Tile(std::vector<float>& max, const ProbTile& tile, const TapClock& clock);
  static float Merge(float a, float b) { return std::max(a, b); }
};
using MaxProbStat = FoldStat<float, MaxProbFold>;

inline TapInfo MaxProbTapInfo() { return FoldTapInfo<MaxProbStat>(kMaxProbTap); }

}  // namespace kvtrim::kv
