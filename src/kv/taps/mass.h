// The tap `mass` (H2O): the attention mass each entry has received, summed
// over every query and the group's query heads. Merged entries hold the sum
// of their sources'.
#pragma once
#include <utility>
#include <vector>

#include "kv/taps.h"

namespace kvtrim::kv {

inline constexpr const char kMassTap[] = "mass";

class MassStat : public EntryStat {
 public:
  explicit MassStat(std::vector<float> values = {}) : acc_(std::move(values)) {}
  void OnTile(const ProbTile& tile, const TapClock& clock) override;
  void Retain(const std::vector<int>& keep) override;
  void Rebuild(const std::vector<std::vector<int>>& from) override;
  size_t BytesHeld() const override { return 4 * acc_.capacity(); }
  std::unique_ptr<EntryStat> Clone() const override { return std::make_unique<MassStat>(*this); }
  const std::vector<float>& values() const { return acc_; }

 private:
  std::vector<float> acc_;  // [n]
};

TapInfo MassTapInfo();

}  // namespace kvtrim::kv
