// Attention Matching's fit (am_fit.h; METHODS.md section 4, seed 002).
//
// Conventions (ours, documented in docs/am.md): reference queries see every
// key of the block (they stand for future queries, which do); each
// (position, group head) query is one row; identical keys are merged before
// selection (one candidate, its cardinality in the mass target).
#include "io/splitmix.h"
#include "kernels/scratch.h"
#include "kv/policies/am_fit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>

#include "kv/numerics/lstsq.h"
#include "kv/numerics/nnls.h"
#include "kv/numerics/omp.h"
#include "kv/numerics/row_sample.h"
#include "kv/numerics/vexp.h"
#include "kv/policies/am_scores.h"
#include "kvtrim/clock.h"

namespace kvtrim::kv {

using Eigen::MatrixXd;
using Eigen::MatrixXf;
using Eigen::VectorXd;

namespace {



// Unique keys of the block: rep[u] = first entry of the u-th distinct key,
// of[i] = u for each entry.
void UniqueKeys(const MatrixXf& K, std::vector<int>* rep, std::vector<int>* of) {
  std::unordered_map<std::string, int> seen;
  of->resize(K.rows());
  for (int i = 0; i < K.rows(); ++i) {
    std::string bytes(reinterpret_cast<const char*>(K.row(i).eval().data()), sizeof(float) * K.cols());
    auto [it, fresh] = seen.emplace(bytes, static_cast<int>(rep->size()));
    if (fresh) rep->push_back(i);
    (*of)[i] = it->second;
  }
}

// Distinct keys by root-mean-square attention weight over the queries
// (AmScores::rms, monotone in it), highest first (ties keep the earlier
// key). The top t are highest-attn's pick; the rest is the order in which
// Refill offers keys.
std::vector<int> RankByRms(const Eigen::VectorXf& score) {
  std::vector<int> idx(score.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return score(a) > score(b); });
  return idx;
}

// Distinct keys by the caller's per-entry scores, highest first (a distinct
// key's score is its copies' largest; ties keep the earlier key).
std::vector<int> RankByScores(const std::vector<double>& score, const std::vector<int>& of, int nu) {
  std::vector<double> s(nu, -std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < of.size() && i < score.size(); ++i) s[of[i]] = std::max(s[of[i]], score[i]);
  std::vector<int> idx(nu);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return s[a] > s[b]; });
  return idx;
}

// As^T As [k, k] of the picked columns As [M, k]: one triangle by a rank
// update, mirrored. In double as the right-hand sides: the columns are
// float, so each product is exact and the two agree to double's rounding
// (a float Gram against double right-hand sides gave keys without mass
// weights of 1e-7, fitting the difference).
MatrixXd Gram(const MatrixXd& As) {
  MatrixXd P = MatrixXd::Zero(As.cols(), As.cols());
  P.selfadjointView<Eigen::Lower>().rankUpdate(As.transpose());
  P.triangularView<Eigen::StrictlyUpper>() = P.transpose();
  return P;
}

// NNLS on a Gram matrix, its time added to *ns (the fit's time split).
VectorXd TimedNnls(const MatrixXd& P, const VectorXd& rhs, const VectorXd& x0, int64_t* ns) {
  const int64_t t0 = SteadyNowNs();
  VectorXd x = numerics::NnlsGram(P, rhs, &x0).x;
  *ns += SteadyNowNs() - t0;
  return x;
}

