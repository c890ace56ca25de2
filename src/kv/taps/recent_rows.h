// The tap `recent-rows` (KVSlimmer), parameter w: the probabilities of the
// last w queries, each a row over the entries it saw, the mean over the
// group's query heads, in a ring. Mass(n, latest) sums the rows of the
// queries within w of `latest`. Merged entries receive the sum of their
// sources' probabilities.
#pragma once
#include <cstdint>
#include <vector>

#include "kv/taps.h"

namespace kvtrim::kv {

inline constexpr const char kRecentRowsTap[] = "recent-rows";

class RecentRowsStat : public EntryStat {
 public:
  RecentRowsStat(int window, int group);
  void OnTile(const ProbTile& tile, const TapClock& clock) override;
  void Retain(const std::vector<int>& keep) override;
  void Rebuild(const std::vector<std::vector<int>>& from) override;
  size_t BytesHeld() const override;
  std::unique_ptr<EntryStat> Clone() const override { return std::make_unique<RecentRowsStat>(*this); }
  // The attention of the queries within w of `latest` on each of the first
  // n entries, summed over those queries: [n].
  std::vector<double> Mass(int n, int64_t latest) const;
  // How many queries Mass sums (at most w).
  int Queries(int64_t latest) const;

 private:
  bool Live(size_t r, int64_t latest) const { return pos_[r] >= 0 && pos_[r] > latest - window_; }
  int window_;
  float inv_;
  std::vector<std::vector<float>> rows_;  // [w][entries the query saw]
  std::vector<int64_t> pos_;              // [w] query position of each row (-1: empty)
};

TapInfo RecentRowsTapInfo();

}  // namespace kvtrim::kv
