// The tap `last-access` (LRU): the step (logical position) of the latest
// query that accessed each entry, -1 for none. A query accesses an entry
// when the largest of the group's probabilities on it is >= 1/n, n the
// entries the query sees. Merged entries hold their sources' latest.
#pragma once
#include <cstdint>

#include "kv/taps/fold.h"

namespace kvtrim::kv {

inline constexpr const char kLastAccessTap[] = "last-access";

struct LastAccessFold {
  static constexpr int64_t kFresh = -1;
  static void Tile(std::vector<int64_t>& last, const ProbTile& tile, const TapClock& clock);
  static int64_t Merge(int64_t a, int64_t b) { return std::max(a, b); }
};
using LastAccessStat = FoldStat<int64_t, LastAccessFold>;

// Whether query t of the tile accesses entry j (j in the tile's keys): the
// largest of the group's probabilities on it against 1/n, n the entries the
// query sees (shared with the history tap).
inline bool Accessed(const ProbTile& tile, int t, int j) {
  float mx = tile.Row(t, 0)[j - tile.j0];
  for (int g = 1; g < tile.G; ++g) mx = std::max(mx, tile.Row(t, g)[j - tile.j0]);
  return mx >= 1.f / static_cast<float>(tile.Visible(t));
}

inline TapInfo LastAccessTapInfo() { return FoldTapInfo<LastAccessStat>(kLastAccessTap); }

}  // namespace kvtrim::kv