// Keys picked (distinct-key indices) and their NNLS weights on the mass target.
// gram: the picks' Gram matrix As^T As when it was formed (highest
// attention), for Refill's first round; left empty otherwise.
// floor (per distinct key, or null): each picked key weighs at least its
// entry there, the NNLS fitting only the excess w - floor >= 0 to the mass
// the picks leave unexplained (A (w - floor) ~ m - A floor).
void SelectAndWeigh(AmColumns& A, const VectorXd& mass, const std::vector<int>& ranking, int t, const AmConfig& c,
                    const VectorXd* floor, std::vector<int>* sel, VectorXd* w, MatrixXd* gram, int64_t* nnls_ns) {
  if (c.omp) {
    MatrixXd Ad(A.rows(), ranking.size());  // every distinct key's column [M, nu]
    for (size_t u = 0; u < ranking.size(); ++u) Ad.col(u) = A.A(static_cast<int>(u)).cast<double>();
    numerics::OmpResult r = numerics::OmpNnls(Ad, mass, t, c.omp_step);
    *sel = r.support;
    *w = r.w;
  }
  if (sel->empty()) {  // highest attention (or OMP found nothing to pick: no query has mass)
    sel->assign(ranking.begin(), ranking.begin() + std::min<size_t>(t, ranking.size()));
    VectorXd fl = VectorXd::Zero(sel->size());
    if (floor)
      for (size_t a = 0; a < sel->size(); ++a) fl(a) = (*floor)((*sel)[a]);
    if (floor && !c.fit_weights) {  // the picks as they are: their own cardinality, no NNLS (nor refill)
      *w = fl;
      return;
    }
    MatrixXd As(A.rows(), sel->size());  // [M, t]
    for (size_t a = 0; a < sel->size(); ++a) As.col(a) = A.A((*sel)[a]).cast<double>();
    MatrixXd P = Gram(As);  // [t, t]
    VectorXd rhs = As.transpose() * mass;
    if (floor) rhs -= P * fl;
    // Warm start from the positive part of the unconstrained fit: most
    // weights are positive, so Lawson-Hanson needs a few solves, not t.
    const VectorXd x0 = P.completeOrthogonalDecomposition().solve(rhs).cwiseMax(0.0);
    *w = TimedNnls(P, rhs, x0, nnls_ns) + fl;
    *gram = std::move(P);
  }
}

// Picked keys (indices into sel) with a usable NNLS weight.
std::vector<int> Positive(const VectorXd& w) {
  const double wmax = w.size() ? w.maxCoeff() : 0.0;
  std::vector<int> pos;
  for (int a = 0; a < w.size(); ++a)
    if (w(a) > 0 && w(a) >= 1e-12 * wmax && std::isfinite(static_cast<float>(std::log(w(a))))) pos.push_back(a);
  return pos;
}

// Refill (issue 31): NNLS gives 30-45% of the picked keys weight 0, which
// left their slots unused (am held 5.8% of the cache at r = 0.1). Each round
// keeps the keys with positive weight, gives the freed slots to the next
// keys of the RMS-attention ranking not tried yet, and refits the weights
// (NNLS, warm-started from the previous ones), until t keys carry weight or
// the rounds or the candidates run out. Keys still missing after the rounds
// are the next-ranked ones with their own cardinality (`plain`, counted), so
// a head holds exactly min(t, distinct keys) entries.
void Refill(AmColumns& A, const VectorXd& mass, const std::vector<int>& ranking, int t, int rounds,
            MatrixXd gram, std::vector<int>* sel, VectorXd* w, std::vector<int>* plain, int* refilled, int64_t* nnls_ns) {
  const int nu = static_cast<int>(ranking.size());
  std::vector<char> tried(nu, 0), picked(nu, 0);
  for (int u : *sel) tried[u] = picked[u] = 1;
  size_t next = 0;
  auto next_untried = [&]() {
    while (next < ranking.size() && tried[ranking[next]]) ++next;
    return next < ranking.size() ? ranking[next] : -1;
  };
  // The Gram matrix of the current picks: a round reuses the block of the
  // keys it keeps and computes only the added keys' columns (M k added
  // products, not M k^2); the right-hand side A^T m likewise, per key offered.
  VectorXd Am = VectorXd::Constant(nu, std::numeric_limits<double>::quiet_NaN());  // [nu], filled when offered
  auto am = [&](int u) {
    if (std::isnan(Am(u))) Am(u) = A.A(u).cast<double>().dot(mass);
    return Am(u);
  };
  MatrixXd P = std::move(gram);  // of the current picks, when SelectAndWeigh formed it
  for (int r = 0; r < rounds; ++r) {
    const std::vector<int> pos = Positive(*w);
    if (static_cast<int>(pos.size()) >= t || next_untried() < 0) break;
    std::vector<int> keep;
    std::vector<double> x;
    for (int a : pos) keep.push_back((*sel)[a]), x.push_back((*w)(a));
    for (int u; static_cast<int>(keep.size()) < t && (u = next_untried()) >= 0;) tried[u] = 1, keep.push_back(u), x.push_back(0);
    const int k = static_cast<int>(keep.size()), kp = static_cast<int>(pos.size());
    MatrixXd As(A.rows(), k);  // [M, k]
    for (int a = 0; a < k; ++a) As.col(a) = A.A(keep[a]).cast<double>();
    MatrixXd Pn(k, k);
    if (P.size() == 0) {
      Pn = Gram(As);
    } else {
      for (int i = 0; i < kp; ++i)
        for (int j = 0; j < kp; ++j) Pn(i, j) = P(pos[i], pos[j]);
      Pn.rightCols(k - kp).noalias() = As.transpose() * As.rightCols(k - kp);
      Pn.bottomLeftCorner(k - kp, kp) = Pn.topRightCorner(kp, k - kp).transpose();
    }
    VectorXd rhs(k);
    for (int a = 0; a < k; ++a) rhs(a) = am(keep[a]);
    const VectorXd x0 = Eigen::Map<const VectorXd>(x.data(), x.size());
    *w = TimedNnls(Pn, rhs, x0, nnls_ns);
    *sel = std::move(keep);
    P = std::move(Pn);
  }
  const std::vector<int> pos = Positive(*w);
  int count = static_cast<int>(pos.size());
  for (int a : pos) *refilled += picked[(*sel)[a]] ? 0 : 1;
  for (int u; count < t && (u = next_untried()) >= 0; ++count) tried[u] = 1, plain->push_back(u);
}

