// The tap `last-access` (LRU): the step (logical position) of the latest
// query that accessed each entry, -1 for none. A query accesses an entry
// when the largest of the group's probabilities on it is >= 1/n, n the
// entries the query sees. Merged entries hold their sources' latest.
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kv/taps.h"

namespace kvtrim::kv {

inline constexpr const char kLastAccessTap[] = "last-access";

class LastAccessStat : public EntryStat {
 public:
  explicit LastAccessStat(std::vector<int64_t> values = {}) : last_(std::move(values)) {}
  void OnTile(const ProbTile& tile, const TapClock& clock) override;
  void Retain(const std::vector<int>& keep) override;
  void Rebuild(const std::vector<std::vector<int>>& from) override;
  size_t BytesHeld() const override { return 8 * last_.capacity(); }
  std::unique_ptr<EntryStat> Clone() const override { return std::make_unique<LastAccessStat>(*this); }
  const std::vector<int64_t>& values() const { return last_; }

 private:
  std::vector<int64_t> last_;  // [n]
};

// Whether query t of the tile accesses entry j (j in the tile's keys): the
// largest of the group's probabilities on it against 1/n, n the entries the
// query sees (shared with the history tap).
inline bool Accessed(const ProbTile& tile, int t, int j) {
  float mx = tile.Row(t, 0)[j - tile.j0];
  for (int g = 1; g < tile.G; ++g) mx = std::max(mx, tile.Row(t, g)[j - tile.j0]);
  return mx >= 1.f / static_cast<float>(tile.Visible(t));
}

TapInfo LastAccessTapInfo();

}  // namespace kvtrim::kv
