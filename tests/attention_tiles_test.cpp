// The key-tiled causal attention (online softmax) and the statistics taps fed
// from its tiles, against float64 references written here: outputs for head
// dims 8/32/64/128, G 1/2/4, F32 and Q8_0 caches, tile sizes that do not
// divide T or n, -inf log-weights and all -inf rows, a long cache (many
// tiles); outputs bit for bit with and without a tap; every StatsNeeds field
// after a tiled prefill against statistics of float64 rows; ProbeScorer with
// j and j + 1 in different tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>

#include "kernels/attention.h"
#include "kernels/ref/attention_ref.h"
#include "kv/cache.h"
#include "kv/profile.h"
#include "kv/stats.h"
#include "test_util.h"

namespace kvtrim::kernels {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using test::RandVec;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A KV head built from float rows; the reference reads the stored
// (dequantized) rows back.
struct Head {
  std::vector<std::vector<float>> k, v;
  std::vector<float> b;
  kv::HeadStore store;
  Head(int d, GgmlType t) : store(d, t) {}
  void Add(const std::vector<float>& kk, const std::vector<float>& vv, float logw) {
    store.Append(kk.data(), vv.data(), static_cast<int>(k.size()), logw);
    std::vector<float> kd(kk.size()), vd(vv.size());
    store.ReadKey(store.size() - 1, kd.data());
    store.ReadValue(store.size() - 1, vd.data());
    k.push_back(kd);
    v.push_back(vd);
    b.push_back(logw);
  }
};

// Float64 probabilities and output of query row (t, g): the visible entries
// [0, n0 + t]; an all -inf row has no weights (probabilities and output 0).
struct RefRow {
  std::vector<double> p, out;
};
RefRow Reference(const Head& h, const float* q, int d, int vis, float scale) {
  std::vector<std::vector<float>> k(h.k.begin(), h.k.begin() + vis), v(h.v.begin(), h.v.begin() + vis);
  std::vector<float> b(h.b.begin(), h.b.begin() + vis);
  bool any = false;
  for (float x : b) any = any || x != kNegInf;
  RefRow r;
  if (!any) {
    r.p.assign(vis, 0.0);
    r.out.assign(d, 0.0);
    return r;
  }
  r.out = ref::Attend(std::vector<float>(q, q + d), k, v, b, scale, &r.p);
  return r;
}

// Log-weights: every 7th entry -inf, others in [-1, 1]; the first `masked`
// entries -inf too (queries that see only those have all -inf rows).
float LogW(int j, int masked) {
  if (j < masked || j % 7 == 3) return kNegInf;
  return 0.25f * static_cast<float>((j * 5) % 9) - 1.f;
}

class TiledCausal : public ::testing::TestWithParam<std::tuple<int, int, GgmlType>> {};

TEST_P(TiledCausal, OutputsMatchFloat64ReferenceAtEveryTileSize) {
  const auto [d, G, type] = GetParam();
  std::mt19937 rng(d * 10 + G + (type == GgmlType::F32 ? 0 : 1000));
  // Two layouts: 37 earlier entries and 101 queries (n0 > 0); 2 earlier
  // entries, the first 5 entries -inf: queries 0..2 see only -inf entries.
  for (const auto& [n0, T, masked] : {std::tuple{37, 101, 0}, std::tuple{2, 70, 5}}) {
    Head h(d, type);
    for (int j = 0; j < n0 + T; ++j) h.Add(RandVec(rng, d), RandVec(rng, d), LogW(j, masked));
    const float scale = 1.f / std::sqrt(static_cast<float>(d));
    const std::vector<float> q = RandVec(rng, T * G * d, 1.5f);
    std::vector<RefRow> want;
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g) want.push_back(Reference(h, &q[(t * G + g) * d], d, n0 + t + 1, scale));
    for (int tile : {0, 1, 16, 48, 256}) {  // 0: the default (kAttentionKeyTile)
      std::vector<float> out(T * G * d, 7.f);
      AttendCausal(h.store.View(), q.data(), T, G, G * d, n0, scale, out.data(), G * d, nullptr, tile);
      for (int r = 0; r < T * G; ++r)
        for (int i = 0; i < d; ++i) {
          ASSERT_FALSE(std::isnan(out[r * d + i]));
          ASSERT_NEAR(out[r * d + i], want[r].out[i], 3e-5) << "n0 " << n0 << " tile " << tile << " row " << r;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, TiledCausal,
                         ::testing::Combine(::testing::Values(8, 32, 64, 128), ::testing::Values(1, 2, 4),
                                            ::testing::Values(GgmlType::F32, GgmlType::Q8_0)));

// n = 5003 entries, 5 queries at the end: 20 tiles of the default 256 keys (the last partial).
TEST(TiledCausal, LongCacheManyTiles) {
  std::mt19937 rng(5);
  const int d = 32, G = 2, T = 5, n = 5003, n0 = n - T;
  for (GgmlType type : {GgmlType::F32, GgmlType::Q4_0}) {
    Head h(d, type);
    for (int j = 0; j < n; ++j) h.Add(RandVec(rng, d), RandVec(rng, d), LogW(j, 0));
    const float scale = 0.3f;
    const std::vector<float> q = RandVec(rng, T * G * d, 2.f);
    std::vector<float> out(T * G * d);
    AttendCausal(h.store.View(), q.data(), T, G, G * d, n0, scale, out.data(), G * d);
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g) {
        const RefRow w = Reference(h, &q[(t * G + g) * d], d, n0 + t + 1, scale);
        for (int i = 0; i < d; ++i) ASSERT_NEAR(out[(t * G + g) * d + i], w.out[i], 2e-5) << t << "," << g;
      }
  }
}

// The output pass never reads what the tap pass computes.
TEST(TiledCausal, OutputIdenticalWithAndWithoutTap) {
  std::mt19937 rng(9);
  const int d = 32, G = 2, n0 = 11, T = 150;
  for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    Head h(d, type);
    for (int j = 0; j < n0 + T; ++j) h.Add(RandVec(rng, d), RandVec(rng, d), LogW(j, 0));
    const std::vector<float> q = RandVec(rng, T * G * d);
    std::vector<float> a(T * G * d), b(T * G * d);
    int tiles = 0;
    TileObserver obs = [&](const ProbTile&) { ++tiles; };
    AttendCausal(h.store.View(), q.data(), T, G, G * d, n0, 0.2f, a.data(), G * d);
    AttendCausal(h.store.View(), q.data(), T, G, G * d, n0, 0.2f, b.data(), G * d, &obs);
    EXPECT_GT(tiles, 0);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  }
}

// A causal call split at multiples of CausalQueryBlock (the engine's
// prefill runs (head, block) pairs in parallel) equals the whole call bit for
// bit; a split elsewhere is checked against the reference only.
TEST(TiledCausal, SplitAtQueryBlocksEqualsTheWholeCall) {
  std::mt19937 rng(13);
  const int d = 64, n0 = 300, T = 200;
  for (int G : {1, 3}) {
    for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
      Head h(d, type);
      for (int j = 0; j < n0 + T; ++j) h.Add(RandVec(rng, d), RandVec(rng, d), LogW(j, 0));
      const std::vector<float> q = RandVec(rng, T * G * d);
      std::vector<float> whole(T * G * d), split(T * G * d);
      AttendCausalMl(h.store.View(), q.data(), T, G, G * d, n0, 0.2f, whole.data(), G * d, nullptr);
      const int tb = CausalQueryBlock(G) * 2;
      for (int t0 = 0; t0 < T; t0 += tb) {
        const int t1 = std::min(T, t0 + tb);
        AttendCausalMl(h.store.View(), &q[t0 * G * d], t1 - t0, G, G * d, n0 + t0, 0.2f, &split[t0 * G * d], G * d,
                       nullptr);
      }
      EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)), 0) << G;
      const RefRow w = Reference(h, &q[(T - 1) * G * d], d, n0 + T, 0.2f);  // the last row, all entries
      for (int i = 0; i < d; ++i) ASSERT_NEAR(split[(T - 1) * G * d + i], w.out[i], 2e-5);
    }
  }
}