// A kept entry: its index in the block, its distinct key, its b = log w.
struct Kept {
  int entry, u;
  double b;
  bool operator<(const Kept& o) const { return entry < o.entry; }
};

// Values of the kept entries by ridge least squares: softmax over the kept
// keys with their fitted b, X [M, k] (the scores of cols, less the rows'
// shift), against the full outputs Y [M, d].
void FitValues(AmColumns& cols, const VectorXd& shift, const MatrixXd& Y, const std::vector<Kept>& kept, double ridge,
               const VectorXd* row_scale, AmBlockFit* f) {
  MatrixXd X(cols.rows(), kept.size());  // [M, k]
  for (size_t a = 0; a < kept.size(); ++a) X.col(a) = (cols.S(kept[a].u).cast<double>() - shift).array() + kept[a].b;
  numerics::ExpShiftRowsInPlace(&X, X.rowwise().maxCoeff());
  X = X.array().colwise() / X.rowwise().sum().array();
  if (row_scale) X = X.array().colwise() * row_scale->array();  // a sampled row's weight (Y comes scaled)
  const MatrixXd Vt = numerics::RidgeLstsq(X, Y, ridge);  // [k, d]
  const bool finite = Vt.allFinite();  // else the original values stay
  for (size_t a = 0; a < kept.size(); ++a) {
    f->keep.push_back(kept[a].entry);
    f->logw.push_back(static_cast<float>(kept[a].b));
    if (finite) {
      std::vector<float> v(Vt.cols());
      for (int k = 0; k < Vt.cols(); ++k) v[k] = static_cast<float>(Vt(a, k));
      f->values.push_back(std::move(v));
    }
  }
}

// The kept entries with their fitted b, their values left as they are.
void KeepOnly(const std::vector<Kept>& kept, AmBlockFit* f) {
  for (const Kept& k : kept) f->keep.push_back(k.entry), f->logw.push_back(static_cast<float>(k.b));
}

// The rows the weights and values are fitted on when --am-fit-rows samples
// them (numerics/row_sample.h): each row scaled by the square root of its
// weight, so the sampled sums of squares estimate the full ones.
struct FitRows {
  std::vector<int> rows;  // [s] of the reference queries
  VectorXd mass;          // [s] scaled
  VectorXd shift;         // [s]
  MatrixXd Y;             // [s, d] scaled
  VectorXd scale;         // [s] sqrt(weight)
};

