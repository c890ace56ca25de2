// The tap `history` (ScissorHands), parameter m: for each entry, which of
// the last m query steps accessed it (as `last-access` decides), one bit per
// step in a ring; Count(i) is the entry's importance. Merged entries hold
// the union of their sources' bits.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kv/taps.h"

namespace kvtrim::kv {

inline constexpr const char kHistoryTap[] = "history";

class HistoryStat : public EntryStat {
 public:
  explicit HistoryStat(int steps) : steps_(std::max(1, steps)), words_((steps_ + 63) / 64) {}
  void OnTile(const ProbTile& tile, const TapClock& clock) override;
  void Retain(const std::vector<int>& keep) override;
  void Rebuild(const std::vector<std::vector<int>>& from) override;
  size_t BytesHeld() const override { return 8 * bits_.capacity(); }
  std::unique_ptr<EntryStat> Clone() const override { return std::make_unique<HistoryStat>(*this); }
  // How many of the last m steps accessed entry i (0 for an entry not seen).
  int64_t Count(int i) const;
  int size() const { return static_cast<int>(bits_.size() / words_); }

 private:
  void Resize(size_t n) { bits_.resize(n * words_, 0); }
  int steps_, words_;
  std::vector<uint64_t> bits_;  // [n * words_]
};

TapInfo HistoryTapInfo();

}  // namespace kvtrim::kv
