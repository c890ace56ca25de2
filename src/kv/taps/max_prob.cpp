#include "kv/taps/max_prob.h"

#include <algorithm>

namespace kvtrim::kv {

void MaxProbStat::OnTile(const ProbTile& tile, const TapClock&) {
  const int n = std::min(tile.j1, tile.Visible(tile.t1 - 1));
  if (n > static_cast<int>(max_.size())) max_.resize(n, 0.f);
  for (int t = tile.t0; t < tile.t1; ++t) {
    const int j0 = tile.j0, je = std::min(tile.j1, tile.Visible(t));
    for (int g = 0; g < tile.G; ++g) {
      const float* p = tile.Row(t, g);  // p[j - j0], j in [j0, je)
      for (int j = j0; j < je; ++j) max_[j] = std::max(max_[j], p[j - j0]);
    }
  }
}

void MaxProbStat::Retain(const std::vector<int>& keep) { RetainEntries(max_, keep, 0.f); }

void MaxProbStat::Rebuild(const std::vector<std::vector<int>>& from) {
  max_ = RebuildEntries(max_, from, 0.f, [](float a, float b) { return std::max(a, b); });
}

TapInfo MaxProbTapInfo() {
  return {kMaxProbTap, 0, [](const TapShape&) { return std::make_unique<MaxProbStat>(); }, {}, {}};
}

}  // namespace kvtrim::kv
