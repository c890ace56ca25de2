#include <algorithm>
#include <numeric>

#include "kv/policy.h"

namespace kvtrim::kv {

std::vector<int> KeepTop(const std::vector<double>& score, const std::vector<bool>& prot, int budget) {
  const int n = static_cast<int>(score.size());
  std::vector<int> keep, rest;
  for (int i = 0; i < n; ++i) (prot[i] ? keep : rest).push_back(i);
  int room = std::max(0, budget - static_cast<int>(keep.size()));
  if (room < static_cast<int>(rest.size())) {
    std::nth_element(rest.begin(), rest.begin() + room, rest.end(), [&](int a, int b) {
      return score[a] > score[b] || (score[a] == score[b] && a > b);
    });
    rest.resize(room);
  }
  keep.insert(keep.end(), rest.begin(), rest.end());
  std::sort(keep.begin(), keep.end());
  return keep;
}

std::vector<bool> ProtectSinksAndRecent(const HeadStore& s, int sinks, int recent) {
  const int n = s.size();
  std::vector<bool> prot(n, false);
  // The newest entry (the token just computed) is always kept.
  for (int i = 0; i < n; ++i) prot[i] = s.pos(i) < sinks || i >= n - std::max(1, recent);
  return prot;
}

}  // namespace kvtrim::kv