// A sample of c.fit_rows rows of the problem, by the leverage of the rows of
// A over the first 2t candidates of the ranking (those the fit can pick),
// sketched to 32 columns, mixed with a uniform tenth; or uniform. Nothing
// when every row is to be fitted.
std::optional<FitRows> SampleFitRows(AmColumns& A, const AmScores& sc, const std::vector<int>& ranking, int t,
                                     const AmConfig& c) {
  const int M = A.rows();
  if (c.fit_rows <= 0 || c.fit_rows >= M) return std::nullopt;
  const uint64_t seed = io::Mix64(c.seed ^ io::Mix64(static_cast<uint64_t>(M) * 2654435761ull + ranking.size()));
  VectorXd lev = VectorXd::Ones(M);
  if (!c.fit_uniform) {
    const int cols = std::min<int>(static_cast<int>(ranking.size()), 2 * t);
    MatrixXd L(M, cols);
    for (int a = 0; a < cols; ++a) L.col(a) = A.A(ranking[a]).cast<double>();
    lev = numerics::RowLeverage(L, 32, seed);
  }
  const numerics::RowSample r = numerics::SampleRows(lev, c.fit_rows, c.fit_uniform ? 1.0 : 0.1, seed);
  const int s = static_cast<int>(r.rows.size());
  FitRows f{r.rows, VectorXd(s), VectorXd(s), MatrixXd(s, sc.Y.cols()), VectorXd(s)};
  for (int a = 0; a < s; ++a) {
    const int i = r.rows[a];
    f.scale(a) = std::sqrt(r.weight(a));
    f.mass(a) = f.scale(a) * sc.mass(i);
    f.shift(a) = sc.shift(i);
    f.Y.row(a) = f.scale(a) * sc.Y.row(i);
  }
  return f;
}

// The row of [a, b) with the largest norm (the first of equals): the query
// head whose scores are the sharpest of a token's.
size_t LargestRow(const std::vector<const float*>& rows, size_t a, size_t b, int d) {
  size_t best = a;
  double best_n2 = -1;
  for (size_t r = a; r < b; ++r) {
    double n2 = 0;
    for (int k = 0; k < d; ++k) n2 += static_cast<double>(rows[r][k]) * rows[r][k];
    if (n2 > best_n2) best_n2 = n2, best = r;
  }
  return best;
}

// The rows of d floats in v, appended to rows as pointers.
void AppendRows(const std::vector<float>& v, int d, std::vector<const float*>* rows) {
  for (size_t i = 0; i + d <= v.size(); i += d) rows->push_back(v.data() + i);
}

// Stratified: one row taken from each of cap equal runs of rows (a run at
// least a token's G rows as cap <= rows / G), the largest with pick 1, else
// drawn; fewer rows than cap stay as they are. In order: rows[i] is read
// before written.
void PickPerRun(std::vector<const float*>* rows, size_t cap, int pick, int d, uint64_t* s) {
  auto& r = *rows;
  if (r.size() <= cap) return;
  const size_t n = r.size();
  for (size_t i = 0; i < cap; ++i) {
    const size_t a = i * n / cap, b = (i + 1) * n / cap;  // the run [a, b), b > a as n > cap
    *s = io::Mix64(*s);
    r[i] = r[pick == 1 ? LargestRow(r, a, b, d) : a + *s % (b - a)];
  }
  r.resize(cap);
}

