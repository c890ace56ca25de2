#include "kv/taps/max_prob.h"

#include <algorithm>

namespace kvtrim::kv {

void MaxProbStat::OnTile(const ProbTile& tile, int64_t, int64_t) {
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

void MaxProbStat::Retain(const std::vector<int>& keep) {
  std::vector<float> out(keep.size(), 0.f);  // kept entries not seen yet: 0
  for (size_t w = 0; w < keep.size(); ++w)
    if (static_cast<size_t>(keep[w]) < max_.size()) out[w] = max_[keep[w]];
  max_ = std::move(out);
}

void MaxProbStat::Rebuild(const std::vector<std::vector<int>>& from) {
  std::vector<float> out(from.size(), 0.f);
  for (size_t j = 0; j < from.size(); ++j)
    for (int i : from[j])
      if (static_cast<size_t>(i) < max_.size()) out[j] = std::max(out[j], max_[i]);
  max_ = std::move(out);
}

TapInfo MaxProbTapInfo() {
  return {kMaxProbTap, 0, [](const TapShape&) { return std::make_unique<MaxProbStat>(); }};
}

}  // namespace kvtrim::kv
