#include "kv/merging.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvtrim::kv {

namespace {

using VecF = Eigen::VectorXf;
using ConstMapF = Eigen::Map<const Eigen::VectorXf>;

// An entry of the head as the merge rounds see it: one original entry, or a
// group of originals merged in an earlier round of this plan. Its key is
// sum kw[s] k[src[s]]; its value is the cardinality-weighted mean.
struct Group {
  std::vector<int> src;    // original indices, increasing
  std::vector<double> kw;  // key weight per source
  double alpha = 0;        // observed attention (renormalised over non-sinks)
  double card = 1;         // tokens it stands for (exp b)
  int32_t pos = 0;         // position of its first source (sinks come first)
  VecF v;                  // [d] value
};

double Norm(const VecF& x, bool l1) { return l1 ? x.lpNorm<1>() : x.norm(); }

// Initial groups: the head's entries with their observed attention; o = sum alpha_i v_i.
std::vector<Group> Observe(const PolicyContext& ctx, int sinks, VecF* o) {
  const HeadStore& s = *ctx.store;
  const int n = s.size(), d = s.head_dim();
  std::vector<double> alpha = ctx.all_stats ? ctx.all_stats->RecentMass(ctx.layer, ctx.head, n) : std::vector<double>(n, 0.0);
  double total = 0;
  for (int i = 0; i < n; ++i)
    if (s.pos(i) >= sinks) total += alpha[i];
  std::vector<Group> g(n);
  *o = VecF::Zero(d);
  for (int i = 0; i < n; ++i) {
    g[i].src = {i};
    g[i].kw = {1.0};
    g[i].alpha = s.pos(i) >= sinks && total > 0 ? alpha[i] / total : 0.0;
    g[i].card = std::exp(double{s.logw(i)});
    g[i].pos = s.pos(i);
    g[i].v.resize(d);
    s.ReadValue(i, g[i].v.data());
    if (g[i].alpha > 0) *o += static_cast<float>(g[i].alpha) * g[i].v;
  }
  return g;
}

Group Combine(Group&& a, Group&& b, double wa, double wb) {
  Group m;
  m.src = std::move(a.src);
  m.src.insert(m.src.end(), b.src.begin(), b.src.end());
  m.kw.reserve(m.src.size());
  for (double w : a.kw) m.kw.push_back(wa * w);
  for (double w : b.kw) m.kw.push_back(wb * w);
  m.alpha = a.alpha + b.alpha;
  m.card = a.card + b.card;
  m.pos = a.pos;
  m.v = (static_cast<float>(a.card / m.card) * a.v + static_cast<float>(b.card / m.card) * b.v);
  return m;
}

}  // namespace

PairWeights SlimmerWeights(double a_m, double a_n, const float* v_m, const float* v_n, const float* o, int d, bool l1,
                           bool diag_only) {
  const ConstMapF vm(v_m, d), vn(v_n, d), ov(o, d);
  const double c11 = std::abs(a_m * (1 - 2 * a_m)) * Norm(vm - ov, l1);
  const double c22 = std::abs(a_n * (1 - 2 * a_n)) * Norm(vn - ov, l1);
  const double c12 = diag_only ? 0.0 : a_m * a_n * Norm(vm + vn - 2 * ov, l1);
  const double den = c11 - 2 * c12 + c22;
  PairWeights w;
  const double scale = c11 + 2 * c12 + c22;
  if (std::abs(den) > 1e-9 * scale && std::isfinite(den) && scale > 0) {
    w.wm = (c11 - c12) / den;
    w.wn = (c22 - c12) / den;
    if (w.wm >= 0 && w.wm <= 1 && w.wn >= 0 && w.wn <= 1) return w;
  }
  w.fallback = true;
  const double sum = a_m + a_n;
  w.wm = sum > 0 ? a_m / sum : 0.5;
  w.wn = sum > 0 ? a_n / sum : 0.5;
  return w;
}

int EffectiveChunk(int chunk, int budget) { return std::max(1, std::min(chunk, budget / 4)); }

std::vector<int> ChoosePairs(const std::vector<double>& mass, const std::vector<bool>& eligible, int count) {
  const int n = static_cast<int>(mass.size());
  std::vector<int> cand;
  for (int i = 0; i + 1 < n; ++i)
    if (eligible[i] && eligible[i + 1]) cand.push_back(i);
  std::stable_sort(cand.begin(), cand.end(), [&](int a, int b) { return mass[a] + mass[a + 1] < mass[b] + mass[b + 1]; });
  std::vector<char> used(n, 0);
  std::vector<int> out;
  for (int i : cand) {
    if (static_cast<int>(out.size()) >= count) break;
    if (used[i] || used[i + 1]) continue;
    used[i] = used[i + 1] = 1;
    out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  return out;
}

StatsNeeds MergingPolicy::needs() const {
  StatsNeeds n;
  n.recent_window = o_.window;
  return n;
}

Plan MergingPolicy::Compress(const PolicyContext& ctx) {
  const int n = ctx.store->size();
  const int budget = ctx.budget, chunk = EffectiveChunk(o_.chunk, budget);
  if (n <= budget || (ctx.phase == Phase::kDecode && n < budget + chunk)) return Plan{};  // cheap no-op
  VecF o;
  std::vector<Group> g = Observe(ctx, o_.sinks, &o);
  while (static_cast<int>(g.size()) > budget) {
    const int size = static_cast<int>(g.size());
    std::vector<double> mass(size);
    std::vector<bool> eligible(size);
    for (int i = 0; i < size; ++i) {
      mass[i] = g[i].alpha;
      eligible[i] = g[i].pos >= o_.sinks && i < size - o_.window;
    }
    const std::vector<int> pairs = ChoosePairs(mass, eligible, std::min(chunk, size - budget));
    if (pairs.empty()) break;  // nothing left to merge (protected_entries keeps this from happening)
    std::vector<Group> next;
    next.reserve(size - pairs.size());
    size_t p = 0;
    int64_t fallbacks = 0;
    for (int i = 0; i < size; ++i) {
      if (p < pairs.size() && pairs[p] == i) {
        PairWeights w;
        if (o_.rule == KeyRule::kClosedForm)
          w = SlimmerWeights(g[i].alpha, g[i + 1].alpha, g[i].v.data(), g[i + 1].v.data(), o.data(),
                             static_cast<int>(o.size()), o_.l1, o_.diag_only);
        else
          w = {g[i].card / (g[i].card + g[i + 1].card), g[i + 1].card / (g[i].card + g[i + 1].card), false};
        fallbacks += w.fallback;
        next.push_back(Combine(std::move(g[i]), std::move(g[i + 1]), w.wm, w.wn));
        ++i, ++p;
      } else {
        next.push_back(std::move(g[i]));
      }
    }
    merges_ += static_cast<int64_t>(pairs.size());
    fallbacks_ += fallbacks;
    ++rounds_;
    g = std::move(next);
  }
  Plan plan;
  plan.noop = false;
  for (Group& x : g) {
    if (x.src.size() == 1) {
      plan.keep.push_back(x.src[0]);
    } else {
      MergeEntry m;
      m.sources = std::move(x.src);
      m.key_weights.assign(x.kw.begin(), x.kw.end());
      plan.merge.push_back(std::move(m));
    }
  }
  return plan;
}

std::vector<std::pair<std::string, int64_t>> MergingPolicy::Counters() const {
  return {{"merges", merges_.load()}, {"fallbacks", fallbacks_.load()}, {"rounds", rounds_.load()}};
}

}  // namespace kvtrim::kv
