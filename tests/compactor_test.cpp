// Compactor (src/kv/policies/compactor.cpp): the non-causal chunk scores
// against a brute-force computation, pooling, z-scores and the blend on
// hand-made numbers, protected positions, alignment with the prefill rows,
// degenerate inputs, and --value-norm on SnapKV / H2O.
// GCC 12 reports false "may be used uninitialized" warnings inside Eigen's
// AVX-512 double-precision packets (_mm512_undefined_pd) with -march=native.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "kv/numerics/eigen.h"  // Eigen with its false AVX-512 warnings silenced (also at -O1)

#include "kv/numerics/leverage.h"
#include "kv/policies/compactor.h"
#include "kv/policy.h"
#include "tap_values.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::vector<float> Gauss(size_t n, uint64_t seed, float scale = 1.f) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(g);
  return v;
}

TEST(Compactor, ChunkScoresEqualBruteForce) {
  const int n = 11, G = 2, d = 4, C = 4;
  auto q = Gauss(static_cast<size_t>(n) * G * d, 1), k = Gauss(static_cast<size_t>(n) * d, 2);
  auto got = ChunkAttentionScores(q.data(), k.data(), n, G, d, C);
  std::vector<double> ref(n, 0.0);
  for (int i = 0; i < n; ++i)
    for (int g = 0; g < G; ++g) {
      const int c0 = i / C * C, c1 = std::min(n, c0 + C);
      std::vector<double> e;
      double z = 0;
      for (int j = c0; j < c1; ++j) {  // every key of the chunk, earlier or later
        double dot = 0;
        for (int t = 0; t < d; ++t) dot += q[(i * G + g) * d + t] * k[j * d + t];
        e.push_back(std::exp(dot / 2.0));  // sqrt(d) = 2
        z += e.back();
      }
      for (int j = c0; j < c1; ++j) ref[j] += e[j - c0] / z;
    }
  for (int j = 0; j < n; ++j) EXPECT_NEAR(got[j], ref[j], 1e-5) << j;
  // Each chunk's columns sum to its query rows: c * G.
  EXPECT_NEAR(std::accumulate(got.begin(), got.begin() + 4, 0.0), 8.0, 1e-5);
  EXPECT_NEAR(std::accumulate(got.begin() + 8, got.end(), 0.0), 6.0, 1e-5);
}

TEST(Compactor, PoolZScoreAndBlendOnHandMadeScores) {
  EXPECT_EQ(AvgPool({1, 2, 3, 4, 5}, 3), (std::vector<double>{1, 2, 3, 4, 3}));
  EXPECT_EQ(AvgPool({3, 6}, 1), (std::vector<double>{3, 6}));
  auto z = ZScore({1, 2, 3});
  EXPECT_NEAR(z[0], -std::sqrt(1.5), 1e-12);
  EXPECT_NEAR(z[1], 0, 1e-12);
  EXPECT_NEAR(z[2], std::sqrt(1.5), 1e-12);
  EXPECT_EQ(ZScore({7, 7, 7}), (std::vector<double>{0, 0, 0}));
  // a = [1, 2, 3, 4]: z = [-1.342, -0.447, 0.447, 1.342]; o = [4, 0, 0, 0]:
  // z = [1.732, -0.577, -0.577, -0.577]; s = z(a) + 0.3 z(o).
  auto s = BlendScores({1, 2, 3, 4}, {4, 0, 0, 0}, 0.3);
  const double za = 1 / std::sqrt(1.25), zo = std::sqrt(3.0);
  EXPECT_NEAR(s[0], -3 * za / 2 + 0.3 * zo, 1e-12);
  EXPECT_NEAR(s[1], -za / 2 - 0.3 * zo / 3, 1e-12);
  EXPECT_NEAR(s[3], 3 * za / 2 - 0.3 * zo / 3, 1e-12);
}

