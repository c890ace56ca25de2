#include "kv/taps/history.h"

#include <algorithm>
#include <bit>

#include "kv/taps/last_access.h"

namespace kvtrim::kv {

void HistoryStat::OnTile(const ProbTile& tile, const TapClock& clock) {
  const int n = std::min(tile.j1, tile.Visible(tile.t1 - 1));
  if (n > size()) Resize(n);
  for (int t = tile.t0; t < tile.t1; ++t) {
    const int64_t slot = (clock.pos0 + t) % steps_;
    const uint64_t bit = uint64_t{1} << (slot % 64);
    const size_t word = static_cast<size_t>(slot / 64);
    const int je = std::min(tile.j1, tile.Visible(t));
    for (int j = tile.j0; j < je; ++j) {
      uint64_t& w = bits_[static_cast<size_t>(j) * words_ + word];
      w = Accessed(tile, t, j) ? (w | bit) : (w & ~bit);
    }
  }
}

int64_t HistoryStat::Count(int i) const {
  if (i < 0 || i >= size()) return 0;
  int64_t c = 0;
  for (int w = 0; w < words_; ++w) c += std::popcount(bits_[static_cast<size_t>(i) * words_ + w]);
  return c;
}

void HistoryStat::Retain(const std::vector<int>& keep) {
  const int seen = size();
  size_t w = 0;  // keep increases: the entries seen come first
  for (int i : keep) {
    if (i >= seen) break;
    std::copy_n(bits_.begin() + static_cast<std::ptrdiff_t>(i) * words_, words_,
                bits_.begin() + static_cast<std::ptrdiff_t>(w) * words_);
    ++w;
  }
  Resize(w);
  Resize(keep.size());  // kept entries not seen yet start with no bits
  if (bits_.capacity() > bits_.size() + bits_.size() / 8 + 64) bits_.shrink_to_fit();
}

void HistoryStat::Rebuild(const std::vector<std::vector<int>>& from) {
  std::vector<uint64_t> out(from.size() * words_, 0);
  for (size_t j = 0; j < from.size(); ++j)
    for (int i : from[j])
      if (i < size())
        for (int w = 0; w < words_; ++w) out[j * words_ + w] |= bits_[static_cast<size_t>(i) * words_ + w];
  bits_ = std::move(out);
}

TapInfo HistoryTapInfo() {
  return {kHistoryTap, 0, [](const TapShape& s) { return std::make_unique<HistoryStat>(s.param); }, {},
          "history length"};
}

}  // namespace kvtrim::kv
