// `compactor` (seed 001): query-agnostic prefill-time scoring. Per (layer,
// KV head): outlier score = leverage scores of the pre-RoPE keys (sketched
// SVD by default), attention score = non-causal attention inside chunks of
// the rotated prefill queries and keys, column sums over the group's query
// heads, times ||v_j||, mean-pooled; keep the top ceil(r N) of
// z(a) + lambda z(o). Entries that do not align with the collected prefill
// (merged, or older than the rows collected since the last compression) are
// kept untouched; a head with no aligned entry is left as it is.
// Chunked prefill (--prefill-chunk): each chunk is scored on its own rows
// (z-scores within the chunk, as a one-shot prefill scores the whole prompt)
// when it ends (EndChunk); the scores of the entries kept are carried, and
// entries of earlier chunks compete with the new ones by those scores.
#include "kv/policies/compactor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "kv/numerics/eigen.h"

#include "kv/numerics/leverage.h"
#include "kv/policies/policies.h"

namespace kvtrim::kv {

using MatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::vector<double> ChunkAttentionScores(const float* q, const float* k, int n, int G, int d, int chunk) {
  std::vector<double> out(std::max(0, n), 0.0);
  if (n <= 0 || G <= 0 || d <= 0) return out;
  chunk = std::max(1, chunk);
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  for (int c0 = 0; c0 < n; c0 += chunk) {
    const int c = std::min(chunk, n - c0);
    Eigen::Map<const MatF> Q(q + static_cast<size_t>(c0) * G * d, static_cast<Eigen::Index>(c) * G, d);  // [c G, d]
    Eigen::Map<const MatF> K(k + static_cast<size_t>(c0) * d, c, d);                                     // [c, d]
    MatF S = (Q * K.transpose()) * scale;                                                                // [c G, c]
    for (Eigen::Index i = 0; i < S.rows(); ++i) {  // row softmax
      auto row = S.row(i);
      row = (row.array() - row.maxCoeff()).exp();
      const float z = row.sum();
      if (z > 0 && std::isfinite(z)) row /= z;
      else row.setZero();
    }
    const Eigen::VectorXf col = S.colwise().sum().transpose();  // [c]
    for (int j = 0; j < c; ++j) out[c0 + j] = std::isfinite(col(j)) ? col(j) : 0.0;
  }
  return out;
}

std::vector<double> AvgPool(const std::vector<double>& x, int kernel) {
  const int n = static_cast<int>(x.size()), half = std::max(1, kernel) / 2;
  const int kk = std::max(1, kernel);
  std::vector<double> out(n, 0.0);
  for (int i = 0; i < n; ++i) {
    double s = 0;
    for (int j = std::max(0, i - half); j <= std::min(n - 1, i + half); ++j) s += x[j];
    out[i] = s / kk;
  }
  return out;
}

std::vector<double> ZScore(const std::vector<double>& x) {
  const double n = static_cast<double>(x.size());
  std::vector<double> z(x.size(), 0.0);
  if (x.size() < 2) return z;
  double mean = 0;
  for (double v : x) mean += v;
  mean /= n;
  double var = 0;
  for (double v : x) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / n);
  if (!(sd > 1e-12 * std::max(1.0, std::abs(mean))) || !std::isfinite(sd)) return z;
  for (size_t i = 0; i < x.size(); ++i) z[i] = (x[i] - mean) / sd;
  return z;
}

std::vector<double> BlendScores(const std::vector<double>& a, const std::vector<double>& o, double lambda) {
  std::vector<double> za = ZScore(a), zo = ZScore(o);
  for (size_t i = 0; i < za.size() && i < zo.size(); ++i) za[i] += lambda * zo[i];
  return za;
}

