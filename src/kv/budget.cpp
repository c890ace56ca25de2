// The retention target as entries, and the per-layer / per-head allocators
// that need no scores (budget.h).
#include "kv/budget.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace kvtrim::kv::budget {

int64_t Uniform(const Target& t, int64_t n) {
  return t.tokens > 0 ? t.tokens : static_cast<int64_t>(std::ceil(t.ratio * static_cast<double>(n) - 1e-9));
}

double Ratio(const Target& t, int64_t n) {
  return t.tokens > 0 ? std::min(1.0, static_cast<double>(t.tokens) / std::max(1.0, static_cast<double>(n))) : t.ratio;
}

int LayerBudget(const Spec& s, int layer, int n_layer, int base) {
  if (s.kind != Kind::kPyramid || n_layer <= 1) return base;
  const double top = 2.0 * base - base / s.pyramid_beta, bottom = base / s.pyramid_beta;
  return static_cast<int>(std::lround(top + (bottom - top) * layer / (n_layer - 1)));
}

std::vector<int> HeadBudgets(const Spec& s, int64_t base, int64_t n, int n_layer, int n_head_kv, int min_entries,
                             const std::vector<int>* shared) {
  const size_t heads = static_cast<size_t>(n_layer) * n_head_kv;
  const int nn = static_cast<int>(std::min<int64_t>(n, INT32_MAX));
  std::vector<int> b(heads, nn);
  if (s.kind == Kind::kCastes) {
    for (size_t i = 0; i < heads; ++i)
      b[i] = s.caste_budget < 0 || (i < s.whole.size() && s.whole[i]) ? INT_MAX : s.caste_budget;
    return b;
  }
  if (s.kind == Kind::kShared && shared && shared->size() == heads) return *shared;
  // A budget covering the whole sequence compresses nothing, in every layer
  // (PyramidKV too: its reference returns the cache untouched then).
  if (base >= n) return b;
  const int ub = static_cast<int>(std::max<int64_t>(1, base));
  for (int l = 0; l < n_layer; ++l) {
    const int lb = std::max({1, LayerBudget(s, l, n_layer, ub), min_entries});
    std::fill(b.begin() + static_cast<std::ptrdiff_t>(l) * n_head_kv, b.begin() + static_cast<std::ptrdiff_t>(l + 1) * n_head_kv, lb);
  }
  return b;
}

}  // namespace kvtrim::kv::budget
