#include "kv/taps/last_access.h"

namespace kvtrim::kv {

void LastAccessFold::Tile(std::vector<int64_t>& last, const ProbTile& tile, const TapClock& clock) {
  for (int t = tile.t0; t < tile.t1; ++t) {
    const int je = std::min(tile.j1, tile.Visible(t));
    for (int j = tile.j0; j < je; ++j)
      if (Accessed(tile, t, j)) last[j] = clock.pos0 + t;
  }
}

}  // namespace kvtrim::kv
