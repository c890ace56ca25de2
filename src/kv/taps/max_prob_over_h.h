// The tap `max-prob-over-h` (KVzip+'s reconstruction scores, before the
// value term): for each entry and each query head g of the group, the
// largest p_{t,g,j} / ||h_t|| over the queries t it is fed, where h_t is the
// query's attention input (TapClock::hidden_norm; 1 where the model gave
// none); 0 for entries no query has seen. The policy multiplies by
// ||W_o,g v_j|| (kv/policies/kvzip.cpp). Merged entries hold the largest of
// their sources'.
#pragma once
#include <utility>
#include <vector>

#include "kv/taps.h"

namespace kvtrim::kv {

inline constexpr const char kMaxProbOverHTap[] = "max-prob-over-h";

class MaxProbOverHStat : public EntryStat {
 public:
  explicit MaxProbOverHStat(int group, std::vector<float> values = {}) : G_(group), max_(std::move(values)) {}
  void OnTile(const ProbTile& tile, const TapClock& clock) override;
  void Retain(const std::vector<int>& keep) override;
  void Rebuild(const std::vector<std::vector<int>>& from) override;
  size_t BytesHeld() const override { return 4 * max_.capacity(); }
  std::unique_ptr<EntryStat> Clone() const override { return std::make_unique<MaxProbOverHStat>(*this); }
  int group() const { return G_; }
  int size() const { return static_cast<int>(max_.size()) / G_; }
  // Entry j, query head g.
  float at(int j, int g) const { return max_[static_cast<size_t>(j) * G_ + g]; }

 private:
  int G_;
  std::vector<float> max_;  // [n][G]
};

TapInfo MaxProbOverHTapInfo();

}  // namespace kvtrim::kv
