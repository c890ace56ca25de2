#include "kv/taps/latest_query.h"

#include <algorithm>

namespace kvtrim::kv {

void LatestQueryStat::OnTile(const ProbTile& tile, const TapClock& clock) {
  const int n = std::min(tile.j1, tile.Visible(tile.t1 - 1));
  if (n > static_cast<int>(cur_.size())) cur_.resize(n, 0.f);
  for (int t = tile.t0; t < tile.t1; ++t) {
    if (clock.pos0 + t != clock.latest) continue;  // the batch's last query is the latest one
    const int j0 = tile.j0, je = std::min(tile.j1, tile.Visible(t));
    if (je <= j0) continue;
    if (j0 == 0) std::fill(cur_.begin(), cur_.end(), 0.f);
    for (int g = 0; g < tile.G; ++g) {  // summed over g = 0..G-1 in order, as row by row
      const float* p = tile.Row(t, g);
      for (int j = j0; j < je; ++j) cur_[j] += p[j - j0] * inv_;
    }
  }
}

void LatestQueryStat::Retain(const std::vector<int>& keep) { RetainEntries(cur_, keep, 0.f); }

void LatestQueryStat::Rebuild(const std::vector<std::vector<int>>& from) {
  cur_ = RebuildEntries(cur_, from, 0.f, std::plus<float>());
}

TapInfo LatestQueryTapInfo() {
  return {kLatestQueryTap, 1, [](const TapShape& s) { return std::make_unique<LatestQueryStat>(s.group); }, {}, {}};
}

}  // namespace kvtrim::kv
