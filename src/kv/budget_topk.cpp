// The two global top-k allocators (budget.h): KVzip's shared budget over
// every head of the cache, and AdaKV's over the heads of one layer. Both
// give each head a floor of its own best entries, then rank every remaining
// entry of every head once and count the top places per head (GlobalCounts).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kv/budget.h"

namespace kvtrim::kv::budget {

namespace {

struct Candidate {
  double score;
  int entry, head;
};

// Adds to count[head] the heads of the `take` best candidates under `better`
// (a strict total order: candidates differ in (entry, head)).
template <class Better>
void GlobalCounts(std::vector<Candidate>& rest, int64_t take, Better better, std::vector<int>* count) {
  take = std::min<int64_t>(take, static_cast<int64_t>(rest.size()));
  if (take <= 0) return;
  std::nth_element(rest.begin(), rest.begin() + (take - 1), rest.end(), better);
  for (int64_t i = 0; i < take; ++i) ++(*count)[rest[i].head];
}

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

std::vector<int> SharedTopK(const std::vector<std::vector<double>>& scores, int64_t total, int floor) {
  const int H = static_cast<int>(scores.size());
  std::vector<int> count(H, 0);
  std::vector<Candidate> rest;
  int64_t all = 0;
  for (int h = 0; h < H; ++h) all += static_cast<int64_t>(scores[h].size());
  rest.reserve(static_cast<size_t>(all));
  for (int h = 0; h < H; ++h) {
    // The head's entries in KeepTop's order (best first, ties to the later).
    const std::vector<double>& s = scores[h];
    std::vector<int> order(s.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&s](int a, int b) { return s[a] > s[b] || (s[a] == s[b] && a > b); });
    count[h] = std::min<int>(floor, static_cast<int>(s.size()));
    for (size_t r = count[h]; r < order.size(); ++r) rest.push_back({s[order[r]], order[r], h});
  }
  const int64_t left = std::min(total, all) - std::accumulate(count.begin(), count.end(), int64_t{0});
  GlobalCounts(rest, left, [](const Candidate& a, const Candidate& b) {
    return a.score > b.score || (a.score == b.score && (a.entry > b.entry || (a.entry == b.entry && a.head > b.head)));
  }, &count);
  return count;
}

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

std::vector<int> AdaptiveHeadBudgets(const std::vector<EntryScores>& heads, int b, double min_share) {
  const int H = static_cast<int>(heads.size());
  std::vector<int> budget(H, 0);
  const int floor_share = static_cast<int>(std::ceil(std::clamp(min_share, 0.0, 1.0) * b - 1e-9));
  int64_t room = static_cast<int64_t>(H) * b;
  std::vector<Candidate> rest;
  for (int h = 0; h < H; ++h) {
    const EntryScores& e = heads[h];
    const int n = static_cast<int>(e.score.size());
    const int n_prot = static_cast<int>(std::count(e.prot.begin(), e.prot.end(), true));
    budget[h] = std::min(n, std::max(floor_share, n_prot));
    room -= budget[h];
    const std::vector<double> s = NormalizeHeadScores(e);
    const std::vector<int> order = BestFirst(e, s, budget[h]);
    for (int k = budget[h]; k < n; ++k) rest.push_back({s[order[k]], order[k], h});
  }
  GlobalCounts(rest, room, [](const Candidate& a, const Candidate& c) {
    if (a.score != c.score) return a.score > c.score;
    if (a.entry != c.entry) return a.entry > c.entry;
    return a.head < c.head;
  }, &budget);
  return budget;
}

}  // namespace kvtrim::kv::budget
