#include "kv/numerics/shared_budget.h"

#include <algorithm>
#include <numeric>

namespace kvtrim::kv::numerics {

std::vector<int> SharedTopK(const std::vector<std::vector<double>>& scores, int64_t total, int floor) {
  const int H = static_cast<int>(scores.size());
  std::vector<int> count(H, 0);
  // Each head's entries in KeepTop's order (best first).
  std::vector<std::vector<int>> order(H);
  int64_t all = 0;
  for (int h = 0; h < H; ++h) {
    const std::vector<double>& s = scores[h];
    order[h].resize(s.size());
    std::iota(order[h].begin(), order[h].end(), 0);
    std::sort(order[h].begin(), order[h].end(), [&s](int a, int b) { return s[a] > s[b] || (s[a] == s[b] && a > b); });
    count[h] = std::min<int>(floor, static_cast<int>(s.size()));
    all += static_cast<int64_t>(s.size());
  }
  int64_t left = std::min(total, all) - std::accumulate(count.begin(), count.end(), int64_t{0});
  if (left <= 0) return count;
  // The rest: a global ranking of the entries past each head's floor.
  struct Item {
    double s;
    int idx, head;
  };
  std::vector<Item> rest;
  rest.reserve(static_cast<size_t>(all));
  for (int h = 0; h < H; ++h)
    for (size_t r = count[h]; r < order[h].size(); ++r) rest.push_back({scores[h][order[h][r]], order[h][r], h});
  auto better = [](const Item& a, const Item& b) {
    return a.s > b.s || (a.s == b.s && (a.idx > b.idx || (a.idx == b.idx && a.head > b.head)));
  };
  std::nth_element(rest.begin(), rest.begin() + (left - 1), rest.end(), better);
  for (int64_t i = 0; i < left; ++i) ++count[rest[i].head];
  return count;
}

}  // namespace kvtrim::kv::numerics