// A head of n entries with random rotated keys/values and prefill rows.
struct Fixture {
  int n, d = 4, G = 2;
  HeadStore store;
  HeadStats stats;
  Fixture(int n_, int rows, uint64_t seed, bool zero_v = false, bool equal_k = false) : n(n_), store(4, GgmlType::F32) {
    auto k = Gauss(static_cast<size_t>(n) * d, seed), v = Gauss(static_cast<size_t>(n) * d, seed + 1);
    if (zero_v) std::fill(v.begin(), v.end(), 0.f);
    if (equal_k)
      for (int i = 0; i < n * d; ++i) k[i] = 0.25f * (i % d);
    for (int i = 0; i < n; ++i) store.Append(&k[i * d], &v[i * d], i, 0.f);
    stats.k_pre = equal_k ? std::vector<float>(k.end() - rows * d, k.end()) : Gauss(static_cast<size_t>(rows) * d, seed + 2);
    stats.q_rot = Gauss(static_cast<size_t>(rows) * G * d, seed + 3);
  }
  Plan Run(const Params& p, int budget) {
    auto pol = MakePolicy("compactor", p);
    EXPECT_TRUE(pol.ok());
    PolicyContext ctx;
    ctx.store = &store;
    ctx.stats = &stats;
    ctx.budget = budget;
    ctx.logical_len = n;
    return pol.value()->Compress(ctx);
  }
  // The expected scores, from the scorers and the leverage module.
  std::vector<double> Expected(int from, double lambda, int chunk, int kernel) {
    const int m = n - from;
    std::vector<float> krot(static_cast<size_t>(m) * d);
    for (int j = 0; j < m; ++j) store.ReadKey(from + j, &krot[j * d]);
    numerics::LeverageOptions lo;
    lo.sketch_dim = 64;  // = exact at d = 4
    auto o = numerics::LeverageScores(stats.k_pre.data(), m, d, lo);
    auto a = ChunkAttentionScores(stats.q_rot.data(), krot.data(), m, G, d, chunk);
    auto vn = ValueNorms(store, 1);
    for (int j = 0; j < m; ++j) a[j] *= vn[from + j];
    return BlendScores(AvgPool(a, kernel), o, lambda);
  }
};

std::vector<int> TopIdx(const std::vector<double>& s, int offset, int k) {
  std::vector<int> idx(s.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return s[a] > s[b]; });
  idx.resize(k);
  for (int& i : idx) i += offset;
  std::sort(idx.begin(), idx.end());
  return idx;
}

// METHODS.md section 3 written out in float64, independently of the
// policy's scorers and of the leverage module: exact leverage scores of the
// pre-RoPE keys (the hat matrix's diagonal, from Eigen's SVD here: a sketch
// of full rank d leaves them unchanged), non-causal chunk attention column
// sums over the group times ||v||_2, zero-padded mean pooling (kernel 5,
// the padding counted: SnapKV's avg_pool1d), population z-scores and the
// blend z(a) + lambda z(o).
std::vector<double> SpecScores(Fixture& f, double lambda, int chunk, bool leverage_only = false) {
  const int n = f.n, d = f.d, G = f.G;
  Eigen::MatrixXd K(n, d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) K(i, j) = f.stats.k_pre[i * d + j];
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(K, Eigen::ComputeThinU);
  std::vector<double> o(n), a(n, 0.0);
  for (int i = 0; i < n; ++i) o[i] = svd.matrixU().row(i).squaredNorm();
  std::vector<float> k(d), v(d);
  for (int c0 = 0; c0 < n; c0 += chunk) {
    const int c1 = std::min(n, c0 + chunk);
    for (int i = c0; i < c1; ++i)
      for (int g = 0; g < G; ++g) {
        std::vector<double> e;
        double z = 0;
        for (int j = c0; j < c1; ++j) {
          f.store.ReadKey(j, k.data());
          double dot = 0;
          for (int t = 0; t < d; ++t) dot += double{f.stats.q_rot[(i * G + g) * d + t]} * k[t];
          e.push_back(std::exp(dot / std::sqrt(double(d))));
          z += e.back();
        }
        for (int j = c0; j < c1; ++j) a[j] += e[j - c0] / z;
      }
  }
  for (int j = 0; j < n; ++j) {
    f.store.ReadValue(j, v.data());
    double nv = 0;
    for (float x : v) nv += double{x} * x;
    a[j] *= std::sqrt(nv);
  }
  std::vector<double> pooled(n, 0.0);
  for (int j = 0; j < n; ++j) {
    for (int t = j - 2; t <= j + 2; ++t) pooled[j] += t >= 0 && t < n ? a[t] : 0.0;
    pooled[j] /= 5;
  }
  auto z = [](std::vector<double> x) {
    double m = 0, s2 = 0;
    for (double y : x) m += y / x.size();
    for (double y : x) s2 += (y - m) * (y - m) / x.size();
    for (double& y : x) y = (y - m) / std::sqrt(s2);
    return x;
  };
  if (leverage_only) return o;
  std::vector<double> za = z(pooled), zo = z(o), out(n);
  for (int j = 0; j < n; ++j) out[j] = za[j] + lambda * zo[j];
  return out;
}

