#include <algorithm>
#include <cmath>
#include <numeric>

#include "kv/policy.h"

namespace kvtrim::kv {

namespace {

// True when entry a should be kept over entry b (higher score, then newer).
inline bool Better(const std::vector<double>& score, int a, int b) {
  return score[a] > score[b] || (score[a] == score[b] && a > b);
}

}  // namespace

std::vector<int> KeepTop(const std::vector<double>& score, const std::vector<bool>& prot, int budget) {
  const int n = static_cast<int>(score.size());
  int n_prot = 0;
  for (int i = 0; i < n; ++i) n_prot += prot[i];
  const int drop = n - std::max(budget, n_prot);
  if (drop <= 0) {
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  if (drop <= 4) {  // decode-time: a few evictions, found by linear scans (no sort)
    std::vector<char> gone(n, 0);
    for (int d = 0; d < drop; ++d) {
      int worst = -1;
      for (int i = 0; i < n; ++i)
        if (!prot[i] && !gone[i] && (worst < 0 || Better(score, worst, i))) worst = i;
      gone[worst] = 1;
    }
    std::vector<int> keep;
    keep.reserve(n - drop);
    for (int i = 0; i < n; ++i)
      if (!gone[i]) keep.push_back(i);
    return keep;
  }
  std::vector<int> keep, rest;
  for (int i = 0; i < n; ++i) (prot[i] ? keep : rest).push_back(i);
  int room = std::max(0, budget - static_cast<int>(keep.size()));
  if (room < static_cast<int>(rest.size())) {
    std::nth_element(rest.begin(), rest.begin() + room, rest.end(), [&](int a, int b) { return Better(score, a, b); });
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

const std::vector<std::string>& ValueNormNames() {
  static const std::vector<std::string> n = {"none", "l2", "l1"};
  return n;
}

std::vector<double> ValueNorms(const HeadStore& s, int mode) {
  std::vector<double> out(s.size(), 1.0);
  if (mode == 0) return out;
  std::vector<float> v(s.head_dim());
  for (int i = 0; i < s.size(); ++i) {
    s.ReadValue(i, v.data());
    double acc = 0;
    for (float x : v) acc += mode == 2 ? std::abs(x) : static_cast<double>(x) * x;
    out[i] = mode == 2 ? acc : std::sqrt(acc);
  }
  return out;
}

}  // namespace kvtrim::kv
