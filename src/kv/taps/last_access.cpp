#include "kv/taps/last_access.h"

#include <algorithm>

namespace kvtrim::kv {

void LastAccessStat::OnTile(const ProbTile& tile, const TapClock& clock) {
  const int n = std::min(tile.j1, tile.Visible(tile.t1 - 1));
  if (n > static_cast<int>(last_.size())) last_.resize(n, -1);
  for (int t = tile.t0; t < tile.t1; ++t) {
    const int je = std::min(tile.j1, tile.Visible(t));
    for (int j = tile.j0; j < je; ++j)
      if (Accessed(tile, t, j)) last_[j] = clock.pos0 + t;
  }
}

void LastAccessStat::Retain(const std::vector<int>& keep) { RetainEntries(last_, keep, int64_t{-1}); }

void LastAccessStat::Rebuild(const std::vector<std::vector<int>>& from) {
  last_ = RebuildEntries(last_, from, int64_t{-1}, [](int64_t a, int64_t b) { return std::max(a, b); });
}

TapInfo LastAccessTapInfo() {
  return {kLastAccessTap, 0, [](const TapShape&) { return std::make_unique<LastAccessStat>(); }, {}, {}};
}

}  // namespace kvtrim::kv
