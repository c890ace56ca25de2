#include "kv/taps/recent_rows.h"

#include <algorithm>

namespace kvtrim::kv {

RecentRowsStat::RecentRowsStat(int window, int group)
    : window_(std::max(1, window)), inv_(1.f / static_cast<float>(group)), rows_(window_), pos_(window_, -1) {}

void RecentRowsStat::OnTile(const ProbTile& tile, const TapClock& clock) {
  for (int t = tile.t0; t < tile.t1; ++t) {
    const int64_t pos = clock.pos0 + t;
    if (pos <= clock.latest - window_) continue;  // only the batch's last w queries
    const int j0 = tile.j0, je = std::min(tile.j1, tile.Visible(t));
    if (je <= j0) continue;
    std::vector<float>& row = rows_[pos % window_];
    if (j0 == 0) {  // the query's first tile: the ring row is its visible entries
      row.resize(tile.Visible(t));
      pos_[pos % window_] = pos;
    }
    for (int g = 0; g < tile.G; ++g) {
      const float* p = tile.Row(t, g);
      if (g == 0)
        for (int j = j0; j < je; ++j) row[j] = p[j - j0] * inv_;
      else
        for (int j = j0; j < je; ++j) row[j] += p[j - j0] * inv_;
    }
  }
}

std::vector<double> RecentRowsStat::Mass(int n, int64_t latest) const {
  std::vector<double> m(n, 0.0);
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (!Live(r, latest)) continue;
    const std::vector<float>& row = rows_[r];
    for (int j = 0; j < n && j < static_cast<int>(row.size()); ++j) m[j] += row[j];
  }
  return m;
}

int RecentRowsStat::Queries(int64_t latest) const {
  int q = 0;
  for (size_t r = 0; r < rows_.size(); ++r) q += Live(r, latest);
  return q;
}

void RecentRowsStat::Retain(const std::vector<int>& keep) {
  for (std::vector<float>& row : rows_) {  // ring rows have their own lengths
    size_t k = 0;
    for (int i : keep)
      if (i < static_cast<int>(row.size())) row[k++] = row[i];
    row.resize(k);
  }
}

void RecentRowsStat::Rebuild(const std::vector<std::vector<int>>& from) {
  for (std::vector<float>& row : rows_) {  // merged entries receive the sum of their sources' mass
    std::vector<float> out;
    for (const std::vector<int>& src : from) {
      float sum = 0.f;
      bool any = false;
      for (int i : src)
        if (i < static_cast<int>(row.size())) sum += row[i], any = true;
      if (!any) break;  // entries after the row's query (sources are in order)
      out.push_back(sum);
    }
    row = std::move(out);
  }
}

size_t RecentRowsStat::BytesHeld() const {
  size_t s = 8 * pos_.capacity();
  for (const auto& r : rows_) s += 4 * r.capacity();
  return s;
}

TapInfo RecentRowsTapInfo() {
  return {kRecentRowsTap, 0, [](const TapShape& s) { return std::make_unique<RecentRowsStat>(s.param, s.group); },
          [](int w, const TapClock& c) { return c.latest - w + 1; }, "recent window"};
}

}  // namespace kvtrim::kv
