// Each policy on hand-built metadata and statistics keeps exactly the
// entries computed by hand; statistics collection on hand-made rows.
#include <gtest/gtest.h>

#include <numeric>

#include "tap_values.h"
#include "policy_keep.h"
#include "kv/policy.h"
#include "kv/stats.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

HeadStore MakeHead(int n, int d = 8) {
  HeadStore h(d, GgmlType::F32);
  std::vector<float> z(d, 0.f);
  for (int i = 0; i < n; ++i) h.Append(z.data(), z.data(), i, 0.f);
  return h;
}

using test::KeepOf;

std::vector<int> Range(int a, int b) {
  std::vector<int> r(b - a);
  std::iota(r.begin(), r.end(), a);
  return r;
}

std::vector<int> Cat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Policies, WindowKeepsSinksAndRecent) {
  HeadStore h = MakeHead(20);
  EXPECT_EQ(KeepOf("window", {}, h, nullptr, 10), Cat(Range(0, 4), Range(14, 20)));
  EXPECT_EQ(KeepOf("window", {{"sinks", 1}}, h, nullptr, 5), Cat({0}, Range(16, 20)));
}

TEST(Policies, RandomKeepsSinksPlusSeededSample) {
  HeadStore h = MakeHead(50);
  auto a = KeepOf("random", {}, h, nullptr, 12);
  auto b = KeepOf("random", {}, h, nullptr, 12);
  auto c = KeepOf("random", {{"kv-seed", 9}}, h, nullptr, 12);
  ASSERT_EQ(a.size(), 12u);
  EXPECT_EQ(std::vector<int>(a.begin(), a.begin() + 4), Range(0, 4));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Policies, LruKeepsMostRecentlyAccessed) {
  HeadStore h = MakeHead(8);
  HeadStats st;
  taptest::PlantLastAccess(st, {5, 1, 7, 3, 7, 0, 2, 6});
  EXPECT_EQ(KeepOf("lru", {}, h, &st, 4), (std::vector<int>{0, 2, 4, 7}));
  // Sinks {0, 1} and the newest entry (7, always kept) leave one slot: 2 and 4
  // tie at step 7, the more recent (4) wins.
  EXPECT_EQ(KeepOf("lru", {{"sinks", 2}}, h, &st, 4), (std::vector<int>{0, 1, 4, 7}));
}

TEST(Policies, H2oHeavyHittersRecentAndSinkGuard) {
  HeadStore h = MakeHead(16);
  HeadStats st;
  std::vector<float> mass(16, 0.5f);
  mass[5] = 9, mass[8] = 7, mass[10] = 5, mass[3] = 4;
  taptest::PlantMass(st, mass);
  // budget 8: sinks {0,1}; remaining 6 split 3 heavy / 3 recent.
  EXPECT_EQ(KeepOf("h2o", {{"sink-guard", 2}}, h, &st, 8), (std::vector<int>{0, 1, 5, 8, 10, 13, 14, 15}));
  // heavy-ratio 1: no recent window, heavy {5, 8, 10, 3} + sinks 0..3 (3 is a sink).
  EXPECT_EQ(KeepOf("h2o", {{"sink-guard", 4}, {"heavy-ratio", 1}}, h, &st, 8), (std::vector<int>{0, 1, 2, 3, 5, 8, 10, 15}));
}

TEST(Policies, SnapkvPoolsWindowVotes) {
  HeadStore h = MakeHead(20);
  HeadStats st;
  std::vector<float> obs(20, 0.f);
  obs[6] = 3, obs[12] = 6;
  obs[18] = 100;  // inside the window: not a candidate, kept anyway
  taptest::PlantWindowMass(st, 4, obs);
  // kernel 3: pooled 1 at 5,6,7 and 2 at 11,12,13; top 4 of the prefix = 11,12,13 and 7 (tie -> recent).
  EXPECT_EQ(KeepOf("snapkv", {{"obs-window", 4}, {"pool-kernel", 3}}, h, &st, 8),
            (std::vector<int>{7, 11, 12, 13, 16, 17, 18, 19}));
}