namespace {

struct CompactorParams {
  numerics::LeverageOptions lev;
  int chunk = 256, kernel = 5, value_norm = 1, protect_first = 0, protect_last = 0;
  double lambda = 0.3;
};

class CompactorPolicy : public Policy {
 public:
  explicit CompactorPolicy(CompactorParams p) : p_(p) {}
  // Blended z-scores of the aligned prefill entries (signed: shifted by the
  // minimum for --head-budget adaptive); entries of earlier chunks take their
  // carried scores; other entries protected, at the minimum.
  EntryScores Score(const PolicyContext& ctx) override {
    const HeadStore& s = *ctx.store;
    const int n = s.size(), d = s.head_dim();
    EntryScores e{std::vector<double>(n, 0.0), std::vector<bool>(n, true), false};  // unaligned entries are kept
    const std::vector<double>* carried = Carried(ctx);
    const int n_carried = carried ? static_cast<int>(std::min<size_t>(carried->size(), n)) : 0;
    for (int i = 0; i < n_carried; ++i) e.score[i] = (*carried)[i], e.prot[i] = false;
    const HeadStats* st = ctx.stats;
    const int n_pre = st && d > 0 ? static_cast<int>(st->k_pre.size() / d) : 0;
    const int G = n_pre > 0 ? static_cast<int>(st->q_rot.size() / (static_cast<size_t>(n_pre) * d)) : 0;
    // Prefill row t holds position first + t (rows run up to the newest token).
    const int64_t first = ctx.logical_len - n_pre;
    std::vector<int> idx;  // aligned entries, and their prefill rows
    std::vector<int> row;
    for (int i = n_carried; i < n && n_pre > 0; ++i)
      if (s.logw(i) == 0.f && s.pos(i) >= first && s.pos(i) < ctx.logical_len) {
        idx.push_back(i);
        row.push_back(static_cast<int>(s.pos(i) - first));
      }
    if ((idx.empty() || G <= 0) && n_carried == 0) return e;
    const std::vector<double> sc =
        idx.empty() || G <= 0 ? std::vector<double>{} : Scores(s, *st, idx, row, G, ctx.layer * 7919 + ctx.head);
    for (size_t j = 0; j < sc.size(); ++j) e.score[idx[j]] = sc[j], e.prot[idx[j]] = false;
    double lo = std::numeric_limits<double>::infinity();
    for (int i = 0; i < n; ++i)
      if (!e.prot[i]) lo = std::min(lo, e.score[i]);
    for (int i = 0; i < n; ++i)
      if (e.prot[i]) e.score[i] = lo;
    for (int i = 0; i < n; ++i)
      if (s.pos(i) < p_.protect_first || i >= n - p_.protect_last) e.prot[i] = true;
    return e;
  }

  Plan Compress(const PolicyContext& ctx) override {
    std::vector<double>* carried = Carried(ctx);
    // Right after EndChunk the carried scores cover every entry.
    const bool fresh = carried && static_cast<int>(carried->size()) == ctx.store->size();
    EntryScores e = fresh ? EntryScores{*carried, std::vector<bool>(carried->size(), false), false} : Score(ctx);
    if (fresh)
      for (int i = 0; i < ctx.store->size(); ++i)
        if (ctx.store->pos(i) < p_.protect_first || i >= ctx.store->size() - p_.protect_last) e.prot[i] = true;
    if (std::all_of(e.prot.begin(), e.prot.end(), [](bool b) { return b; })) return {};
    Plan plan = Plan::Keep(KeepTop(e.score, e.prot, ctx.budget));
    if (carried && !carried->empty()) {  // a chunked prefill: the kept entries' scores go on
      std::vector<double> kept;
      kept.reserve(plan.keep.size());
      for (int i : plan.keep) kept.push_back(e.score[i]);
      *carried = std::move(kept);
    }
    return plan;
  }

  // Scores the chunk that just ended (its rows are dropped next) and keeps
  // every entry's score.
  void EndChunk(const PolicyContext& ctx) override {
    {
      std::lock_guard<std::mutex> lock(mu_);  // sized once, before any head reads it
      const size_t heads = static_cast<size_t>(ctx.n_layer) * ctx.n_head_kv;
      if (carried_.size() < heads) carried_.resize(heads);
    }
    EntryScores e = Score(ctx);
    *Carried(ctx) = std::move(e.score);
  }