// prefill_mix F: the prefill's rows picked as the repeat's are, from
// round(F m) equal runs of them (m the repeat's rows taken; fewer when the
// prefill has fewer tokens), appended: M = (1 + F) m. With top_up (the
// prompt one block) and fewer than min_queries repeat rows, the runs are at
// least min_queries - m (at most m).
void MixPrefillRows(const HeadStats& st, size_t G, const AmConfig& c, bool top_up, int d, uint64_t* s,
                    std::vector<const float*>* rows) {
  const size_t m = rows->size();
  size_t want = static_cast<size_t>(std::lround(c.prefill_mix * static_cast<double>(m)));
  const size_t q = static_cast<size_t>(std::max(0, c.min_queries));
  if (top_up && m < q) want = std::max(want, std::min(m, q - m));
  if (want == 0) return;  // before gathering the prefill's rows: a long one-block prompt adds none
  std::vector<const float*> pre;
  AppendRows(st.q_rot, d, &pre);
  if (pre.empty()) return;
  PickPerRun(&pre, std::min(want, std::max<size_t>(1, pre.size() / G)), c.pick, d, s);
  rows->insert(rows->end(), pre.begin(), pre.end());
}

}  // namespace

// Reference queries: am_fit.h.
MatrixXf AmReferenceQueries(const PolicyContext& ctx, const AmConfig& c) {
  const int d = ctx.store->head_dim();
  std::vector<const float*> rows;
  // repeat_only with a repeat pass: its rows alone, at most one a repeated
  // token (a token's G query heads are one run of rows).
  const bool per_token = c.repeat_only && ctx.stats && ctx.stats->q_repeat.size() >= static_cast<size_t>(d);
  if (ctx.stats) {
    if (!per_token) AppendRows(ctx.stats->q_rot, d, &rows);
    if (c.repeat) AppendRows(ctx.stats->q_repeat, d, &rows);
  }
  std::vector<float> keys;
  if (rows.empty()) {
    keys.resize(static_cast<size_t>(ctx.store->size()) * d);
    for (int i = 0; i < ctx.store->size(); ++i) ctx.store->ReadKey(i, keys.data() + static_cast<size_t>(i) * d);
    for (int i = 0; i < ctx.store->size(); ++i) rows.push_back(keys.data() + static_cast<size_t>(i) * d);
  }
  uint64_t s = io::Mix64(c.seed ^ io::Mix64(ctx.layer * 1315423911ull + ctx.head) ^ io::Mix64(rows.size()));
  const size_t G = ctx.all_stats ? static_cast<size_t>(std::max(1, ctx.all_stats->group())) : 1;
  const size_t cap = per_token ? std::min<size_t>(c.max_queries, std::max<size_t>(1, rows.size() / G))
                               : static_cast<size_t>(c.max_queries);
  if (per_token) {
    PickPerRun(&rows, cap, c.pick, d, &s);
    // The top-up reads the prompt compacted as one block (one-shot, or a
    // single chunk): a chunk of a longer prompt answered worse with it
    // (docs/am.md step 1).
    const bool top_up = ctx.chunk_from < 0 && c.min_queries > 0;
    if (c.prefill_mix > 0 || top_up) MixPrefillRows(*ctx.stats, G, c, top_up, d, &s, &rows);
  } else if (rows.size() > cap) {  // partial Fisher-Yates, seeded per head
    for (size_t i = 0; i < cap; ++i) {
      s = io::Mix64(s);
      const size_t j = i + s % (rows.size() - i);
      std::swap(rows[i], rows[j]);
    }
    rows.resize(cap);
  }
  if (per_token && c.prefill_tail > 0) {  // the prefill's rows of the last tokens (per_token: stats held)
    const size_t all = ctx.stats->q_rot.size() / d, tail = std::min<size_t>(all, c.prefill_tail * G);
    for (size_t i = all - tail; i < all; ++i) rows.push_back(ctx.stats->q_rot.data() + i * d);
  }
  MatrixXf Q(rows.size(), d);  // [M, d]
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  // Blocks of rows, a column at a time: the column-major writes stay
  // sequential (row by row they strode M floats each, 2% of a 135M-shape
  // prefill's time at 4,096 queries).
  constexpr size_t kBlock = 128;
  for (size_t r0 = 0; r0 < rows.size(); r0 += kBlock) {
    const size_t r1 = std::min(rows.size(), r0 + kBlock);
    for (int k = 0; k < d; ++k)
      for (size_t r = r0; r < r1; ++r) Q(static_cast<Eigen::Index>(r), k) = static_cast<float>(rows[r][k] * scale);
  }
  return Q;
}

