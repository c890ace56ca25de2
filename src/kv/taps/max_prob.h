// The tap `max-prob` (KVzip's reconstruction scores): the largest
// probability each entry receives from any query of the tiles it is fed,
// over the group's query heads; 0 for entries no query has seen. Merged
// entries hold the largest of their sources'.
#pragma once
#include <utility>
#include <vector>

#include "kv/taps.h"

namespace kvtrim::kv {

inline constexpr const char kMaxProbTap[] = "max-prob";

class MaxProbStat : public EntryStat {
 public:
  explicit MaxProbStat(std::vector<float> values = {}) : max_(std::move(values)) {}
  void OnTile(const ProbTile& tile, const TapClock& clock) override;
  void Retain(const std::vector<int>& keep) override;
  void Rebuild(const std::vector<std::vector<int>>& from) override;
  size_t BytesHeld() const override { return 4 * max_.capacity(); }
  std::unique_ptr<EntryStat> Clone() const override { return std::make_unique<MaxProbStat>(*this); }
  const std::vector<float>& values() const { return max_; }

 private:
  std::vector<float> max_;  // [n]
};

TapInfo MaxProbTapInfo();

}  // namespace kvtrim::kv
