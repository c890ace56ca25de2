// The tap `window-mass` (SnapKV), parameter w: the attention mass each entry
// receives from the prompt's last w queries (the observation window), summed
// over them and the group's query heads; nothing before the prompt's end is
// known. A prefill chunk's window votes afresh (StartChunk). Merged entries
// hold the sum of their sources'.
#pragma once
#include <algorithm>
#include <utility>
#include <vector>

#include "kv/taps.h"

namespace kvtrim::kv {

inline constexpr const char kWindowMassTap[] = "window-mass";

class WindowMassStat : public EntryStat {
 public:
  explicit WindowMassStat(int window, std::vector<float> values = {}) : window_(window), obs_(std::move(values)) {}
  void OnTile(const ProbTile& tile, const TapClock& clock) override;
  void StartChunk() override { std::fill(obs_.begin(), obs_.end(), 0.f); }
  void Retain(const std::vector<int>& keep) override;
  void Rebuild(const std::vector<std::vector<int>>& from) override;
  size_t BytesHeld() const override { return 4 * obs_.capacity(); }
  std::unique_ptr<EntryStat> Clone() const override { return std::make_unique<WindowMassStat>(*this); }
  const std::vector<float>& values() const { return obs_; }

 private:
  int window_;
  std::vector<float> obs_;  // [n]
};

TapInfo WindowMassTapInfo();

}  // namespace kvtrim::kv
