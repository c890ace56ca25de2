#include "kv/taps/window_mass.h"

#include <algorithm>
#include <limits>

namespace kvtrim::kv {

void WindowMassStat::OnTile(const ProbTile& tile, const TapClock& clock) {
  const int n = std::min(tile.j1, tile.Visible(tile.t1 - 1));
  if (n > static_cast<int>(obs_.size())) obs_.resize(n, 0.f);
  if (clock.prompt_end < 0) return;
  for (int t = tile.t0; t < tile.t1; ++t) {
    const int64_t pos = clock.pos0 + t;
    if (pos < clock.prompt_end - window_ || pos >= clock.prompt_end) continue;
    const int j0 = tile.j0, je = std::min(tile.j1, tile.Visible(t));
    for (int g = 0; g < tile.G; ++g) {  // g = 0..G-1 in order, as row by row
      const float* p = tile.Row(t, g);
      for (int j = j0; j < je; ++j) obs_[j] += p[j - j0];
    }
  }
}

void WindowMassStat::Retain(const std::vector<int>& keep) { RetainEntries(obs_, keep, 0.f); }

void WindowMassStat::Rebuild(const std::vector<std::vector<int>>& from) {
  obs_ = RebuildEntries(obs_, from, 0.f, std::plus<float>());
}

TapInfo WindowMassTapInfo() {
  return {kWindowMassTap, 0, [](const TapShape& s) { return std::make_unique<WindowMassStat>(s.param); },
          [](int w, const TapClock& c) {
            return c.prompt_end >= 0 ? c.prompt_end - w : std::numeric_limits<int64_t>::max();
          },
          "observation window"};
}

}  // namespace kvtrim::kv