// Tiles: every visible probability of every row exactly once, masked entries
// 0, rows summing to 1; the tiles of a query block in increasing j0.
// AttendCausalTaps keeps a block's exp tiles (blocks that see at most
// kKeepEntries entries) and rescales them; TapCausal recomputes them. Both
// must hand the same tiles, in the same order, with the same probabilities
// (to rounding), from t_first on; and the output must equal AttendCausalMl's
// bit for bit. The long case (n > kKeepEntries) runs the recomputing branch.
TEST(TiledCausal, KeptTilesEqualRecomputedTiles) {
  struct Seen {
    int t0, t1, j0, j1;
    std::vector<float> p;
  };
  auto record = [](std::vector<Seen>* v) {
    return [v](const ProbTile& t) {
      Seen s{t.t0, t.t1, t.j0, t.j1, {}};
      for (int tt = t.t0; tt < t.t1; ++tt)
        for (int g = 0; g < t.G; ++g) s.p.insert(s.p.end(), t.Row(tt, g), t.Row(tt, g) + (t.j1 - t.j0));
      v->push_back(std::move(s));
    };
  };
  std::mt19937 rng(21);
  const int d = 32, G = 2;
  for (const auto& [n0, T, t_first, type] :
       {std::tuple{11, 150, 0, GgmlType::F32}, std::tuple{5, 300, 170, GgmlType::Q8_0},
        std::tuple{kKeepEntries + 40, 40, 0, GgmlType::F32}}) {
    Head h(d, type);
    for (int j = 0; j < n0 + T; ++j) h.Add(RandVec(rng, d), RandVec(rng, d), LogW(j, 3));
    const std::vector<float> q = RandVec(rng, T * G * d, 2.f);
    std::vector<float> a(T * G * d), b(T * G * d), ml(static_cast<size_t>(T) * G * 2);
    std::vector<Seen> kept, recomputed;
    AttendCausalTaps(h.store.View(), q.data(), T, G, G * d, n0, 0.2f, a.data(), G * d, record(&kept), t_first);
    AttendCausalMl(h.store.View(), q.data(), T, G, G * d, n0, 0.2f, b.data(), G * d, ml.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << n0;
    TapCausal(h.store.View(), q.data(), T, G, G * d, n0, 0.2f, ml.data(), record(&recomputed), 0, t_first);
    ASSERT_EQ(kept.size(), recomputed.size()) << n0;
    ASSERT_FALSE(kept.empty());
    EXPECT_GT(kept.front().t1, t_first);  // blocks ending at or before t_first are skipped
    for (size_t i = 0; i < kept.size(); ++i) {
      const Seen &x = kept[i], &y = recomputed[i];
      ASSERT_EQ(std::tie(x.t0, x.t1, x.j0, x.j1), std::tie(y.t0, y.t1, y.j0, y.j1)) << i;
      ASSERT_EQ(x.p.size(), y.p.size());
      for (size_t k = 0; k < x.p.size(); ++k) ASSERT_NEAR(x.p[k], y.p[k], 1e-6f + 2e-6f * y.p[k]) << n0 << " " << i << " " << k;
    }
  }
}

TEST(TiledCausal, TilesCoverEachRowOnceAndMatchReference) {
  std::mt19937 rng(21);
  const int d = 16, G = 2, n0 = 3, T = 77;
  Head h(d, GgmlType::F32);
  for (int j = 0; j < n0 + T; ++j) h.Add(RandVec(rng, d), RandVec(rng, d), LogW(j, 0));
  const std::vector<float> q = RandVec(rng, T * G * d);
  for (int tile : {1, 16, 48, 500}) {
    std::vector<std::vector<double>> got(T * G);
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g) got[t * G + g].assign(n0 + t + 1, -1.0);
    int last_t0 = -1, last_j1 = 0;
    TileObserver obs = [&](const ProbTile& pt) {
      ASSERT_EQ(pt.G, G);
      if (pt.t0 == last_t0) ASSERT_EQ(pt.j0, last_j1);
      else ASSERT_EQ(pt.j0, 0);
      last_t0 = pt.t0;
      last_j1 = pt.j1;
      for (int t = pt.t0; t < pt.t1; ++t)
        for (int g = 0; g < G; ++g)
          for (int j = pt.j0; j < pt.j1; ++j) {
            const float p = pt.Row(t, g)[j - pt.j0];
            if (j >= pt.Visible(t)) {
              ASSERT_EQ(p, 0.f);
              continue;
            }
            ASSERT_EQ(got[t * G + g][j], -1.0) << "entry reported twice";
            got[t * G + g][j] = p;
          }
    };
    std::vector<float> out(T * G * d);
    AttendCausal(h.store.View(), q.data(), T, G, G * d, n0, 0.25f, out.data(), G * d, &obs, tile);
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g) {
        const RefRow w = Reference(h, &q[(t * G + g) * d], d, n0 + t + 1, 0.25f);
        double sum = 0;
        for (int j = 0; j <= n0 + t; ++j) {
          ASSERT_NEAR(got[t * G + g][j], w.p[j], 2e-6) << "tile " << tile << " t " << t << " j " << j;
          sum += got[t * G + g][j];
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kernels
