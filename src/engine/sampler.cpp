#include <algorithm>
#include <cmath>
#include <numeric>

#include "io/splitmix.h"
#include "kvtrim/engine.h"

namespace kvtrim {

Sampler::Sampler(const SamplingOptions& o) : o_(o), state_(o.seed ^ 0x9E3779B97F4A7C15ull) {}

// splitmix64: fully specified, so the same seed gives the same tokens on any
// platform (std distributions are not portable across standard libraries).
double Sampler::Uniform() {
  return static_cast<double>(io::SplitMix64(state_) >> 11) * 0x1.0p-53;
}

// Temperature softmax in double, then nucleus sampling over the tokens in
// the order (probability descending, id ascending) until the mass reaches
// top_p. Only that prefix of the order is ever needed, so it is found by
// partial sorts of a growing top-k (64, 256, ... tokens): the first k of the
// full order are exactly the k smallest under the same strict total order,
// sorted, so the prefix, every sum over it (same terms, same order) and the
// one uniform draw are those of a full sort. Greedy is an argmax.
int Sampler::Sample(const std::vector<float>& logits) {
  const int n = static_cast<int>(logits.size());
  if (o_.temp <= 0.f) return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<double> p(n);
  double m = *std::max_element(logits.begin(), logits.end()), sum = 0;
  for (int i = 0; i < n; ++i) sum += (p[i] = std::exp((logits[i] - m) / o_.temp));
  for (double& x : p) x /= sum;
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  int keep = n;
  if (o_.top_p > 0.f && o_.top_p < 1.f) {
    auto before = [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); };
    double cum = 0;
    int sorted = 0;
    for (keep = 0; keep < n;) {
      if (keep == sorted) {  // extend the sorted prefix of the order
        const int k = std::min(n, std::max(64, 4 * sorted));
        std::partial_sort(idx.begin() + sorted, idx.begin() + k, idx.end(), before);
        sorted = k;
      }
      cum += p[idx[keep++]];
      if (cum >= o_.top_p) break;
    }
  }
  double mass = 0;
  for (int i = 0; i < keep; ++i) mass += p[idx[i]];
  double r = Uniform() * mass;
  for (int i = 0; i < keep; ++i) {
    r -= p[idx[i]];
    if (r <= 0) return idx[i];
  }
  return idx[keep - 1];
}

}  // namespace kvtrim
