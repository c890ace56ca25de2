// Profile units as entry budgets (budget.h): the per-head shares that
// kvtrim profile --head-budgets searched, applied to a sequence length.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kv/budget.h"

namespace kvtrim::kv::budget {

std::vector<int> DistributeBudget(const std::vector<int>& units, int base, int n, int min_entries) {
  const int H = static_cast<int>(units.size());
  std::vector<int> b(H, 0);
  if (H == 0) return b;
  const double sum_u = std::accumulate(units.begin(), units.end(), 0.0);
  const int64_t total = static_cast<int64_t>(base) * H;
  std::vector<double> want(H);
  std::vector<int> order(H);
  std::iota(order.begin(), order.end(), 0);
  int64_t given = 0;
  for (int h = 0; h < H; ++h) {
    want[h] = sum_u > 0 ? total * units[h] / sum_u : static_cast<double>(base);
    b[h] = static_cast<int>(std::floor(want[h]));
    given += b[h];
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return want[a] - b[a] > want[c] - b[c]; });
  for (int i = 0; given < total && i < H; ++i, ++given) ++b[order[i]];
  // Minima, taken from the largest budgets; the cap at n (its excess to heads below n).
  for (int h = 0; h < H; ++h)
    while (b[h] < min_entries) {
      int big = static_cast<int>(std::max_element(b.begin(), b.end()) - b.begin());
      if (b[big] <= min_entries) break;
      --b[big];
      ++b[h];
    }
  for (int h = 0; h < H; ++h)
    while (b[h] > n) {
      int small = static_cast<int>(std::min_element(b.begin(), b.end()) - b.begin());
      if (b[small] >= n) break;
      --b[h];
      ++b[small];
    }
  return b;
}

}  // namespace kvtrim::kv::budget