TEST(Compactor, KeepsTheTopBlendedScoresWithoutProtection) {
  Fixture f(40, 40, 5);
  const std::vector<double> spec = SpecScores(f, 0.3, 16);
  // Every budget: the whole order of the scores, not only a top set.
  for (int t = 1; t < 40; ++t) {
    Plan p = f.Run({{"chunk", 16}}, t);
    ASSERT_FALSE(p.noop);
    EXPECT_EQ(p.keep, TopIdx(spec, 0, t)) << "budget " << t;
  }
  // The scorers agree with the spec value for value, not only in the top.
  const std::vector<double> mine = f.Expected(0, 0.3, 16, 5);
  for (int j = 0; j < 40; ++j) EXPECT_NEAR(mine[j], spec[j], 1e-4) << j;
  // Leverage alone (a huge lambda) ranks by the leverage scores, which sum
  // to rank(K) = d.
  const std::vector<double> lev = SpecScores(f, 0, 16, true);
  EXPECT_NEAR(std::accumulate(lev.begin(), lev.end(), 0.0), 4.0, 1e-9);
  for (int t = 1; t < 40; ++t) EXPECT_EQ(f.Run({{"chunk", 16}, {"lambda", 1e6}}, t).keep, TopIdx(lev, 0, t)) << t;
}

TEST(Compactor, ProtectedPositions) {
  Fixture f(30, 30, 6);
  auto keep = f.Run({{"protect-first", 3}, {"protect-last", 2}, {"chunk", 8}}, 9).keep;
  ASSERT_EQ(keep.size(), 9u);
  for (int i : {0, 1, 2, 28, 29}) EXPECT_TRUE(std::count(keep.begin(), keep.end(), i)) << i;
  // The other four are the best of the unprotected by the blended score.
  auto exp = f.Expected(0, 0.3, 8, 5);
  for (int i : {0, 1, 2, 28, 29}) exp[i] = -1e9;
  auto top = TopIdx(exp, 0, 4);
  for (int i : top) EXPECT_TRUE(std::count(keep.begin(), keep.end(), i)) << i;
}

TEST(Compactor, OnlyEntriesAlignedWithThePrefillAreScored) {
  Fixture f(24, 10, 7);  // rows for positions 14..23 only
  auto keep = f.Run({{"chunk", 4}}, 18).keep;
  auto exp = f.Expected(14, 0.3, 4, 5);
  std::vector<int> want(14);
  std::iota(want.begin(), want.end(), 0);
  for (int i : TopIdx(exp, 14, 4)) want.push_back(i);
  EXPECT_EQ(keep, want);
  Fixture none(8, 0, 8);  // nothing collected: the head is left as it is
  EXPECT_TRUE(none.Run({}, 4).noop);
}

TEST(Compactor, DegenerateInputsGiveFiniteScores) {
  for (bool zero_v : {false, true})
    for (bool equal_k : {false, true}) {
      Fixture f(12, 12, 9, zero_v, equal_k);  // N = 12 < chunk 256
      for (double x : f.Expected(0, 0.3, 256, 5)) EXPECT_TRUE(std::isfinite(x));
      Plan p = f.Run({}, 5);
      EXPECT_EQ(p.keep.size(), 5u);
    }
  // All-equal keys and queries: uniform attention, equal leverage -> all z 0.
  std::vector<float> q(6 * 2 * 4, 0.3f), k(6 * 4, 0.7f);
  auto a = ChunkAttentionScores(q.data(), k.data(), 6, 2, 4, 256);
  for (double x : a) EXPECT_NEAR(x, 2.0, 1e-6);
  for (double x : BlendScores(a, std::vector<double>(6, 1.0 / 6), 0.3)) EXPECT_EQ(x, 0.0);
}

