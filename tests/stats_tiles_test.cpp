// Statistics fed from the tiled prefill's probability tiles against the same
// statistics computed here from float64 probability rows, at several tile
// sizes (tile boundaries inside the observation window, the recent window,
// every query block): every StatsNeeds field that reads probabilities, and
// ProbeScorer's echo/induction where j and j + 1 lie in different tiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "tap_values.h"
#include "kernels/attention.h"
#include "kernels/ref/attention_ref.h"
#include "kv/cache.h"
#include "kv/profile.h"
#include "kv/stats.h"
#include "kv/taps/latest_query.h"
#include "kv/taps/max_prob.h"
#include "test_util.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// TOVA's statistic, the latest-query tap (kv/taps/latest_query.h).
const std::vector<float>& Cur(const HeadStats& h) {
  static const std::vector<float> none;
  const auto* s = h.taps.Get<LatestQueryStat>(kLatestQueryTap);
  return s ? s->values() : none;
}


using test::RandVec;

// A head of n0 + T entries (log-weights in [-1, 1]), the batch's queries and
// the float64 probability rows of every (t, g) over its visible entries.
struct Prefill {
  int d, G, n0, T;
  HeadStore store;
  std::vector<std::vector<float>> k, v;
  std::vector<float> b, q;
  std::vector<std::vector<double>> p;  // [T * G][n0 + t + 1]
  float scale = 0.3f;
  Prefill(int d_, int G_, int n0_, int T_, uint32_t seed) : d(d_), G(G_), n0(n0_), T(T_), store(d_, GgmlType::F32) {
    std::mt19937 rng(seed);
    for (int j = 0; j < n0 + T; ++j) {
      k.push_back(RandVec(rng, d));
      v.push_back(RandVec(rng, d));
      b.push_back(0.25f * static_cast<float>(j % 9) - 1.f);
      store.Append(k.back().data(), v.back().data(), j, b.back());
    }
    q = RandVec(rng, T * G * d, 2.f);
    for (int t = 0; t < T; ++t) {
      const int vis = n0 + t + 1;
      std::vector<std::vector<float>> kk(k.begin(), k.begin() + vis), vv(v.begin(), v.begin() + vis);
      std::vector<float> bb(b.begin(), b.begin() + vis);
      for (int g = 0; g < G; ++g) {
        p.emplace_back();
        kernels::ref::Attend(std::vector<float>(q.begin() + (t * G + g) * d, q.begin() + (t * G + g + 1) * d), kk, vv,
                             bb, scale, &p.back());
      }
    }
  }
  // The tiled prefill with `tap` receiving the tiles as (layer 0, head 0).
  // skip: as the model does, skip the queries before the tap's ProbsFrom.
  void Run(AttentionTap& tap, int tile, bool skip = false) const {
    tap.OnBatch(n0, T);
    std::vector<float> out(static_cast<size_t>(T) * G * d), ml(static_cast<size_t>(T) * G * 2);
    kernels::TileObserver obs = [&](const kernels::ProbTile& pt) { tap.OnProbTile(0, 0, pt); };
    const int t_first = skip ? static_cast<int>(std::clamp<int64_t>(tap.ProbsFrom(0) - n0, 0, T)) : 0;
    kernels::AttendCausalMl(store.View(), q.data(), T, G, G * d, n0, scale, out.data(), G * d, ml.data(), tile);
    kernels::TapCausal(store.View(), q.data(), T, G, G * d, n0, scale, ml.data(), obs, tile, t_first);
  }
  double P(int t, int g, int j) const { return p[t * G + g][j]; }
};

