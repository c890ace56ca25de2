// The reference of KVzip's shared budget, by a full sort: each head's best
// entry first (the floor of 1), then the best of the rest over every head
// until `total`; ties: the later entry, then the later head (all
// descending). Per head, the kept entry indices in increasing order.
#pragma once
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace kvtrim::test {

// KVzip's plain ranking, the one the references here compute: no pooling,
// no floor share (kvzip's defaults are 3 and 0.25).
inline const std::map<std::string, double> kKvzipPlain = {{"kvzip-pool", 1}, {"kvzip-floor-share", 0}};

inline std::vector<std::vector<int>> GlobalTopWithFloor(const std::vector<std::vector<double>>& score, int total) {
  const int heads = static_cast<int>(score.size());
  std::vector<std::tuple<double, int, int>> all;  // score, entry, head
  for (int f = 0; f < heads; ++f)
    for (int j = 0; j < static_cast<int>(score[f].size()); ++j) all.emplace_back(score[f][j], j, f);
  std::sort(all.rbegin(), all.rend());
  std::vector<std::vector<int>> want(heads);
  std::vector<std::tuple<double, int, int>> rest;
  std::vector<char> has(heads, 0);
  for (const auto& t : all) {
    if (!has[std::get<2>(t)]) has[std::get<2>(t)] = 1, want[std::get<2>(t)].push_back(std::get<1>(t));
    else rest.push_back(t);
  }
  for (int i = 0; i < total - heads && i < static_cast<int>(rest.size()); ++i)
    want[std::get<2>(rest[i])].push_back(std::get<1>(rest[i]));
  for (auto& w : want) std::sort(w.begin(), w.end());
  return want;
}

}  // namespace kvtrim::test