// The [M, n]-sized work (the scores, their exponentials, the full outputs,
// the ranking) runs in float, as the cache's keys, values and queries are:
// the scores' float rounding (relative ~1e-7 of an exponent of order 10)
// already perturbs each weight by ~1e-6, more than storing the weight in
// float does. It runs over blocks of queries (am_scores.h) and keeps one
// [M, n] matrix, the scores: the columns of the keys the fit tries are
// exponentiated from them when first read. Sums over the queries (masses,
// Gram matrices, right-hand sides) and everything after them are double.
AmBlockFit AmFitBlock(const MatrixXf& Q, const MatrixXf& K, const MatrixXf& V, const VectorXd& b0, int t, const AmConfig& c,
                      const std::vector<double>* rank_scores) {
  int64_t lap_ns = SteadyNowNs();
  auto lap_us = [&lap_ns] {  // microseconds since the last lap (the fit's time split)
    const int64_t now = SteadyNowNs(), us = (now - lap_ns) / 1000;
    lap_ns = now;
    return us;
  };
  AmBlockFit f;
  const int n = static_cast<int>(K.rows());
  std::vector<int> rep, of;
  UniqueKeys(K, &rep, &of);
  const int nu = static_cast<int>(rep.size());
  const int M = static_cast<int>(Q.rows());
  const size_t s_floats = static_cast<size_t>(M) * n;
  kernels::HugeScratch own;  // a block of its own when the caller keeps none
  const kernels::HugeScratch::Lease s_buf = (c.scratch ? c.scratch : &own)->Take(s_floats);
  Eigen::Map<MatrixXf> S(s_buf.get(), M, n);  // [M, n] the scores q.k
  const AmScores sc = AmScoresPass(Q, K, V, b0, of, nu, rank_scores == nullptr, S, c.bf16, c.pool);
  const std::vector<int> ranking = rank_scores ? RankByScores(*rank_scores, of, nu) : RankByRms(sc.rms);
  AmColumns all(S, rep, sc.shift_f, Eigen::VectorXf());  // every reference query's columns
  f.scores_us = lap_us();
  const std::optional<FitRows> rows = SampleFitRows(all, sc, ranking, t, c);
  MatrixXf Ss;  // the sampled rows' scores
  std::optional<AmColumns> sampled;  // their columns, scaled
  if (rows) {
    Ss.resize(rows->rows.size(), n);
    for (size_t a = 0; a < rows->rows.size(); ++a) Ss.row(a) = S.row(rows->rows[a]);
    sampled.emplace(Ss, rep, rows->shift.cast<float>(), rows->scale.cast<float>());
  }
  AmColumns& cols = sampled ? *sampled : all;
  const VectorXd& mass_f = rows ? rows->mass : sc.mass;
  VectorXd card = VectorXd::Zero(nu);  // the tokens each distinct key stands for
  for (int i = 0; i < n; ++i) card(of[i]) += std::exp(b0(i));
  std::vector<int> sel;
  VectorXd w;
  MatrixXd gram;
  SelectAndWeigh(cols, mass_f, ranking, t, c, c.weight_floor || !c.fit_weights ? &card : nullptr, &sel, &w, &gram, &f.nnls_ns);
  std::vector<int> plain;  // refill's keys with their own cardinality
  const std::vector<int> first = sel;
  if (c.refill && c.fit_weights && !c.weight_floor)  // with the floor no pick is ever freed
    Refill(cols, mass_f, ranking, t, c.refill_rounds, std::move(gram), &sel, &w, &plain, &f.refilled, &f.nnls_ns);
  auto own_b = [&](int u) {  // log of the tokens a distinct key stands for
    const double lc = std::log(card(u));
    return std::isfinite(static_cast<float>(lc)) ? lc : 0.0;
  };
  std::vector<Kept> kept;
  for (int a : Positive(w)) kept.push_back({rep[sel[a]], sel[a], std::log(w(a))});
  if (kept.empty()) {  // all weights zero (no query has mass): the picked keys with their own cardinality
    for (int u : first) kept.push_back({rep[u], u, own_b(u)});
  } else {
    for (int u : plain) kept.push_back({rep[u], u, own_b(u)});
    f.filled_plain = static_cast<int>(plain.size());
    // Slots the head leaves empty: picks NNLS gave weight 0 that no refill
    // replaced, the refill's last picks included when it ran out of keys.
    f.dropped = std::max(0, std::min(t, nu) - static_cast<int>(kept.size()));
  }
  std::sort(kept.begin(), kept.end());
  f.select_us = lap_us();
  if (!c.fit_values) KeepOnly(kept, &f);
  else if (rows) FitValues(cols, rows->shift, rows->Y, kept, c.ridge, &rows->scale, &f);
  else FitValues(cols, sc.shift, sc.Y, kept, c.ridge, nullptr, &f);
  f.values_us = lap_us();
  return f;
}