// Every probability statistic, from float64 rows (positions n0 + t; the
// batch's step n - 1; the observation window ends at prompt_end).
struct RefStats {
  std::vector<double> acc, obs, maxp, cur, recent;
  std::vector<int64_t> last, hist;
};
struct Windows {
  int obs = 0, recent = 0, history = 0;
};
RefStats Reference(const Prefill& pf, const Windows& needs, int64_t prompt_end) {
  const int n = pf.n0 + pf.T, G = pf.G;
  RefStats r{std::vector<double>(n, 0), std::vector<double>(n, 0), std::vector<double>(n, 0),
             std::vector<double>(n, 0), std::vector<double>(n, 0), std::vector<int64_t>(n, -1),
             std::vector<int64_t>(n, 0)};
  for (int t = 0; t < pf.T; ++t) {
    const int64_t pos = pf.n0 + t;
    const int vis = pf.n0 + t + 1;
    for (int j = 0; j < vis; ++j) {
      double mx = 0, mean = 0;
      for (int g = 0; g < G; ++g) {
        const double x = pf.P(t, g, j);
        r.acc[j] += x;
        if (pos >= prompt_end - needs.obs && pos < prompt_end) r.obs[j] += x;
        r.maxp[j] = std::max(r.maxp[j], x);
        mx = std::max(mx, x);
        mean += x / G;
      }
      if (pos == n - 1) r.cur[j] = mean;
      if (pos > n - 1 - needs.recent) r.recent[j] += mean;
      if (mx >= 1.0 / vis) {
        r.last[j] = pos;
        if (t >= pf.T - needs.history) ++r.hist[j];
      }
    }
  }
  return r;
}

TEST(StatsTiles, EveryFieldMatchesFloat64Rows) {
  const int G = 2, n0 = 5, T = 140, n = n0 + T;
  const Prefill pf(16, G, n0, T, 3);
  StatsNeeds needs;
  const Windows win{19, 6, 70};  // history: two words per entry
  needs.taps = {kMassTap, {kWindowMassTap, win.obs}, kLastAccessTap, {kHistoryTap, win.history},
                {kRecentRowsTap, win.recent}, kLatestQueryTap, kMaxProbTap};
  const int64_t prompt_end = n0 + T - 3;  // the window ends before the batch does
  const RefStats want = Reference(pf, win, prompt_end);
  for (int tile : {1, 7, 16, 64, 128, 1000}) {
    AttentionStats st(1, 1, G, 16, needs);
    st.SetPromptEnd(prompt_end);
    pf.Run(st, tile, /*skip=*/true);  // reads every query: ProbsFrom 0
    EXPECT_EQ(st.ProbsFrom(0), 0);
    const HeadStats& h = st.head(0, 0);
    ASSERT_EQ(taptest::Mass(h).size(), static_cast<size_t>(n));
    const std::vector<double> rm = taptest::RecentMass(st, 0, 0, n);
    for (int j = 0; j < n; ++j) {
      SCOPED_TRACE("tile " + std::to_string(tile) + " entry " + std::to_string(j));
      EXPECT_NEAR(taptest::Mass(h)[j], want.acc[j], 2e-5);
      EXPECT_NEAR(taptest::WindowMass(h)[j], want.obs[j], 1e-5);
      EXPECT_NEAR(h.taps.Get<MaxProbStat>(kMaxProbTap)->values()[j], want.maxp[j], 1e-6);
      EXPECT_NEAR(Cur(h)[j], want.cur[j], 1e-6);
      EXPECT_NEAR(rm[j], want.recent[j], 1e-5);
      EXPECT_EQ(taptest::LastAccess(h)[j], want.last[j]);
      EXPECT_EQ(taptest::HistoryCount(st, 0, 0, j), want.hist[j]);
    }
  }
}

