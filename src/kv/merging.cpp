#include "kv/merging.h"

#include "kv/numerics/eigen.h"
#include "kv/taps/recent_rows.h"
#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvtrim::kv {

namespace {

using VecF = Eigen::VectorXf;
using ConstMapF = Eigen::Map<const Eigen::VectorXf>;
using RowsF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// An entry of the head as the merge rounds see it: one original entry, or
// originals merged in an earlier round of this plan. Merges are adjacent, so
// a group is the contiguous range [first, first + count) of original
// entries; its key is sum kw[i] k_i over the range, its value (the
// cardinality-weighted mean) lives in row `first` of the working values.
struct Group {
  int first = 0, count = 1;
  double alpha = 0;  // observed attention (over every entry; MergingOptions::renorm: over non-sinks)
  double card = 1;   // tokens it stands for (exp b)
  int32_t pos = 0;   // position of its first entry (sinks come first)
};

// The rounds' working state: groups in order, per-original key weights, values.
struct Work {
  std::vector<Group> g;
  std::vector<double> kw;  // [n] weight of original i in its group's key
  RowsF v;                 // [n, d] row `first` of a group: its value
  VecF o;                  // [d] attention output of the observation
};

double Norm(const VecF& x, bool l1) { return l1 ? x.lpNorm<1>() : x.norm(); }

// Initial groups: the head's entries with their observed attention alpha_i
// (the seed's eq. 9: the softmax over all n entries, sinks included, as the
// statistics hold it) and o = sum alpha_i v_i over all of them (eqs. 23-25).
// opt.renorm (ablation): alpha renormalised over the non-sinks, sinks out of o.
Work Observe(const PolicyContext& ctx, const MergingOptions& opt) {
  const HeadStore& s = *ctx.store;
  const int n = s.size(), d = s.head_dim();
  const auto* rows = ctx.stats && ctx.all_stats ? ctx.stats->taps.Get<RecentRowsStat>(kRecentRowsTap) : nullptr;
  const int64_t latest = ctx.all_stats ? ctx.all_stats->step() : 0;
  std::vector<double> alpha = rows ? rows->Mass(n, latest) : std::vector<double>(n, 0.0);
  // Mass sums the observed queries' rows: their mean is alpha.
  const int queries = rows ? std::max(1, rows->Queries(latest)) : 1;
  for (double& x : alpha) x /= queries;
  double total = 0;
  for (int i = 0; i < n; ++i)
    if (s.pos(i) >= opt.sinks) total += alpha[i];
  Work w;
  w.g.resize(n);
  w.kw.assign(n, 1.0);
  w.v.resize(n, d);
  Eigen::VectorXf a(n);
  for (int i = 0; i < n; ++i) {
    if (!opt.renorm) a[i] = static_cast<float>(alpha[i]);
    else a[i] = s.pos(i) >= opt.sinks && total > 0 ? static_cast<float>(alpha[i] / total) : 0.f;
    w.g[i] = {i, 1, a[i], std::exp(double{s.logw(i)}), s.pos(i)};
    s.ReadValue(i, w.v.row(i).data());
  }
  w.o = w.v.transpose() * a;  // [d]
  return w;
}

// Merges group b into group a (b follows a) with pair key weights (wa, wb).
void Combine(Work& w, Group& a, const Group& b, double wa, double wb) {
  for (int i = a.first; i < a.first + a.count; ++i) w.kw[i] *= wa;
  for (int i = b.first; i < b.first + b.count; ++i) w.kw[i] *= wb;
  const double card = a.card + b.card;
  w.v.row(a.first) = static_cast<float>(a.card / card) * w.v.row(a.first) + static_cast<float>(b.card / card) * w.v.row(b.first);
  a.count += b.count;
  a.alpha += b.alpha;
  a.card = card;
}

// One round: up to `count` lowest-mass pairs merge. Returns the pairs merged
// and adds the closed-form fallbacks to *fallbacks.
int Round(Work& w, const MergingOptions& opt, int count, int64_t* fallbacks) {
  const int size = static_cast<int>(w.g.size());
  std::vector<double> mass(size);
  std::vector<bool> eligible(size);
  for (int i = 0; i < size; ++i) {
    mass[i] = w.g[i].alpha;
    eligible[i] = w.g[i].pos >= opt.sinks && i < size - opt.window;
  }
  const std::vector<int> pairs = ChoosePairs(mass, eligible, count);
  const int d = static_cast<int>(w.o.size());
  size_t p = 0, out = 0;
  for (int i = 0; i < size; ++i) {
    Group a = w.g[i];
    if (p < pairs.size() && pairs[p] == i) {
      const Group& b = w.g[i + 1];
      PairWeights pw{a.card / (a.card + b.card), b.card / (a.card + b.card), false};
      if (opt.rule == KeyRule::kClosedForm)
        pw = SlimmerWeights(a.alpha, b.alpha, w.v.row(a.first).data(), w.v.row(b.first).data(), w.o.data(), d, opt.l1,
                            opt.diag_only);
      *fallbacks += pw.fallback;
      Combine(w, a, b, pw.wm, pw.wn);
      ++i, ++p;
    }
    w.g[out++] = a;
  }
  w.g.resize(out);
  return static_cast<int>(pairs.size());
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

PolicyTraits MergingPolicy::Traits(const MergingOptions& o) {
  return {.needs = {.taps = {{kRecentRowsTap, o.window}}},
          .protected_entries = o.sinks + o.window + 1,
          .rates = {{"fallback rate", "fallbacks", "merges"}}};
}

Plan MergingPolicy::Compress(const PolicyContext& ctx) {
  const int n = ctx.store->size();
  const int budget = ctx.budget, chunk = EffectiveChunk(o_.chunk, budget);
  if (n <= budget || (ctx.phase == Phase::kDecode && n < budget + chunk)) return Plan{};  // cheap no-op
  Work w = Observe(ctx, o_);
  int64_t merged = 0, fallbacks = 0, rounds = 0;
  while (static_cast<int>(w.g.size()) > budget) {
    const int k = Round(w, o_, std::min(chunk, static_cast<int>(w.g.size()) - budget), &fallbacks);
    if (k == 0) break;  // nothing left to merge (protected_entries keeps this from happening)
    merged += k;
    ++rounds;
  }
  merges_ += merged;
  fallbacks_ += fallbacks;
  rounds_ += rounds;
  Plan plan;
  plan.noop = false;
  plan.keep.reserve(w.g.size());
  for (const Group& x : w.g) {
    if (x.count == 1) {
      plan.keep.push_back(x.first);
      continue;
    }
    MergeEntry m;
    m.sources.resize(x.count);
    std::iota(m.sources.begin(), m.sources.end(), x.first);
    m.key_weights.assign(w.kw.begin() + x.first, w.kw.begin() + x.first + x.count);
    plan.merge.push_back(std::move(m));
  }
  return plan;
}

std::vector<std::pair<std::string, int64_t>> MergingPolicy::Counters() const {
  return {{"merges", merges_.load()}, {"fallbacks", fallbacks_.load()}, {"rounds", rounds_.load()}};
}

}  // namespace kvtrim::kv
