#include "kv/taps/mass.h"

#include <algorithm>

namespace kvtrim::kv {

void MassStat::OnTile(const ProbTile& tile, const TapClock&) {
  const int n = std::min(tile.j1, tile.Visible(tile.t1 - 1));
  if (n > static_cast<int>(acc_.size())) acc_.resize(n, 0.f);
  for (int t = tile.t0; t < tile.t1; ++t) {
    const int j0 = tile.j0, je = std::min(tile.j1, tile.Visible(t));
    for (int g = 0; g < tile.G; ++g) {  // g = 0..G-1 in order, as row by row
      const float* p = tile.Row(t, g);  // p[j - j0], j in [j0, je)
      for (int j = j0; j < je; ++j) acc_[j] += p[j - j0];
    }
  }
}

void MassStat::Retain(const std::vector<int>& keep) { RetainEntries(acc_, keep, 0.f); }

void MassStat::Rebuild(const std::vector<std::vector<int>>& from) {
  acc_ = RebuildEntries(acc_, from, 0.f, std::plus<float>());
}

TapInfo MassTapInfo() {
  return {kMassTap, 0, [](const TapShape&) { return std::make_unique<MassStat>(); }, {}, {}};
}

}  // namespace kvtrim::kv
