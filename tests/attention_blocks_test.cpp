// Causal prefill attention over batches that span several query blocks (64
// score rows each), head dims 8/32/64/128, against the float64 reference:
// outputs, and the probability tiles the statistics taps receive.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/attention.h"
#include "kernels/ref/attention_ref.h"
#include "kv/cache.h"

namespace kvtrim::kernels {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::vector<float> Rand(std::mt19937& rng, int n) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

class CausalBlocks : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CausalBlocks, OutputsAndTapRowsMatchReference) {
  const auto [d, G] = GetParam();
  std::mt19937 rng(d * 10 + G);
  const int n0 = 37, T = 101, n = n0 + T;  // 101 positions: 2 to 7 blocks, the last one partial
  kv::HeadStore store(d, GgmlType::F32);
  std::vector<std::vector<float>> K, V;
  std::vector<float> B;
  for (int j = 0; j < n; ++j) {
    K.push_back(Rand(rng, d));
    V.push_back(Rand(rng, d));
    B.push_back(j % 5 == 0 ? -1.5f : 0.1f * (j % 3));
    store.Append(K.back().data(), V.back().data(), j, B.back());
  }
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  std::vector<float> q = Rand(rng, T * G * d), out(T * G * d, 0.f);
  int rows_seen = 0;
  std::vector<std::vector<double>> want_p(T * G);
  std::vector<std::vector<double>> want_o(T * G);
  for (int t = 0; t < T; ++t) {
    const int vis = n0 + t + 1;
    std::vector<std::vector<float>> k(K.begin(), K.begin() + vis), v(V.begin(), V.begin() + vis);
    std::vector<float> b(B.begin(), B.begin() + vis);
    for (int g = 0; g < G; ++g) {
      std::vector<float> qg(q.begin() + (t * G + g) * d, q.begin() + (t * G + g + 1) * d);
      want_o[t * G + g] = ref::Attend(qg, k, v, b, scale, &want_p[t * G + g]);
    }
  }
  TileObserver obs = [&](const ProbTile& tile) {
    for (int t = tile.t0; t < tile.t1; ++t) {
      ASSERT_EQ(tile.Visible(t), n0 + t + 1) << "t " << t;
      for (int g = 0; g < G; ++g) {
        const auto& w = want_p[t * G + g];
        for (int j = tile.j0; j < std::min(tile.j1, tile.Visible(t)); ++j)
          ASSERT_NEAR(tile.Row(t, g)[j - tile.j0], w[j], 1e-5) << "t " << t << " g " << g << " j " << j;
        if (tile.j1 >= tile.Visible(t) && tile.j0 < tile.Visible(t)) ++rows_seen;  // the row's last tile
      }
    }
  };
  AttendCausal(store.View(), q.data(), T, G, G * d, n0, scale, out.data(), G * d, &obs);
  EXPECT_EQ(rows_seen, T * G);
  for (int r = 0; r < T * G; ++r)
    for (int i = 0; i < d; ++i) ASSERT_NEAR(out[r * d + i], want_o[r][i], 2e-5) << "row " << r << " i " << i;
}

INSTANTIATE_TEST_SUITE_P(HeadDims, CausalBlocks,
                         ::testing::Combine(::testing::Values(8, 32, 64, 128), ::testing::Values(1, 2, 4)));

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kernels
