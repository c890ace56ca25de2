// `am`: Attention Matching compaction (METHODS.md section 4, seed 002).
// Per (layer, KV head), prefill-time: from reference queries Q_ref (the
// context's own prefill queries, and with `--am-queries 1` also those of a
// "Repeat the previous context." pass the engine runs), pick t = budget of
// the original keys (highest RMS attention, or OMP on the mass target), fit
// log-weights b = log w by NNLS so the kept keys reproduce every query's
// attention mass, then refit their values by ridge least squares so they
// reproduce the attention outputs. Kept entries keep their rotated keys and
// positions; the plan sets their b and values. The solvers live in
// kv/numerics (NNLS, ridge least squares, OMP).
//
// Conventions (ours, documented in docs/am.md): reference queries see every
// key of the block (they stand for future queries, which do); each
// (position, group head) query is one row; identical keys are merged before
// selection (one candidate, its cardinality in the mass target).
#include <algorithm>
#include <atomic>
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
#include "kv/policies/policies.h"
#include "kvtrim/clock.h"

namespace kvtrim::kv {

namespace {

using Eigen::MatrixXd;
using Eigen::MatrixXf;
using Eigen::VectorXd;

}  // namespace

struct AmConfig {
  bool repeat = true;        // reference queries also from the repeat pass
  bool repeat_past_ctx = true;
  bool onpolicy = false;     // repeat pass re-run per layer over the compacted lower layers
  bool omp = false;          // key selection: OMP (else highest attention)
  int omp_step = 4;
  int max_queries = 4096;
  int chunk = 4096;
  double ridge = 1e-6;
  uint64_t seed = 0;
  bool refill = true;        // slots NNLS frees go to the next-best keys (Refill)
  int refill_rounds = 8;
  int fit_rows = 0;          // rows the weights and values are fitted on (0: every reference query)
  bool fit_uniform = false;  // those rows a uniform sample (else by leverage)
};

namespace {

uint64_t Mix(uint64_t z) {  // splitmix64 finalizer
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Reference queries [M, d] (float, as the cache holds them), scaled by
// 1/sqrt(d): every row of the prefill
// and repeat queries, a seeded sample of max_queries when there are more.
// Without any (no statistics), the keys themselves probe the head.
MatrixXf ReferenceQueries(const PolicyContext& ctx, const AmConfig& c) {
  const int d = ctx.store->head_dim();
  std::vector<const float*> rows;
  if (ctx.stats) {
    for (size_t i = 0; i + d <= ctx.stats->q_rot.size(); i += d) rows.push_back(ctx.stats->q_rot.data() + i);
    if (c.repeat)
      for (size_t i = 0; i + d <= ctx.stats->q_repeat.size(); i += d) rows.push_back(ctx.stats->q_repeat.data() + i);
  }
  std::vector<float> keys;
  if (rows.empty()) {
    keys.resize(static_cast<size_t>(ctx.store->size()) * d);
    for (int i = 0; i < ctx.store->size(); ++i) ctx.store->ReadKey(i, keys.data() + static_cast<size_t>(i) * d);
    for (int i = 0; i < ctx.store->size(); ++i) rows.push_back(keys.data() + static_cast<size_t>(i) * d);
  }
  if (static_cast<int>(rows.size()) > c.max_queries) {  // partial Fisher-Yates, seeded per head
    uint64_t s = Mix(c.seed ^ Mix(ctx.layer * 1315423911ull + ctx.head) ^ Mix(rows.size()));
    for (int i = 0; i < c.max_queries; ++i) {
      s = Mix(s);
      const size_t j = i + s % (rows.size() - i);
      std::swap(rows[i], rows[j]);
    }
    rows.resize(c.max_queries);
  }
  MatrixXf Q(rows.size(), d);  // [M, d]
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (size_t r = 0; r < rows.size(); ++r)
    for (int k = 0; k < d; ++k) Q(r, k) = static_cast<float>(rows[r][k] * scale);
  return Q;
}

// One block of entries [c0, c1) compacted to at most t entries.
struct BlockFit {
  std::vector<int> keep;          // original indices, increasing
  std::vector<float> logw;        // [keep]
  std::vector<std::vector<float>> values;  // [keep][d] (empty: originals stay)
  int dropped = 0;                // picked keys NNLS gave zero weight (and no refill took their slot)
  // Where the fit's time went (microseconds, this block): the scores, the
  // full outputs and the distinct candidates; selection with NNLS and
  // refill; the values' least squares.
  int64_t scores_us = 0, select_us = 0, values_us = 0;
  int64_t nnls_ns = 0;            // the NNLS solves within select_us
  int refilled = 0;               // keys the refill rounds added that kept a positive weight
  int filled_plain = 0;           // keys added after the rounds with their own cardinality
};

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

// Distinct keys by root-mean-square attention weight over the queries,
// highest first (the weight of a distinct key sums over its copies; ties
// keep the earlier key). The top t are highest-attn's pick; the rest is the
// order in which Refill offers keys.
std::vector<int> AttentionRanking(const MatrixXf& Afull, const VectorXd& mass, const std::vector<int>& of, int nu) {
  const Eigen::VectorXf inv = mass.cwiseInverse().cast<float>();  // [M]
  Eigen::VectorXf score;  // [nu] monotone in the RMS
  if (nu == Afull.cols()) {  // every key distinct (of[i] == i): no [M, nu] copy
    score = (Afull.array().colwise() * inv.array()).square().colwise().sum().transpose();
  } else {
    MatrixXf W = MatrixXf::Zero(Afull.rows(), nu);  // [M, nu] attention weight per distinct key
    for (int i = 0; i < Afull.cols(); ++i) W.col(of[i]) += Afull.col(i).cwiseProduct(inv);
    score = W.colwise().squaredNorm().transpose();
  }
  std::vector<int> idx(nu);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return score(a) > score(b); });
  return idx;
}

// As^T As [k, k] of the picked columns As [M, k]: one triangle by a rank
// update, mirrored.
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
void SelectAndWeigh(const MatrixXf& A, const VectorXd& mass, const std::vector<int>& ranking, int t, const AmConfig& c,
                    std::vector<int>* sel, VectorXd* w, MatrixXd* gram, int64_t* nnls_ns) {
  if (c.omp) {
    numerics::OmpResult r = numerics::OmpNnls(A.cast<double>(), mass, t, c.omp_step);
    *sel = r.support;
    *w = r.w;
  }
  if (sel->empty()) {  // highest attention (or OMP found nothing to pick: no query has mass)
    sel->assign(ranking.begin(), ranking.begin() + std::min<size_t>(t, ranking.size()));
    MatrixXd As(A.rows(), sel->size());  // [M, t]
    for (size_t a = 0; a < sel->size(); ++a) As.col(a) = A.col((*sel)[a]).cast<double>();
    MatrixXd P = Gram(As);  // [t, t]
    const VectorXd rhs = As.transpose() * mass;
    // Warm start from the positive part of the unconstrained fit: most
    // weights are positive, so Lawson-Hanson needs a few solves, not t.
    const VectorXd x0 = P.completeOrthogonalDecomposition().solve(rhs).cwiseMax(0.0);
    *w = TimedNnls(P, rhs, x0, nnls_ns);
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
void Refill(const MatrixXf& A, const VectorXd& mass, const std::vector<int>& ranking, int t, int rounds,
            MatrixXd gram, std::vector<int>* sel, VectorXd* w, std::vector<int>* plain, int* refilled, int64_t* nnls_ns) {
  const int nu = static_cast<int>(A.cols());
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
    if (std::isnan(Am(u))) Am(u) = A.col(u).cast<double>().dot(mass);
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
    for (int a = 0; a < k; ++a) As.col(a) = A.col(keep[a]).cast<double>();
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

// Values of the kept entries by ridge least squares: softmax over the kept
// keys with their fitted b, X [M, k], against the full outputs Y [M, d].
void FitValues(const MatrixXf& S, const VectorXd& shift, const MatrixXd& Y, const std::vector<std::pair<int, double>>& kept,
               double ridge, const VectorXd* row_scale, BlockFit* f) {
  MatrixXd X(S.rows(), kept.size());  // [M, k]
  for (size_t a = 0; a < kept.size(); ++a)
    X.col(a) = (S.col(kept[a].first).cast<double>() - shift).array() + kept[a].second;
  numerics::ExpShiftRowsInPlace(&X, X.rowwise().maxCoeff());
  X = X.array().colwise() / X.rowwise().sum().array();
  if (row_scale) X = X.array().colwise() * row_scale->array();  // a sampled row's weight (Y comes scaled)
  const MatrixXd Vt = numerics::RidgeLstsq(X, Y, ridge);  // [k, d]
  const bool finite = Vt.allFinite();  // else the original values stay
  for (size_t a = 0; a < kept.size(); ++a) {
    f->keep.push_back(kept[a].first);
    f->logw.push_back(static_cast<float>(kept[a].second));
    if (finite) {
      std::vector<float> v(Vt.cols());
      for (int k = 0; k < Vt.cols(); ++k) v[k] = static_cast<float>(Vt(a, k));
      f->values.push_back(std::move(v));
    }
  }
}

// The rows the weights and values are fitted on when --am-fit-rows samples
// them (numerics/row_sample.h): each row scaled by the square root of its
// weight, so the sampled sums of squares estimate the full ones.
struct FitRows {
  MatrixXf A;      // [s, nu]
  VectorXd mass;   // [s]
  MatrixXf S;      // [s, n] the rows' scores
  VectorXd shift;  // [s]
  MatrixXd Y;      // [s, d]
  VectorXd scale;  // [s] sqrt(weight)
};

// A sample of c.fit_rows rows of the problem, by the leverage of A's rows
// over the first 2t candidates of the ranking (those the fit can pick),
// sketched to 32 columns, mixed with a uniform tenth; or uniform. Nothing
// when every row is to be fitted.
std::optional<FitRows> SampleFitRows(const MatrixXf& A, const VectorXd& mass, const MatrixXf& S, const VectorXd& shift,
                                     const MatrixXd& Y, const std::vector<int>& ranking, int t, const AmConfig& c) {
  const int M = static_cast<int>(A.rows());
  if (c.fit_rows <= 0 || c.fit_rows >= M) return std::nullopt;
  const uint64_t seed = Mix(c.seed ^ Mix(static_cast<uint64_t>(M) * 2654435761ull + A.cols()));
  VectorXd lev = VectorXd::Ones(M);
  if (!c.fit_uniform) {
    const int cols = std::min<int>(static_cast<int>(ranking.size()), 2 * t);
    MatrixXd L(M, cols);
    for (int a = 0; a < cols; ++a) L.col(a) = A.col(ranking[a]).cast<double>();
    lev = numerics::RowLeverage(L, 32, seed);
  }
  const numerics::RowSample r = numerics::SampleRows(lev, c.fit_rows, c.fit_uniform ? 1.0 : 0.1, seed);
  const int s = static_cast<int>(r.rows.size());
  FitRows f{MatrixXf(s, A.cols()), VectorXd(s), MatrixXf(s, S.cols()), VectorXd(s), MatrixXd(s, Y.cols()), VectorXd(s)};
  for (int a = 0; a < s; ++a) {
    const int i = r.rows[a];
    f.scale(a) = std::sqrt(r.weight(a));
    f.A.row(a) = static_cast<float>(f.scale(a)) * A.row(i);
    f.mass(a) = f.scale(a) * mass(i);
    f.S.row(a) = S.row(i);
    f.shift(a) = shift(i);
    f.Y.row(a) = f.scale(a) * Y.row(i);
  }
  return f;
}

// The full outputs Y = A V / m [M, d].
MatrixXd FullOutputs(const MatrixXf& Afull, const MatrixXf& V, const VectorXd& safe) {
  const MatrixXf Yf = Afull * V;  // [M, d]
  return Yf.cast<double>().array().colwise() / safe.array();
}

// The [M, n]-sized work (the scores, their exponentials, the full outputs,
// the ranking) runs in float, as the cache's keys, values and queries are:
// the scores' float rounding (relative ~1e-7 of an exponent of order 10)
// already perturbs each weight by ~1e-6, more than storing the weight in
// float does. Sums over the queries (masses, Gram matrices, right-hand
// sides) and everything after them are double.
BlockFit FitBlock(const MatrixXf& Q, const MatrixXf& K, const MatrixXf& V, const VectorXd& b0, int t, const AmConfig& c) {
  int64_t lap_ns = SteadyNowNs();
  auto lap_us = [&lap_ns] {  // microseconds since the last lap (the fit's time split)
    const int64_t now = SteadyNowNs(), us = (now - lap_ns) / 1000;
    lap_ns = now;
    return us;
  };
  BlockFit f;
  const int n = static_cast<int>(K.rows());
  // The two [M, n]-sized matrices of a block: the scores S = q.k/sqrt(d) in
  // float (as computed) and Afull = exp(S + b0 - s_q) in double.
  const MatrixXf S = Q * K.transpose();  // [M, n]
  const bool plain_b = (b0.array() == 0.0).all();  // fresh entries (a prefill's): S + b0 is S
  MatrixXf Afull = S;  // [M, n] S, then S + b0, then its exp
  // s_q: the largest score with or without the entries' own b, so neither
  // the target nor a candidate column can overflow (entries already
  // compacted may carry any b).
  Eigen::VectorXf shift_f = Afull.rowwise().maxCoeff();  // [M]
  if (!plain_b) {
    Afull.rowwise() += b0.cast<float>().transpose();
    shift_f = shift_f.cwiseMax(Afull.rowwise().maxCoeff());
  }
  numerics::ExpShiftRowsInPlace(&Afull, shift_f);
  const VectorXd shift = shift_f.cast<double>();
  VectorXd mass = VectorXd::Zero(Q.rows());  // [M] m(q), 0 only if every b underflows
  for (int j = 0; j < n; ++j) mass += Afull.col(j).cast<double>();
  const VectorXd safe = mass.cwiseMax(std::numeric_limits<double>::min());
  const MatrixXd Y = FullOutputs(Afull, V, safe);  // [M, d] full outputs (0 for a massless query)
  std::vector<int> rep, of;
  UniqueKeys(K, &rep, &of);
  const int nu = static_cast<int>(rep.size());
  // A_qj = exp(q k_j/sqrt d - s_q), one column per distinct key [M, nu]: the
  // columns of Afull themselves when every key is distinct and b0 = 0.
  MatrixXf A_own;
  if (!plain_b || nu != n) {
    A_own.resize(Q.rows(), nu);
    for (int u = 0; u < nu; ++u) A_own.col(u) = S.col(rep[u]);
    numerics::ExpShiftRowsInPlace(&A_own, shift_f);
  }
  const MatrixXf& A = A_own.size() ? A_own : Afull;
  f.scores_us = lap_us();
  const std::vector<int> ranking = AttentionRanking(Afull, safe, of, nu);
  const std::optional<FitRows> rows = SampleFitRows(A, mass, S, shift, Y, ranking, t, c);
  const MatrixXf& Af = rows ? rows->A : A;
  const VectorXd& mass_f = rows ? rows->mass : mass;
  std::vector<int> sel;
  VectorXd w;
  MatrixXd gram;
  SelectAndWeigh(Af, mass_f, ranking, t, c, &sel, &w, &gram, &f.nnls_ns);
  std::vector<int> plain;  // refill's keys with their own cardinality
  const std::vector<int> first = sel;
  if (c.refill) Refill(Af, mass_f, ranking, t, c.refill_rounds, std::move(gram), &sel, &w, &plain, &f.refilled, &f.nnls_ns);
  auto own_b = [&](int u) {  // log of the tokens a distinct key stands for
    double card = 0;
    for (int i = 0; i < n; ++i) card += of[i] == u ? std::exp(b0(i)) : 0.0;
    const double lc = std::log(card);
    return std::isfinite(static_cast<float>(lc)) ? lc : 0.0;
  };
  std::vector<std::pair<int, double>> kept;  // (entry, b = log w)
  for (int a : Positive(w)) kept.push_back({rep[sel[a]], std::log(w(a))});
  for (int u : plain) kept.push_back({rep[u], own_b(u)});
  f.filled_plain = static_cast<int>(plain.size());
  f.dropped = std::max(0, static_cast<int>(std::min<size_t>(t, sel.size() + plain.size())) - static_cast<int>(kept.size()));
  if (kept.empty()) {  // all weights zero: the picked keys with their own cardinality
    for (int u : first) kept.push_back({rep[u], own_b(u)});
    f.dropped = 0;
  }
  std::sort(kept.begin(), kept.end());
  f.select_us = lap_us();
  if (rows) FitValues(rows->S, rows->shift, rows->Y, kept, c.ridge, &rows->scale, &f);
  else FitValues(S, shift, Y, kept, c.ridge, nullptr, &f);
  f.values_us = lap_us();
  return f;
}

}  // namespace

std::vector<std::pair<std::string, int64_t>> AmPolicy::Counters() const {
  return {{"am-dropped", dropped_.load()},         {"am-refilled", refilled_.load()},
          {"am-filled-plain", filled_plain_.load()}, {"am-scores-us", scores_us_.load()},
          {"am-select-us", select_us_.load()},       {"am-nnls-us", nnls_us_.load()},
          {"am-values-us", values_us_.load()}};
}

AmPolicy::AmPolicy(const AmConfig& c) : c_(std::make_unique<AmConfig>(c)) {}
AmPolicy::~AmPolicy() = default;

// Prefill-time, on the prefill's queries and keys and a repeat pass; a
// prompt prefilled in chunks has each chunk compacted to its share of the
// budget with its own reference queries (its prefill queries and its repeat
// pass), the entries of earlier chunks left as they are; not with
// --am-onpolicy. 6-15 prefills per context (docs/results/am.md): left out of
// the default sweep; METHODS.md 4: nonuniform head budgets from the profile
// when it has them.
namespace {

PolicyTraits AmTraits(const Params& p) {
  PolicyTraits t{.decode_time = false, .needs = {.prefill_qk = true}, .compresses_each_chunk = true, .costly = true,
                 .profile_head_budgets = true};
  const bool repeat = p.at("am-queries") >= 0.5, onpolicy = p.at("am-onpolicy") >= 0.5;
  t.reference_pass.repeat = repeat;
  t.reference_pass.past_context = p.at("am-repeat-past-ctx") >= 0.5;
  t.reference_pass.on_policy = repeat && onpolicy;
  t.reference_pass.repeat_chunk = static_cast<int>(p.at("am-pass-chunk"));
  t.stream_blocker = repeat && onpolicy ? "--am-onpolicy re-runs the repeat pass layer by layer over the whole context"
                                        : "";
  return t;
}

}  // namespace

// The entries this call compacts and how many they keep. One-shot: every
// entry, to the head's budget. A prompt prefilled in chunks: the entries of
// the chunk being compressed (positions >= chunk_from, the last ones held),
// to the chunk's share of the budget, ceil(B c1 / N) - ceil(B c0 / N) for the
// chunk [c0, c1) of a prompt ending at N; the entries compacted with the
// chunks before stay as they are (METHODS.md section 4's chunked compaction,
// each chunk with its own reference queries).
struct CompactRange {
  int from = 0, t = 0;
};

CompactRange RangeToCompact(const PolicyContext& ctx) {
  const HeadStore& s = *ctx.store;
  if (ctx.chunk_from < 0 || ctx.budget_len <= 0) return {0, ctx.budget};
  int from = s.size();
  while (from > 0 && s.pos(from - 1) >= ctx.chunk_from) --from;
  auto share = [&](int64_t c) {
    return static_cast<int>(std::ceil(static_cast<double>(ctx.budget) * std::min(c, ctx.budget_len) / ctx.budget_len - 1e-9));
  };
  return {from, std::max(0, share(ctx.logical_len) - share(ctx.chunk_from))};
}

Plan AmPolicy::Compress(const PolicyContext& ctx) {
  const HeadStore& s = *ctx.store;
  const int n = s.size(), d = s.head_dim();
  if (ctx.budget <= 0) return {};
  const CompactRange range = RangeToCompact(ctx);
  const int span = n - range.from;
  Plan plan;
  plan.noop = false;
  for (int i = 0; i < range.from; ++i) plan.keep.push_back(i);  // compacted with earlier chunks
  if (ctx.chunk_from >= 0 && span <= range.t) {  // the chunk fits its share: kept whole
    for (int i = range.from; i < n; ++i) plan.keep.push_back(i);
    return plan;
  }
  const MatrixXf Q = ReferenceQueries(ctx, *c_);
  std::vector<float> row(d);
  for (int c0 = 0; c0 < span; c0 += c_->chunk) {  // blocks compacted independently
    const int c1 = std::min(span, c0 + c_->chunk);
    const int t = static_cast<int>(std::ceil(static_cast<double>(range.t) * c1 / span - 1e-9)) -
                  static_cast<int>(std::ceil(static_cast<double>(range.t) * c0 / span - 1e-9));
    if (t <= 0) continue;
    MatrixXf K(c1 - c0, d), V(c1 - c0, d);  // [nc, d]
    VectorXd b0(c1 - c0);
    for (int i = c0; i < c1; ++i) {
      s.ReadKey(range.from + i, row.data());
      for (int k = 0; k < d; ++k) K(i - c0, k) = row[k];
      s.ReadValue(range.from + i, row.data());
      for (int k = 0; k < d; ++k) V(i - c0, k) = row[k];
      b0(i - c0) = s.logw(range.from + i);
    }
    BlockFit f = FitBlock(Q, K, V, b0, t, *c_);
    dropped_ += f.dropped;
    refilled_ += f.refilled;
    filled_plain_ += f.filled_plain;
    scores_us_ += f.scores_us, select_us_ += f.select_us, values_us_ += f.values_us;
    nnls_us_ += f.nnls_ns / 1000;
    for (size_t a = 0; a < f.keep.size(); ++a) {
      const int i = range.from + c0 + f.keep[a];
      plan.keep.push_back(i);
      plan.set_logw.push_back({i, f.logw[a]});
      if (!f.values.empty()) plan.set_value.push_back({i, f.values[a]});
    }
  }
  return plan;
}

PolicyInfo AmPolicyInfo() {
  return {"am",
          "Attention Matching: keep t keys, fit log-weights (NNLS on the attention mass) and values (least squares on "
          "the outputs) to reference queries; prefill-time.",
          {{"am-queries", 1, "reference queries: 0 context (prefill queries), 1 repeat (also a repeat-the-context pass)", 0, 1},
           {"am-select", 0, "key selection: 0 highest (RMS attention), 1 omp (matching pursuit on the mass)", 0, 1},
           {"am-omp-step", 4, "OMP: keys picked per refit", 1, 1e6},
           {"am-max-queries", 4096, "reference queries per KV head at most (seeded sample above)", 1, 1e7},
           {"am-chunk", 4096, "compact chunks of this many entries independently", 1, 1e9},
           Real({"am-ridge", 1e-6, "value fit ridge, relative to the mean squared column norm", 0, 1}),
           {"am-repeat-past-ctx", 1, "repeat pass: 1 teacher-forces the whole context again, past the model's trained "
                                     "context if need be (RoPE extrapolation); 0 stops at the trained context", 0, 1},
           {"am-pass-chunk", 0, "repeat pass: tokens repeated per rewind of its copy, each chunk reading the held "
                                "entries and its own repeat only (0: the whole range at once)", 0, 1e9},
           {"am-onpolicy", 0, "1: compact layer by layer, the repeat pass re-run over the compacted lower layers", 0, 1},
           {"am-refill", 1, "1: slots NNLS frees (weight 0) go to the next-best keys, weights refit, so a head holds its "
                            "budget; 0: drop them and keep fewer", 0, 1},
           {"am-fit-rows", 0, "rows (reference queries) the weights and values are fitted on, a weighted sample of "
                              "them (0: every one)", 0, 1e9},
           {"am-fit-sample", 0, "how --am-fit-rows samples: 0 leverage (RandNLA, reweighted), 1 uniform", 0, 1},
           {"kv-seed", 0, "sampling seed of the kept sample"}},
          [](const Params& p) {
            AmConfig c;
            c.repeat = p.at("am-queries") >= 0.5;
            c.omp = p.at("am-select") >= 0.5;
            c.omp_step = static_cast<int>(p.at("am-omp-step"));
            c.max_queries = static_cast<int>(p.at("am-max-queries"));
            c.chunk = static_cast<int>(p.at("am-chunk"));
            c.ridge = p.at("am-ridge");
            c.repeat_past_ctx = p.at("am-repeat-past-ctx") >= 0.5;
            c.onpolicy = p.at("am-onpolicy") >= 0.5;
            c.seed = static_cast<uint64_t>(p.at("kv-seed"));
            c.refill = p.at("am-refill") >= 0.5;
            c.fit_rows = static_cast<int>(p.at("am-fit-rows"));
            c.fit_uniform = p.at("am-fit-sample") >= 0.5;
            return std::make_unique<AmPolicy>(c);
          },
          AmTraits};
}

}  // namespace kvtrim::kv