void AmFitCounters::Add(const AmBlockFit& f) {
  dropped_ += f.dropped;
  refilled_ += f.refilled;
  filled_plain_ += f.filled_plain;
  scores_us_ += f.scores_us, select_us_ += f.select_us, values_us_ += f.values_us;
  nnls_us_ += f.nnls_ns / 1000;
}

std::vector<std::pair<std::string, int64_t>> AmFitCounters::List() const {
  return {{"am-dropped", dropped_.load()},         {"am-refilled", refilled_.load()},
          {"am-filled-plain", filled_plain_.load()}, {"am-scores-us", scores_us_.load()},
          {"am-select-us", select_us_.load()},       {"am-nnls-us", nnls_us_.load()},
          {"am-values-us", values_us_.load()}};
}

namespace {

// Entries [i0, i1) of a head: keys, values, log-weights.
void ReadBlock(const HeadStore& s, int i0, int i1, MatrixXf* K, MatrixXf* V, VectorXd* b0) {
  const int d = s.head_dim();
  K->resize(i1 - i0, d), V->resize(i1 - i0, d), b0->resize(i1 - i0);  // [nc, d]
  std::vector<float> row(d);
  for (int i = i0; i < i1; ++i) {
    s.ReadKey(i, row.data());
    for (int k = 0; k < d; ++k) (*K)(i - i0, k) = row[k];
    s.ReadValue(i, row.data());
    for (int k = 0; k < d; ++k) (*V)(i - i0, k) = row[k];
    (*b0)(i - i0) = s.logw(i);
  }
}

// A block's fit into a plan, the block starting at entry `base`.
void AppendFit(const AmBlockFit& f, int base, Plan* plan) {
  for (size_t a = 0; a < f.keep.size(); ++a) {
    const int i = base + f.keep[a];
    plan->keep.push_back(i);
    plan->set_logw.push_back({i, f.logw[a]});
    if (!f.values.empty()) plan->set_value.push_back({i, f.values[a]});
  }
}

}  // namespace

namespace {

// The first entry of the head's trailing run at positions >= pos.
int TrailingFrom(const HeadStore& s, int64_t pos) {
  int i = s.size();
  while (i > 0 && s.pos(i - 1) >= pos) --i;
  return i;
}

}  // namespace

int AmChunkStart(const PolicyContext& ctx) { return ctx.chunk_from < 0 ? 0 : TrailingFrom(*ctx.store, ctx.chunk_from); }

int AmHoldStart(const PolicyContext& ctx) {
  return ctx.hold_from < 0 ? ctx.store->size() : TrailingFrom(*ctx.store, ctx.hold_from);
}

void AmCompactBlock(const HeadStore& s, int i0, int i1, const MatrixXf& Q, int t, const AmConfig& c,
                    const std::vector<double>* rank_scores, AmFitCounters* counters, Plan* plan) {
  MatrixXf K, V;
  VectorXd b0;
  ReadBlock(s, i0, i1, &K, &V, &b0);
  const AmBlockFit f = AmFitBlock(Q, K, V, b0, t, c, rank_scores);
  counters->Add(f);
  AppendFit(f, i0, plan);
}

}  // namespace kvtrim::kv