 private:
  // Blended scores of the aligned entries idx (prefill rows `row`).
  std::vector<double> Scores(const HeadStore& s, const HeadStats& st, const std::vector<int>& idx,
                             const std::vector<int>& row, int G, uint64_t salt) const {
    const int m = static_cast<int>(idx.size()), d = s.head_dim();
    std::vector<float> kpre(static_cast<size_t>(m) * d), krot(static_cast<size_t>(m) * d),
        q(static_cast<size_t>(m) * G * d);  // [m, d], [m, d], [m, G, d]
    for (int j = 0; j < m; ++j) {
      std::copy_n(st.k_pre.data() + static_cast<size_t>(row[j]) * d, d, kpre.data() + static_cast<size_t>(j) * d);
      std::copy_n(st.q_rot.data() + static_cast<size_t>(row[j]) * G * d, G * d, q.data() + static_cast<size_t>(j) * G * d);
      s.ReadKey(idx[j], krot.data() + static_cast<size_t>(j) * d);
    }
    numerics::LeverageOptions lo = p_.lev;
    lo.seed = p_.lev.seed * 0x9E3779B97F4A7C15ull + salt;
    const std::vector<double> o = numerics::LeverageScores(kpre.data(), m, d, lo);
    std::vector<double> a = ChunkAttentionScores(q.data(), krot.data(), m, G, d, p_.chunk);
    if (p_.value_norm != 0) {
      const std::vector<double> vn = ValueNorms(s, p_.value_norm);
      for (int j = 0; j < m; ++j) a[j] *= vn[idx[j]];
    }
    return BlendScores(AvgPool(a, p_.kernel), o, p_.lambda);
  }

  std::vector<double>* Carried(const PolicyContext& ctx) {
    const size_t i = static_cast<size_t>(ctx.layer) * ctx.n_head_kv + ctx.head;
    return i < carried_.size() ? &carried_[i] : nullptr;
  }

  CompactorParams p_;
  std::mutex mu_;
  // Chunked prefill: per head (l * n_head_kv + h), the scores of its first
  // entries (earlier chunks'); empty outside a chunked prefill.
  std::vector<std::vector<double>> carried_;
};

}  // namespace

PolicyInfo CompactorPolicyInfo() {
  return {"compactor",
          "Leverage (outlier) + non-causal chunked attention scores, z-blended; query-agnostic, prefill-time.",
          {{"leverage", 0, "leverage route: sketch (SVD of K Phi), eig, qr, exact, srht", 0, 4,
            numerics::LeverageMethodNames()},
           {"sketch-dim", 64, "leverage sketch dimension k (at most the head dim)", 1, 1e6},
           {"center", 0, "centre the pre-RoPE keys over the sequence before leverage (0/1)", 0, 1},
           {"chunk", 256, "non-causal attention chunk length C", 1, 1e6},
           {"value-norm", 1, "scale attention scores by ||v_j||: none, l2, l1", 0, 2, ValueNormNames()},
           Odd({"pool-kernel", 5, "average-pooling kernel (odd)", 1, 101}),
           Real({"lambda", 0.3, "weight of the leverage z-score in the blend", 0, 1e6}),
           {"protect-first", 0, "first positions always kept"},
           {"protect-last", 0, "last entries always kept"},
           {"kv-seed", 0, "sketch seed"}},
          [](const Params& p) {
            CompactorParams c;
            c.lev.method = static_cast<numerics::LeverageMethod>(static_cast<int>(p.at("leverage")));
            c.lev.sketch_dim = static_cast<int>(p.at("sketch-dim"));
            c.lev.center = p.at("center") != 0;
            c.lev.seed = static_cast<uint64_t>(p.at("kv-seed"));
            c.chunk = static_cast<int>(p.at("chunk"));
            c.value_norm = static_cast<int>(p.at("value-norm"));
            c.kernel = static_cast<int>(p.at("pool-kernel"));
            c.lambda = p.at("lambda");
            c.protect_first = static_cast<int>(p.at("protect-first"));
            c.protect_last = static_cast<int>(p.at("protect-last"));
            return std::make_unique<CompactorPolicy>(c);
          },
          [](const Params& p) {
            return PolicyTraits{.decode_time = false,
                                .needs = {.prefill_qk = true, .prefill_k = true},
                                .protected_entries = static_cast<int>(p.at("protect-first") + p.at("protect-last")),
                                .scores_entries = true};
          }};
}

}  // namespace kvtrim::kv
