// A statistic holding one value per entry and folding each tile it is fed
// into those values (taps.h): what differs between such taps is their Fold,
// a struct of statics:
//   T kFresh                        the value of an entry no query has seen
//   void Tile(std::vector<T>& v, const ProbTile&, const TapClock&)
//                                   folds a tile in (v covers the tile's entries)
//   T Merge(T a, T b)               what a merged entry holds of its sources
// The growth, eviction, merging, memory and copies are shared here.
#pragma once
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "kv/taps.h"

namespace kvtrim::kv {

template <class T, class Fold>
class FoldStat : public EntryStat {
 public:
  explicit FoldStat(std::vector<T> values = {}) : v_(std::move(values)) {}
  void OnTile(const ProbTile& tile, const TapClock& clock) override {
    const int n = std::min(tile.j1, tile.Visible(tile.t1 - 1));
    if (n > static_cast<int>(v_.size())) v_.resize(n, Fold::kFresh);
    Fold::Tile(v_, tile, clock);
  }
  void Retain(const std::vector<int>& keep) override { RetainEntries(v_, keep, Fold::kFresh); }
  void Rebuild(const std::vector<std::vector<int>>& from) override {
    v_ = RebuildEntries(v_, from, Fold::kFresh, [](T a, T b) { return Fold::Merge(a, b); });
  }
  size_t BytesHeld() const override { return sizeof(T) * v_.capacity(); }
  std::unique_ptr<EntryStat> Clone() const override { return std::make_unique<FoldStat>(*this); }
  const std::vector<T>& values() const { return v_; }

 private:
  std::vector<T> v_;  // [n]
};

// The registration of a fold tap named `name` (no parameter, every query read).
template <class Stat>
TapInfo FoldTapInfo(const char* name) {
  return {name, 0, [](const TapShape&) { return std::make_unique<Stat>(); }, {}, {}};
}

}  // namespace kvtrim::kv