// Window-only statistics (SnapKV, KVSlimmer, TOVA) read only the last
// queries: the model skips the earlier query blocks' tiles, same statistics.
TEST(StatsTiles, WindowStatisticsSkipEarlyQueryBlocks) {
  const int G = 2, n0 = 3, T = 150, n = n0 + T;
  const Prefill pf(16, G, n0, T, 8);
  StatsNeeds needs;
  const Windows win{40, 5, 0};
  needs.taps = {{kWindowMassTap, win.obs}, {kRecentRowsTap, win.recent}, kLatestQueryTap};
  const int64_t prompt_end = n0 + T - 2;
  const RefStats want = Reference(pf, win, prompt_end);
  for (int tile : {16, 256}) {
    AttentionStats st(1, 1, G, 16, needs);
    st.SetPromptEnd(prompt_end);
    int from_query = T;
    struct Spy : AttentionTap {
      AttentionStats* st;
      int* first;
      int n0;
      void OnBatch(int pos0, int T) override { st->OnBatch(pos0, T); }
      int64_t ProbsFrom(int l) const override { return st->ProbsFrom(l); }
      void OnProbTile(int l, int h, const ProbTile& t) override {
        *first = std::min(*first, t.t0);
        st->OnProbTile(l, h, t);
      }
    } spy;
    spy.st = &st;
    spy.first = &from_query;
    pf.Run(spy, tile, /*skip=*/true);
    EXPECT_EQ(st.ProbsFrom(0), prompt_end - 40);
    EXPECT_GT(from_query, 64);  // the first query blocks (32 queries each at G = 2) were skipped
    const std::vector<double> rm = taptest::RecentMass(st, 0, 0, n);
    for (int j = 0; j < n; ++j) {
      EXPECT_NEAR(taptest::WindowMass(st.head(0, 0))[j], want.obs[j], 1e-5) << j;
      EXPECT_NEAR(Cur(st.head(0, 0))[j], want.cur[j], 1e-6) << j;
      EXPECT_NEAR(rm[j], want.recent[j], 1e-5) << j;
    }
  }
  // No prompt end: the window reads nothing, only the recent and current queries.
  StatsNeeds w;
  w.taps = {{kWindowMassTap, 40}};
  AttentionStats none(1, 1, G, 16, w);
  none.OnBatch(n0, T);
  EXPECT_GE(none.ProbsFrom(0), n0 + T);
}

// The same statistics through the row convenience (whole rows of float64
// values) and through tiles of the kernel: equal up to the kernel's float error.
TEST(StatsTiles, RowConvenienceAgreesWithTiles) {
  const int G = 4, n0 = 0, T = 40;
  const Prefill pf(8, G, n0, T, 4);
  StatsNeeds needs;
  needs.taps = {kMassTap, kLastAccessTap};
  AttentionStats rows(1, 1, G, 8, needs), tiles(1, 1, G, 8, needs);
  pf.Run(tiles, 16);
  rows.OnBatch(n0, T);
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g) {
      std::vector<float> p(pf.p[t * G + g].begin(), pf.p[t * G + g].end());
      rows.OnProbs(0, 0, t, g, p.data(), static_cast<int>(p.size()));
    }
  for (int j = 0; j < T; ++j) {
    EXPECT_NEAR(taptest::Mass(rows.head(0, 0))[j], taptest::Mass(tiles.head(0, 0))[j], 1e-5) << j;
    EXPECT_EQ(taptest::LastAccess(rows.head(0, 0))[j], taptest::LastAccess(tiles.head(0, 0))[j]) << j;
  }
}

// Probe queries at positions i >= 1 + K: echo p_i[i - K], induction
// p_i[i - K + 1], averaged per query head; with tiles of 1 and 16 many (j,
// j + 1) pairs lie in two tiles (j = 15, 31, ...).
TEST(StatsTiles, ProbeScorerAcrossTileBoundaries) {
  const int G = 2, K = 20, T = 90;
  const Prefill pf(16, G, 0, T, 6);
  std::vector<double> echo(G, 0), ind(G, 0);
  int count = 0;
  for (int i = 1 + K; i < T; ++i) {
    for (int g = 0; g < G; ++g) {
      echo[g] += pf.P(i, g, i - K);
      ind[g] += pf.P(i, g, i - K + 1);
    }
    ++count;
  }
  for (int tile : {1, 16, 17, 128}) {
    ProbeScorer sc(1, 1, G, K);
    pf.Run(sc, tile);
    for (int g = 0; g < G; ++g) {
      EXPECT_NEAR(sc.echo()[g], echo[g] / count, 1e-6) << "tile " << tile;
      EXPECT_NEAR(sc.induction()[g], ind[g] / count, 1e-6) << "tile " << tile;
    }
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