TEST(Compactor, EveryLeverageRouteRanksAsTheExactScores) {
  // With a sketch of full rank (sketch-dim >= d = 4) every route (sketch
  // SVD, eig, qr, exact, srht) computes the exact leverage scores, so with a
  // huge lambda each keeps the exact top 6 computed independently; a
  // sketch of rank 2 < d does not, for the sketching routes.
  Fixture f(20, 20, 10);
  const std::vector<int> want = TopIdx(SpecScores(f, 0, 256, true), 0, 6);
  const auto& names = numerics::LeverageMethodNames();
  for (size_t m = 0; m < names.size(); ++m)
    EXPECT_EQ(f.Run({{"leverage", double(m)}, {"lambda", 1e6}, {"sketch-dim", 4}}, 6).keep, want) << names[m];
  int differ = 0;
  for (size_t m = 0; m < names.size(); ++m)
    differ += f.Run({{"leverage", double(m)}, {"lambda", 1e6}, {"sketch-dim", 2}}, 6).keep != want;
  EXPECT_GT(differ, 0);  // the check above can tell routes apart
  EXPECT_FALSE(MakePolicy("compactor", {{"leverage", 5}}).ok());
  EXPECT_EQ(FindPolicy("compactor")->params[0].choices, numerics::LeverageMethodNames());
}

TEST(Compactor, ValueNormScalesSnapkvAndH2oScores) {
  // Entry 2 has the most mass but a zero value: with --value-norm l2 it goes.
  HeadStore h(2, GgmlType::F32);
  const float vals[6][2] = {{1, 0}, {3, 4}, {0, 0}, {1, 1}, {2, 0}, {1, 0}};
  for (int i = 0; i < 6; ++i) h.Append(vals[i], vals[i], i, 0.f);
  EXPECT_NEAR(ValueNorms(h, 1)[1], 5.0, 1e-12);
  EXPECT_NEAR(ValueNorms(h, 2)[1], 7.0, 1e-12);
  EXPECT_EQ(ValueNorms(h, 0)[2], 1.0);
  HeadStats st;
  taptest::PlantMass(st, {0.1f, 0.2f, 0.9f, 0.3f, 0.2f, 0.1f});
  taptest::PlantWindowMass(st, 1, taptest::Mass(st));
  auto keep = [&](const std::string& name, const Params& p) {
    auto pol = MakePolicy(name, p);
    EXPECT_TRUE(pol.ok());
    PolicyContext ctx;
    ctx.store = &h;
    ctx.stats = &st;
    ctx.budget = 3;
    ctx.logical_len = 6;
    return pol.value()->Compress(ctx).keep;
  };
  // h2o, no sinks, all heavy: masses 0.9 (2), 0.3 (3), 0.2 (1 and 4: the newer wins) + newest 5.
  EXPECT_EQ(keep("h2o", {{"sink-guard", 0}, {"heavy-ratio", 1}}), (std::vector<int>{2, 3, 5}));
  // With l2 norms: 0.1, 1.0, 0, 0.42, 0.4 -> 1 and 3 (+ newest).
  EXPECT_EQ(keep("h2o", {{"sink-guard", 0}, {"heavy-ratio", 1}, {"value-norm", 1}}), (std::vector<int>{1, 3, 5}));
  // snapkv, window 1, kernel 1: obs times norms picks 1 and 3 over the plain 2 and 3.
  EXPECT_EQ(keep("snapkv", {{"obs-window", 1}, {"pool-kernel", 1}}), (std::vector<int>{2, 3, 5}));
  EXPECT_EQ(keep("snapkv", {{"obs-window", 1}, {"pool-kernel", 1}, {"value-norm", 1}}), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(keep("pyramidkv", {{"obs-window", 1}, {"pool-kernel", 1}, {"value-norm", 2}}), (std::vector<int>{1, 3, 5}));
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
