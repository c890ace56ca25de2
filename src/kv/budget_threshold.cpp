// Threshold eviction's per-head budgets (budget.h): the count of entries
// whose score exceeds the threshold times the head's mean score.
#include <algorithm>

#include "kv/budget.h"

namespace kvtrim::kv::budget {

std::vector<int> ThresholdHeadBudgets(const std::vector<EntryScores>& heads, double t) {
  std::vector<int> budget(heads.size(), 0);
  for (size_t h = 0; h < heads.size(); ++h) {
    const EntryScores& e = heads[h];
    const std::vector<double> s = NormalizeHeadScores(e);  // shares: their mean is 1/n
    const double n = static_cast<double>(s.size());
    int keep = 0;
    for (size_t i = 0; i < s.size(); ++i) keep += (i < e.prot.size() && e.prot[i]) || s[i] * n > t;
    budget[h] = std::max(keep, s.empty() ? 0 : 1);
  }
  return budget;
}

}  // namespace kvtrim::kv::budget
