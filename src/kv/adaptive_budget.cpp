#include "kv/adaptive_budget.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvtrim::kv {

std::vector<double> NormalizeHeadScores(const EntryScores& e) {
  const size_t n = e.score.size();
  std::vector<double> s(e.score);
  if (n == 0) return s;
  if (!e.mass) {
    const double lo = *std::min_element(s.begin(), s.end());
    for (double& x : s) x -= lo;
  }
  double sum = 0;
  for (double& x : s) {
    if (!std::isfinite(x) || x < 0) x = 0;  // a mass is never negative; guard odd inputs
    sum += x;
  }
  if (!(sum > 0)) return std::vector<double>(n, 1.0 / static_cast<double>(n));
  for (double& x : s) x /= sum;
  return s;
}

namespace {

struct Candidate {
  double score;
  int head, entry;
};

// Entries of one head with its `first` best in front (protected first, then
// by score, then newer; the order within each part is unspecified).
std::vector<int> BestFirst(const EntryScores& e, const std::vector<double>& s, int first) {
  std::vector<int> idx(s.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto prot = [&](int i) { return i < static_cast<int>(e.prot.size()) && e.prot[i]; };
  std::nth_element(idx.begin(), idx.begin() + first, idx.end(), [&](int a, int c) {
    if (prot(a) != prot(c)) return prot(a);
    if (s[a] != s[c]) return s[a] > s[c];
    return a > c;
  });
  return idx;
}

}  // namespace

std::vector<int> AdaptiveHeadBudgets(const std::vector<EntryScores>& heads, int b, double min_share) {
  const int H = static_cast<int>(heads.size());
  std::vector<int> budget(H, 0);
  const int floor_share = static_cast<int>(std::ceil(std::clamp(min_share, 0.0, 1.0) * b - 1e-9));
  long long room = static_cast<long long>(H) * b;
  std::vector<Candidate> rest;
  for (int h = 0; h < H; ++h) {
    const EntryScores& e = heads[h];
    const int n = static_cast<int>(e.score.size());
    const int n_prot = static_cast<int>(std::count(e.prot.begin(), e.prot.end(), true));
    budget[h] = std::min(n, std::max(floor_share, n_prot));
    room -= budget[h];
    const std::vector<double> s = NormalizeHeadScores(e);
    const std::vector<int> order = BestFirst(e, s, budget[h]);
    for (int k = budget[h]; k < n; ++k) rest.push_back({s[order[k]], h, order[k]});
  }
  if (room <= 0) return budget;
  const size_t take = static_cast<size_t>(std::min<long long>(room, static_cast<long long>(rest.size())));
  auto better = [](const Candidate& a, const Candidate& c) {
    if (a.score != c.score) return a.score > c.score;
    if (a.entry != c.entry) return a.entry > c.entry;
    return a.head < c.head;
  };
  std::nth_element(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(take), rest.end(), better);
  for (size_t k = 0; k < take; ++k) ++budget[rest[k].head];
  return budget;
}

}  // namespace kvtrim::kv
