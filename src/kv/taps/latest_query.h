// The tap `latest-query` (TOVA): the attention of the batch's last query on
// each entry, the mean over the group's query heads; 0 for entries newer than
// that query. Merged entries hold the sum of their sources'.
#pragma once
#include <vector>

#include "kv/taps.h"

namespace kvtrim::kv {

inline constexpr const char kLatestQueryTap[] = "latest-query";

class LatestQueryStat : public EntryStat {
 public:
  explicit LatestQueryStat(int group) : inv_(1.f / static_cast<float>(group)) {}
  void OnTile(const ProbTile& tile, const TapClock& clock) override;
  void Retain(const std::vector<int>& keep) override;
  void Rebuild(const std::vector<std::vector<int>>& from) override;
  size_t BytesHeld() const override { return 4 * cur_.capacity(); }
  std::unique_ptr<EntryStat> Clone() const override { return std::make_unique<LatestQueryStat>(*this); }
  const std::vector<float>& values() const { return cur_; }

 private:
  float inv_;
  std::vector<float> cur_;  // [n]
};

TapInfo LatestQueryTapInfo();

}  // namespace kvtrim::kv
