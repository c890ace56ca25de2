// KVzip (docs/policies-2.md): the shared top-k against brute force and by
// hand, the policy on hand-made statistics, then the reconstruction pass on
// the needle model (one budget over every head, fixed shares with
// --kvzip-per-head, a repeated block).
#include "kv/numerics/shared_budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>

#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kv/stats.h"
#include "kvtrim/engine.h"
#include "model/config.h"
#include "io/tokenizer.h"
#include "test_util.h"

namespace kvtrim::kv {
namespace {

TEST(KvzipNumerics, SharedTopKByHand) {
  const std::vector<std::vector<double>> s = {{0.9, 0.1, 0.5}, {0.8, 0.7, 0.6}, {0.05}};
  EXPECT_EQ(numerics::SharedTopK(s, 3, 0), (std::vector<int>{1, 2, 0}));
  // Floor 1: every head its best first (0.9, 0.8, 0.05), then 0.7 and 0.6.
  EXPECT_EQ(numerics::SharedTopK(s, 5, 1), (std::vector<int>{1, 3, 1}));
  // Floors beyond the total: the floors stand.
  EXPECT_EQ(numerics::SharedTopK(s, 2, 1), (std::vector<int>{1, 1, 1}));
  // More than every entry: all of them.
  EXPECT_EQ(numerics::SharedTopK(s, 100, 0), (std::vector<int>{3, 3, 1}));
}

TEST(KvzipNumerics, SharedTopKIsTheGlobalTopK) {
  std::mt19937 g(3);
  std::uniform_int_distribution<int> len(1, 40), q(0, 9);  // coarse scores: many ties
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::vector<double>> s(7);
    std::vector<std::tuple<double, int, int>> all;  // (score, index, head)
    for (int h = 0; h < 7; ++h) {
      s[h].resize(len(g));
      for (size_t i = 0; i < s[h].size(); ++i) all.emplace_back(s[h][i] = q(g) * 0.1, static_cast<int>(i), h);
    }
    std::sort(all.rbegin(), all.rend());  // score, then index, then head, all descending
    const int total = static_cast<int>(all.size()) / 3;
    std::vector<int> want(7, 0);
    for (int i = 0; i < total; ++i) ++want[std::get<2>(all[i])];
    const std::vector<int> got = numerics::SharedTopK(s, total, 0);
    EXPECT_EQ(got, want) << trial;
    EXPECT_EQ(std::accumulate(got.begin(), got.end(), 0), total);
  }
}

HeadStore MakeHead(int n, int d = 4) {
  HeadStore h(d, GgmlType::F32);
  std::vector<float> z(d, 0.f);
  for (int i = 0; i < n; ++i) h.Append(z.data(), z.data(), i, 0.f);
  return h;
}

TEST(KvzipPolicy, SharesOneBudgetOverHandMadeHeads) {
  // 2 layers x 2 heads of 6 entries at r = 1/3: 2 per head uniformly, 8 in all.
  KvCache cache(2, 2, 4);
  StatsNeeds needs;
  AttentionStats stats(2, 2, 1, 4, needs);
  const std::vector<std::vector<float>> mp = {
      {0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.4f},   // (0, 0): a head the reconstruction leans on
      {0.1f, 0.0f, 0.0f, 0.0f, 0.0f, 0.05f},  // (0, 1)
      {0.3f, 0.2f, 0.65f, 0.0f, 0.0f, 0.0f},  // (1, 0)
      {0.0f, 0.0f, 0.0f, 0.0f, 0.55f, 0.0f}}; // (1, 1)
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) {
      cache.head(l, h) = MakeHead(6);
      stats.head(l, h).max_prob = mp[l * 2 + h];
    }
  auto pol = MakePolicy("kvzip", {});
  ASSERT_TRUE(pol.ok());
  CompressionTarget t{1.0 / 3, true, 0, 6, 2, 2, &stats, &cache};
  ASSERT_TRUE(pol.value()->Prepare(t).ok());
  // Floor 1 each (0.9, 0.1, 0.65, 0.55), then the 4 best of the rest: 0.8, 0.7, 0.6, 0.5.
  EXPECT_EQ(pol.value()->HeadBudget(0, 0, 2), 5);
  EXPECT_EQ(pol.value()->HeadBudget(0, 1, 2), 1);
  EXPECT_EQ(pol.value()->HeadBudget(1, 0, 2), 1);
  EXPECT_EQ(pol.value()->HeadBudget(1, 1, 2), 1);
  PolicyContext ctx;
  ctx.store = &cache.head(1, 0);
  ctx.stats = &stats.head(1, 0);
  ctx.budget = 1;
  EXPECT_EQ(pol.value()->Compress(ctx).keep, (std::vector<int>{2}));
  ctx.store = &cache.head(0, 0);
  ctx.stats = &stats.head(0, 0);
  ctx.budget = 5;
  EXPECT_EQ(pol.value()->Compress(ctx).keep, (std::vector<int>{0, 1, 2, 3, 4}));
  // --kvzip-per-head: the uniform share.
  auto fixed = MakePolicy("kvzip", {{"kvzip-per-head", 1}});
  ASSERT_TRUE(fixed.ok());
  ASSERT_TRUE(fixed.value()->Prepare(t).ok());
  EXPECT_EQ(fixed.value()->HeadBudget(0, 0, 2), 2);
  EXPECT_EQ(fixed.value()->HeadBudget(1, 1, 2), 2);
}

}  // namespace
}  // namespace kvtrim::kv
