#include "kv/taps/max_prob.h"

namespace kvtrim::kv {

void MaxProbFold::Tile(std::vector<float>& max, const ProbTile& tile, const TapClock&) {
  for (int t = tile.t0; t < tile.t1; ++t) {
    const int j0 = tile.j0, je = std::min(tile.j1, tile.Visible(t));
    for (int g = 0; g < tile.G; ++g) {
      const float* p = tile.Row(t, g);  // p[j - j0], j in [j0, je)
      for (int j = j0; j < je; ++j) max[j] = std::max(max[j], p[j - j0]);
    }
  }
}

}  // namespace kvtrim::kv