TEST(Policies, PyramidkvLayerBudgetsFallLinearly) {
  auto p = MakePolicy("pyramidkv", {});
  ASSERT_TRUE(p.ok());
  // B = 100, 5 layers, beta 20: 195, 147.5, 100, 52.5, 5 (rounded half away from zero).
  std::vector<int> want = {195, 148, 100, 53, 5};
  int total = 0;
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ(budget::LayerBudget(p.value()->traits().budget, l, 5, 100), want[l]);
    total += want[l];
  }
  EXPECT_NEAR(total, 500, 1);  // L * B up to rounding
  HeadStore h = MakeHead(20);
  HeadStats st;
  std::vector<float> obs(20, 0.f);
  obs[2] = 9;
  taptest::PlantWindowMass(st, 4, obs);
  EXPECT_EQ(KeepOf("pyramidkv", {{"obs-window", 4}, {"pool-kernel", 1}}, h, &st, 5), (std::vector<int>{2, 16, 17, 18, 19}));
}

// Feeds one head's attention rows (G = 1) through AttentionStats as decode steps.
TEST(Stats, CollectsMassAccessAndHistory) {
  StatsNeeds needs;
  needs.taps = {kMassTap, kLastAccessTap, {kHistoryTap, 3}};
  AttentionStats stats(1, 1, 1, 8, needs);
  // Steps at positions 4, 5, 6, 7 over 4 entries; threshold 1/4.
  const float rows[4][4] = {{0.7f, 0.1f, 0.1f, 0.1f},
                            {0.1f, 0.6f, 0.2f, 0.1f},
                            {0.3f, 0.3f, 0.3f, 0.1f},
                            {0.05f, 0.05f, 0.3f, 0.6f}};
  for (int s = 0; s < 4; ++s) {
    stats.OnBatch(4 + s, 1);
    stats.OnProbs(0, 0, 0, 0, rows[s], 4);
  }
  const HeadStats& h = stats.head(0, 0);
  EXPECT_NEAR(taptest::Mass(h)[0], 1.15f, 1e-6);
  EXPECT_NEAR(taptest::Mass(h)[3], 0.9f, 1e-6);
  EXPECT_EQ(taptest::LastAccess(h), (std::vector<int64_t>{6, 6, 7, 7}));
  // History over the last 3 steps (positions 5, 6, 7).
  EXPECT_EQ(taptest::HistoryCount(stats, 0, 0, 0), 1);
  EXPECT_EQ(taptest::HistoryCount(stats, 0, 0, 1), 2);
  EXPECT_EQ(taptest::HistoryCount(stats, 0, 0, 2), 2);
  EXPECT_EQ(taptest::HistoryCount(stats, 0, 0, 3), 1);
  // The statistics mirror the plan: keep entries 1 and 3, then one new entry.
  AttentionStats copy = stats;
  copy.Retain(0, 0, {1, 3});
  EXPECT_EQ(taptest::LastAccess(copy.head(0, 0)).size(), 2u);
  EXPECT_EQ(taptest::LastAccess(copy.head(0, 0)), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(taptest::HistoryCount(copy, 0, 0, 1), 1);
  stats.Rebuild(0, 0, {{1}, {3}, {}});
  EXPECT_EQ(taptest::LastAccess(h).size(), 3u);
  EXPECT_EQ(taptest::LastAccess(h), (std::vector<int64_t>{6, 7, -1}));
  EXPECT_EQ(taptest::HistoryCount(stats, 0, 0, 1), 1);
}

TEST(Stats, GroupMaxAndPrefillMass) {
  StatsNeeds needs;
  needs.taps = {kMassTap, kLastAccessTap};
  AttentionStats stats(1, 1, 2, 8, needs);
  stats.OnBatch(0, 2);
  const float a0[1] = {1.f};
  const float a1[2] = {0.9f, 0.1f}, b1[2] = {0.6f, 0.4f};
  stats.OnProbs(0, 0, 0, 0, a0, 1);
  stats.OnProbs(0, 0, 0, 1, a0, 1);
  stats.OnProbs(0, 0, 1, 0, a1, 2);
  stats.OnProbs(0, 0, 1, 1, b1, 2);
  const HeadStats& h = stats.head(0, 0);
  EXPECT_NEAR(taptest::Mass(h)[0], 3.5f, 1e-6);  // column sums over queries and group heads
  EXPECT_NEAR(taptest::Mass(h)[1], 0.5f, 1e-6);
  EXPECT_EQ(taptest::LastAccess(h), (std::vector<int64_t>{1, -1}));  // max 0.4 < 1/2 for entry 1
}

TEST(Policies, ScissorhandsCountsAndBatchEviction) {
  StatsNeeds needs;
  needs.taps = {{kHistoryTap, 4}};
  AttentionStats stats(1, 1, 1, 8, needs);
  HeadStore h = MakeHead(10);
  // 4 steps over 10 entries (threshold 0.1): entries 5 and 6 important 4 and 3 times.
  for (int s = 0; s < 4; ++s) {
    std::vector<float> p(10, 0.01f);
    p[5] = 0.5f;
    if (s > 0) p[6] = 0.3f;
    if (s == 3) p[2] = 0.12f;
    stats.OnBatch(10 + s, 1);
    stats.OnProbs(0, 0, 0, 0, p.data(), 10);
  }
  Params pr = {{"sinks", 1}, {"recent", 2}};
  // Prefill-style: budget 6 = sink 0 + recent {8, 9} + top 3 by count {5, 6, 2}.
  EXPECT_EQ(KeepOf("scissorhands", pr, h, &stats.head(0, 0), 6, Phase::kPrefill, &stats),
            (std::vector<int>{0, 2, 5, 6, 8, 9}));
  // Decode: over budget 8 -> evict a batch: keep 8 - ceil(0.5*8) + 1 = 5.
  pr["evict-batch"] = 0.5;
  EXPECT_EQ(KeepOf("scissorhands", pr, h, &stats.head(0, 0), 8, Phase::kDecode, &stats),
            (std::vector<int>{0, 5, 6, 8, 9}));
}

TEST(Policies, RegistryErrors) {
  EXPECT_NE(MakePolicy("nope", {}).error().message.find("unknown KV policy 'nope'"), std::string::npos);
  EXPECT_NE(MakePolicy("window", {{"heavy-ratio", 0.3}}).error().message.find("does not apply"), std::string::npos);
  EXPECT_NE(MakePolicy("h2o", {{"heavy-ratio", 1.5}}).error().message.find("outside"), std::string::npos);
  for (const auto& p : Registry()) EXPECT_TRUE(MakePolicy(p.name, {}).ok()) << p.name;
}

// Counter rates are a property of the registry entry (PolicyTraits::rates),
// read by the CLI without naming a counter.
TEST(PolicyTraits, CounterRatesFromTheRegistry) {
  const std::vector<std::pair<std::string, int64_t>> c = {{"merges", 200}, {"fallbacks", 3}, {"rounds", 7}};
  for (const char* name : {"kvslimmer", "merge-mean"}) {
    const auto r = CounterRates(name, c);
    ASSERT_EQ(r.size(), 1u) << name;
    EXPECT_EQ(r[0].first, "fallback rate");
    EXPECT_DOUBLE_EQ(r[0].second, 1.5);
  }
  EXPECT_TRUE(CounterRates("h2o", c).empty());                                  // no rates declared
  EXPECT_TRUE(CounterRates("kvslimmer", {{"merges", 0}, {"fallbacks", 0}}).empty());  // 0/0 left out
  EXPECT_TRUE(CounterRates("nosuch", c).empty());
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
