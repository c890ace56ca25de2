#include "kv/taps/max_prob_over_h.h"

#include <algorithm>

namespace kvtrim::kv {

void MaxProbOverHStat::OnTile(const ProbTile& tile, const TapClock& clock) {
  const int n = std::min(tile.j1, tile.Visible(tile.t1 - 1));
  if (static_cast<size_t>(n) * G_ > max_.size()) max_.resize(static_cast<size_t>(n) * G_, 0.f);
  for (int t = tile.t0; t < tile.t1; ++t) {
    const float h = clock.hidden_norm ? clock.hidden_norm[t] : 1.f;
    const float inv = h > 0.f ? 1.f / h : 0.f;  // a zero input contributes nothing
    const int j0 = tile.j0, je = std::min(tile.j1, tile.Visible(t));
    for (int g = 0; g < tile.G && g < G_; ++g) {
      const float* p = tile.Row(t, g);  // p[j - j0], j in [j0, je)
      for (int j = j0; j < je; ++j) {
        float& m = max_[static_cast<size_t>(j) * G_ + g];
        m = std::max(m, p[j - j0] * inv);
      }
    }
  }
}

void MaxProbOverHStat::Retain(const std::vector<int>& keep) {
  std::vector<float> out(keep.size() * G_, 0.f);  // kept entries not seen yet: 0
  for (size_t w = 0; w < keep.size(); ++w)
    if (static_cast<size_t>(keep[w]) < static_cast<size_t>(size()))
      std::copy_n(max_.begin() + static_cast<std::ptrdiff_t>(keep[w]) * G_, G_, out.begin() + w * G_);
  max_ = std::move(out);
}

void MaxProbOverHStat::Rebuild(const std::vector<std::vector<int>>& from) {
  std::vector<float> out(from.size() * G_, 0.f);
  for (size_t j = 0; j < from.size(); ++j)
    for (int i : from[j])
      if (i < size())
        for (int g = 0; g < G_; ++g) out[j * G_ + g] = std::max(out[j * G_ + g], at(i, g));
  max_ = std::move(out);
}

TapInfo MaxProbOverHTapInfo() {
  TapInfo info{kMaxProbOverHTap, 0, [](const TapShape& s) { return std::make_unique<MaxProbOverHStat>(s.group); }};
  info.hidden_norms = true;
  return info;
}

}  // namespace kvtrim::kv
