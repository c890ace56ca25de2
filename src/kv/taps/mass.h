// The tap `mass` (H2O): the attention mass each entry has received, summed
// over every query and the group's query heads. Merged entries hold the sum
// of their sources'.
#pragma once
#include "kv/taps/fold.h"

namespace kvtrim::kv {

inline constexpr const char kMassTap[] = "mass";

struct MassFold {
  static constexpr float kFresh = 0.f;
  static void Tile(std::vector<float>& acc, const ProbTile& tile, const TapClock& clock);
  static float Merge(float a, float b) { return a + b; }
};
using MassStat = FoldStat<float, MassFold>;

inline TapInfo MassTapInfo() { return FoldTapInfo<MassStat>(kMassTap); }

}  // namespace kvtrim::kv
