// Measuring nonuniform head budgets (METHODS.md section 4, Attention
// Matching): per calibration context, prefill once, compact every KV head at
// each ratio of the grid once (one fork per ratio), then for every (head,
// ratio) assemble the cache "this head at that ratio, every other head at the
// baseline r" from those compacted heads and teacher-force the continuation;
// the head's loss is the mean KL(full || assembled) per continuation token.
// Ratio 1 (the head whole, the others at r) is measured as the curve's end.
// Exact for policies that compact heads independently (am off-policy).
#include <chrono>
#include <cmath>
#include <cstdio>

#include "engine/engine_impl.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kvtrim/head_budgets.h"
#include "kvtrim/engine.h"
#include "model/config.h"

namespace kvtrim {

namespace {

// Mean over rows of KL(softmax(p) || softmax(q)), rows of length V.
double MeanKl(const std::vector<float>& p, const std::vector<float>& q, size_t V) {
  const size_t rows = p.size() / V;
  double sum = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* a = p.data() + r * V;
    const float* b = q.data() + r * V;
    double ma = a[0], mb = b[0];
    for (size_t i = 1; i < V; ++i) ma = std::max<double>(ma, a[i]), mb = std::max<double>(mb, b[i]);
    double za = 0, zb = 0;
    for (size_t i = 0; i < V; ++i) za += std::exp(a[i] - ma), zb += std::exp(b[i] - mb);
    const double la = ma + std::log(za), lb = mb + std::log(zb);
    double kl = 0;
    for (size_t i = 0; i < V; ++i) {
      const double lpa = a[i] - la;
      kl += std::exp(lpa) * (lpa - (b[i] - lb));
    }
    sum += std::max(0.0, kl);
  }
  return rows ? sum / rows : 0.0;
}

// Adds, for one context, each head's KL at each grid ratio to loss[head][ratio].
Status MeasureContext(const Engine& engine, const std::vector<int>& tokens, const HeadBudgetMeasureOptions& o,
                      const std::vector<double>& grid, int base_idx, std::vector<std::vector<double>>* loss,
                      const std::function<void(const std::string&)>& progress) {
  const auto& c = engine.impl().config();
  const std::vector<int> prefix(tokens.begin(), tokens.end() - o.continuation);
  const std::vector<int> cont(tokens.end() - o.continuation, tokens.end());
  SessionOptions so;
  so.kv = o.policy;
  if (so.kv.policy == "am") {  // off-policy (each head's compaction alone), the context's and the repeat's queries
    so.kv.params.try_emplace("am-onpolicy", 0);
    so.kv.params.try_emplace("am-queries", 1);
  }
  so.kv.ratio = o.ratio;
  so.kv.ratio_explicit = true;
  so.kv.head_budgets = 0;
  auto s = Session::Create(engine, so);
  if (!s.ok()) return s.error();
  KVTRIM_RETURN_IF_ERROR(s.value()->Prefill(prefix));
  KvOptions full;
  full.head_budgets = 0;
  auto ref = s.value()->Fork(full);
  if (!ref.ok()) return ref.error();
  auto ref_logits = ref.value()->ForwardAll(cont);
  if (!ref_logits.ok()) return ref_logits.error();
  // Every head compacted at every grid ratio (one fork each).
  std::vector<std::unique_ptr<Session>> at(grid.size());
  for (size_t i = 0; i < grid.size(); ++i) {
    KvOptions k = so.kv;
    k.ratio = grid[i];
    auto f = s.value()->Fork(k);
    if (!f.ok()) return f.error();
    KVTRIM_RETURN_IF_ERROR(f.value()->Compress());
    at[i] = std::move(f.value());
  }
  const size_t V = c.vocab;
  const int H = c.n_layer * c.n_head_kv;
  // Teacher-forces the continuation on a copy of the baseline cache whose
  // head `hd` (if >= 0) is replaced by its compaction at grid ratio i.
  auto kl_with = [&](int hd, size_t i) -> Expected<double> {
    auto f = at[base_idx]->Fork(full);
    if (!f.ok()) return f.error();
    if (hd >= 0) f.value()->impl().cache().head(hd / c.n_head_kv, hd % c.n_head_kv) = at[i]->impl().cache().head(hd / c.n_head_kv, hd % c.n_head_kv);
    auto lg = f.value()->ForwardAll(cont);
    if (!lg.ok()) return lg.error();
    return MeanKl(ref_logits.value(), lg.value(), V);
  };
  auto base = kl_with(-1, 0);
  if (!base.ok()) return base.error();
  for (int hd = 0; hd < H; ++hd) {
    std::string line = "  L" + std::to_string(hd / c.n_head_kv) + "K" + std::to_string(hd % c.n_head_kv) + ":";
    for (size_t i = 0; i < grid.size(); ++i) {
      double kl = base.value();
      if (static_cast<int>(i) != base_idx) {
        auto k = kl_with(hd, i);
        if (!k.ok()) return k.error();
        kl = k.value();
      }
      (*loss)[hd][i] += kl;
      char buf[32];
      std::snprintf(buf, sizeof buf, " %.4f", kl);
      line += buf;
    }
    if (progress) progress(line);
  }
  return {};
}

}  // namespace

