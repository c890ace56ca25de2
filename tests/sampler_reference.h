// The sampling chain written plainly, as the tests' reference for Sampler
// (src/engine/sampler.cpp): a full sort of the vocabulary every step, each
// stage of llama.cpp's default order as its own loop, the draw by the
// definition (the kept tokens in id order, the first whose running weight
// reaches u times the total).
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "kvtrim/options.h"

namespace kvtrim::test {

// The uniform draws a Sampler with `seed` makes (its splitmix64 stream).
inline double DrawOf(uint64_t seed, int k) {
  uint64_t state = seed ^ 0x9E3779B97F4A7C15ull, z = 0;
  for (int i = 0; i <= k; ++i) {
    z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
  }
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

// The tokens the chain keeps and their weights at the temperature (not
// normalised), by id; `history`: the tokens the penalty looks back over.
inline std::vector<double> ReferenceWeights(std::vector<float> l, const SamplingOptions& o,
                                            const std::vector<int>& history) {
  const int n = static_cast<int>(l.size());
  for (int id : std::set<int>(history.begin(), history.end())) l[id] = l[id] > 0 ? l[id] / o.repeat_penalty : l[id] * o.repeat_penalty;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  int keep = o.top_k > 0 ? std::min(o.top_k, n) : n;
  const double top = l[order[0]];
  if (o.top_p < 1.f) {
    double z = 0, cum = 0;
    for (int i = 0; i < keep; ++i) z += std::exp(l[order[i]] - top);
    int k = 0;
    while (k < keep) {
      cum += std::exp(l[order[k++]] - top) / z;
      if (cum >= o.top_p) break;
    }
    keep = k;
  }
  std::vector<double> w(n, 0.0);
  for (int i = 0; i < keep; ++i) {
    const int id = order[i];
    const bool min_p_ok = o.min_p <= 0.f || std::exp(l[id] - top) >= o.min_p;  // p / p_max at temperature 1
    if (min_p_ok) w[id] = std::exp((l[id] - top) / o.temp);
  }
  return w;
}

inline int ReferenceSample(const std::vector<float>& logits, const SamplingOptions& o, const std::vector<int>& history,
                           double u) {
  const std::vector<double> w = ReferenceWeights(logits, o, history);
  double mass = 0;
  for (double x : w) mass += x;
  double r = u * mass;
  int pick = -1;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] > 0) {
      pick = static_cast<int>(i);
      if ((r -= w[i]) <= 0) break;
    }
  return pick;
}

}  // namespace kvtrim::test
