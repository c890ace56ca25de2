#include <algorithm>
#include <cmath>

#include "io/splitmix.h"
#include "kvtrim/engine.h"

namespace kvtrim {

namespace {

using Ranked = Sampler::Candidate;

// The chain's one order over tokens: logit descending, then id ascending (a
// strict total order, so every cut below is one set whatever the library).
bool Before(const Ranked& a, const Ranked& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }
constexpr auto kBefore = [](const Ranked& a, const Ranked& b) { return Before(a, b); };

// The k first tokens of the order, sorted: one pass with a k-entry heap whose
// top is the worst kept (a later token that ties it has a larger id: out).
void TopK(const float* l, int n, int k, std::vector<Ranked>* out) {
  std::vector<Ranked>& h = *out;
  h.clear();
  for (int i = 0; i < n; ++i) {
    const Ranked r{0, l[i], i};
    if (static_cast<int>(h.size()) < k) {
      h.push_back(r);
      std::push_heap(h.begin(), h.end(), kBefore);
    } else if (Before(r, h.front())) {
      std::pop_heap(h.begin(), h.end(), kBefore);
      h.back() = r;
      std::push_heap(h.begin(), h.end(), kBefore);
    }
  }
  std::sort_heap(h.begin(), h.end(), kBefore);
}

// Temperature-1 probabilities of the candidates (their max logit `top`).
void Softmax1(std::vector<Ranked>& c, float top) {
  double z = 0;
  for (Ranked& r : c) z += (r.p = std::exp(static_cast<double>(r.logit) - top));
  for (Ranked& r : c) r.p /= z;
}

// Top-p over the whole vocabulary (top-k off): the last token, in the
// order, of the shortest prefix whose temperature-1 weight `w` (exp(l - top),
// unnormalised, total `z`) reaches top_p * z. One pass buckets the logits
// (a monotone map, so buckets follow the order) and sums each bucket's
// weight; the bucket where the running sum crosses is the only one sorted.
// Linear in the vocabulary where a sort costs n log n (a flat vocabulary's
// nucleus is most of it).
Ranked NucleusCutoff(const float* l, const std::vector<double>& w, double z, double top_p) {
  const int n = static_cast<int>(w.size());
  constexpr int kBuckets = 4096;
  const auto [mn, mx] = std::minmax_element(l, l + n);
  const double lo = *mn, span = static_cast<double>(*mx) - lo;
  const double scale = span > 0 && std::isfinite(span) ? (kBuckets - 1) / span : 0;
  auto bucket = [&](float x) { return kBuckets - 1 - static_cast<int>((x - lo) * scale); };  // 0: the highest logits
  std::vector<double> mass(kBuckets, 0.0);
  for (int i = 0; i < n; ++i) mass[bucket(l[i])] += w[i];
  const double target = top_p * z;
  double cum = 0;
  int b = 0;
  for (; b < kBuckets - 1 && cum + mass[b] < target; ++b) cum += mass[b];
  std::vector<Ranked> in;
  for (int i = 0; i < n; ++i)
    if (bucket(l[i]) == b) in.push_back({w[i], l[i], i});
  std::sort(in.begin(), in.end(), kBefore);
  for (const Ranked& r : in)
    if ((cum += r.p) >= target) return r;
  return in.empty() ? Ranked{0, -INFINITY, n} : in.back();  // rounding short of the target: all of the bucket
}

}  // namespace

Sampler::Sampler(const SamplingOptions& o) : o_(o), state_(o.seed ^ 0x9E3779B97F4A7C15ull) {}

// splitmix64: fully specified, so the same seed gives the same tokens on any
// platform (std distributions are not portable across standard libraries).
double Sampler::Uniform() {
  return static_cast<double>(io::SplitMix64(state_) >> 11) * 0x1.0p-53;
}

void Sampler::Accept(int id) {
  if (o_.repeat_penalty == 1.f || o_.repeat_last_n == 0) return;
  recent_.push_back(id);
  if (o_.repeat_last_n > 0 && recent_.size() > static_cast<size_t>(o_.repeat_last_n)) recent_.erase(recent_.begin());
}

// The chain with top-k on: the k candidates, sorted; top-p on their
// temperature-1 distribution; min-p; weights at the temperature, in id order
// (cand_ and prob_ aligned).
void Sampler::WeighTopK(const float* l, int n, float top) {
  TopK(l, n, o_.top_k, &cand_);
  int keep = static_cast<int>(cand_.size());
  if (o_.top_p < 1.f) {
    Softmax1(cand_, top);
    double cum = 0;
    for (keep = 0; keep < static_cast<int>(cand_.size());)
      if ((cum += cand_[keep++].p) >= o_.top_p) break;
  }
  cand_.resize(keep);
  std::sort(cand_.begin(), cand_.end(), [](const Ranked& a, const Ranked& b) { return a.id < b.id; });
  prob_.clear();
  for (const Ranked& r : cand_) prob_.push_back(Weight(r.logit, top));
}

// The chain with top-k off: a weight for every id (0 when out), each stage
// one pass over the vocabulary (NucleusCutoff for top-p).
void Sampler::WeighAll(const float* l, int n, float top) {
  prob_.resize(n);
  Ranked last{0, -INFINITY, n};  // every token is at or before it
  if (o_.top_p < 1.f) {
    double z = 0;
    for (int i = 0; i < n; ++i) z += (prob_[i] = std::exp(static_cast<double>(l[i]) - top));
    last = NucleusCutoff(l, prob_, z, o_.top_p);
  }
  for (int i = 0; i < n; ++i) prob_[i] = Before(last, {0, l[i], i}) ? 0.0 : Weight(l[i], top);
}

// A kept token's weight at the temperature: 0 below min-p's floor (p >=
// min_p * p_max at temperature 1, i.e. logit >= top + log(min_p)).
double Sampler::Weight(float logit, float top) const {
  if (o_.min_p > 0.f && logit < top + std::log(static_cast<double>(o_.min_p))) return 0.0;
  return std::exp((static_cast<double>(logit) - top) / o_.temp);
}

// The chain (llama.cpp's default order; kvtrim/options.h): penalties on a
// copy of the logits (each token seen once or more, once); greedy is their
// argmax; then top-k, top-p, min-p and the temperature (WeighTopK or
// WeighAll), and a draw that walks the kept tokens in id order.
int Sampler::Sample(const std::vector<float>& logits) {
  const int n = static_cast<int>(logits.size());
  const float* l = logits.data();
  if (!recent_.empty()) {
    work_.assign(logits.begin(), logits.end());
    std::vector<int> seen = recent_;
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int id : seen)
      if (id >= 0 && id < n) work_[id] = work_[id] > 0 ? work_[id] / o_.repeat_penalty : work_[id] * o_.repeat_penalty;
    l = work_.data();
  }
  const int argmax = static_cast<int>(std::max_element(l, l + n) - l);
  if (o_.temp <= 0.f || n <= 1) return argmax;
  const bool top_k = o_.top_k > 0 && o_.top_k < n;
  if (top_k) WeighTopK(l, n, l[argmax]);
  else WeighAll(l, n, l[argmax]);
  double mass = 0;
  for (double w : prob_) mass += w;
  double u = Uniform() * mass;
  int pick = argmax;  // no mass (non-finite logits): the argmax
  for (size_t i = 0; i < prob_.size(); ++i)
    if (prob_[i] > 0) {
      pick = top_k ? cand_[i].id : static_cast<int>(i);
      if ((u -= prob_[i]) <= 0) break;
    }
  return pick;
}

}  // namespace kvtrim