Expected<StoredHeadBudgets> MeasureHeadBudgets(const Engine& engine, const std::vector<std::vector<int>>& contexts,
                                                   const HeadBudgetMeasureOptions& o,
                                                   const std::function<void(const std::string&)>& progress) {
  const auto& c = engine.impl().config();
  if (!(o.ratio > 0 && o.ratio < 1)) return MakeError("head budgets: the ratio must be in (0, 1)");
  if (contexts.empty()) return MakeError("head budgets: no calibration contexts");
  if (o.continuation < 1) return MakeError("head budgets: the continuation needs at least one token");
  if (o.policy.params.count("am-onpolicy") && o.policy.params.at("am-onpolicy") != 0)
    return MakeError("head budgets: the measurement compacts heads independently; on-policy compaction is not supported");
  for (const auto& t : contexts)
    if (static_cast<int>(t.size()) < o.continuation + 2)
      return MakeError("head budgets: a calibration context is shorter than its continuation");
  auto t0 = std::chrono::steady_clock::now();
  StoredHeadBudgets out;
  out.ratio = o.ratio;
  out.units_per_head = o.units_per_head;
  // The grid, and ratio 1 measured too: with the other heads at r, a head
  // left whole still loses something (InterpolateLoss would assume 0 there).
  out.sensitivity.ratios = DefaultRatioGrid(o.ratio);
  if (out.sensitivity.ratios.back() < 1.0) out.sensitivity.ratios.push_back(1.0);
  const std::vector<double>& grid = out.sensitivity.ratios;
  int base_idx = 0;
  for (size_t i = 0; i < grid.size(); ++i)
    if (std::abs(grid[i] - o.ratio) < std::abs(grid[base_idx] - o.ratio)) base_idx = static_cast<int>(i);
  const int H = c.n_layer * c.n_head_kv;
  out.sensitivity.loss.assign(H, std::vector<double>(grid.size(), 0.0));
  for (size_t k = 0; k < contexts.size(); ++k) {
    if (progress) progress("context " + std::to_string(k + 1) + "/" + std::to_string(contexts.size()) + " (" +
                           std::to_string(contexts[k].size()) + " tokens): KL per head at each grid ratio");
    KVTRIM_RETURN_IF_ERROR(MeasureContext(engine, contexts[k], o, grid, base_idx, &out.sensitivity.loss, progress));
  }
  for (auto& row : out.sensitivity.loss)
    for (double& v : row) v /= static_cast<double>(contexts.size());
  HeadBudgetOptions ho;
  ho.ratio = o.ratio;
  ho.units_per_head = o.units_per_head;
  // Searched on the non-increasing majorant; the raw curves are stored.
  auto units = SearchHeadBudgets(NonIncreasing(out.sensitivity), ho);
  if (!units.ok()) return units.error();
  out.units = std::move(units.value());
  out.contexts = static_cast<int>(contexts.size());
  out.context_tokens = static_cast<int>(contexts[0].size()) - o.continuation;
  out.continuation_tokens = o.continuation;
  out.seed = o.seed;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace kvtrim
