// Applying plans: merges follow METHODS.md section 0 (key from the given
// weights, cardinality-weighted mean value, b = log of the summed
// cardinality), new entries are placed by position, statistics follow, and
// malformed plans are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tap_values.h"
#include "kernels/attention.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/plan.h"
#include "kv/stats.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::vector<float> Vec(std::initializer_list<float> x) { return x; }

TEST(Plan, MergingTwoIdenticalKeysReturnsThatKey) {
  HeadStore h(4, GgmlType::F32);
  const auto k = Vec({0.5f, -1.f, 2.f, 0.25f});
  h.Append(k.data(), Vec({1, 2, 3, 4}).data(), 0, 0.f);
  h.Append(k.data(), Vec({3, 2, 1, 0}).data(), 1, 0.f);
  h.Append(Vec({9, 9, 9, 9}).data(), Vec({7, 7, 7, 7}).data(), 2, 0.f);
  HeadStore before = h;
  Plan p = Plan::Keep({2});
  p.merge.push_back({{0, 1}, {0.5f, 0.5f}});
  auto from = h.Apply(p);
  ASSERT_EQ(h.size(), 2);
  std::vector<float> got(4);
  h.ReadKey(0, got.data());
  EXPECT_EQ(got, k);
  h.ReadValue(0, got.data());
  EXPECT_EQ(got, Vec({2, 2, 2, 2}));  // mean of the two values
  EXPECT_NEAR(h.logw(0), std::log(2.0), 1e-7);
  EXPECT_EQ(h.pos(1), 2);  // merged entry (mean position 0.5) comes before entry 2
  EXPECT_EQ(from, (std::vector<std::vector<int>>{{0, 1}, {2}}));
  // Attention is unchanged: the merged entry stands for both tokens.
  const auto q = Vec({0.3f, 0.1f, -0.2f, 0.7f});
  std::vector<float> a(4), b(4), s1(3), s2(2);
  kernels::AttendOne(before.View(), q.data(), 1, 0.5f, a.data(), s1.data());
  kernels::AttendOne(h.View(), q.data(), 1, 0.5f, b.data(), s2.data());
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
}

TEST(Plan, MergeWeighsByCardinality) {
  HeadStore h(2, GgmlType::F32);
  h.Append(Vec({1, 0}).data(), Vec({10, 0}).data(), 4, std::log(2.f));   // stands for 2 tokens
  h.Append(Vec({0, 1}).data(), Vec({0, 10}).data(), 10, std::log(3.f));  // stands for 3 tokens
  Plan p = Plan::Keep({});
  p.merge.push_back({{0, 1}, {}});  // default key weights: cardinalities
  h.Apply(p);
  ASSERT_EQ(h.size(), 1);
  std::vector<float> k(2), v(2);
  h.ReadKey(0, k.data());
  h.ReadValue(0, v.data());
  EXPECT_NEAR(k[0], 0.4f, 1e-6);
  EXPECT_NEAR(k[1], 0.6f, 1e-6);
  EXPECT_NEAR(v[0], 4.f, 1e-5);
  EXPECT_NEAR(v[1], 6.f, 1e-5);
  EXPECT_NEAR(h.logw(0), std::log(5.0), 1e-6);
  EXPECT_EQ(h.pos(0), 8);  // (2*4 + 3*10) / 5 = 7.6 -> 8
}

TEST(Plan, SyntheticEntriesArePlacedByPosition) {
  HeadStore h(2, GgmlType::Q8_0);
  for (int i = 0; i < 4; ++i) h.Append(Vec({float(i), 1}).data(), Vec({1, float(i)}).data(), i * 10, 0.f);
  Plan p = Plan::Keep({0, 3});
  p.add.push_back({Vec({5, 5}), Vec({6, 6}), 15, std::log(2.f)});
  auto from = h.Apply(p);
  ASSERT_EQ(h.size(), 3);
  EXPECT_EQ(h.positions(), (std::vector<int32_t>{0, 15, 30}));
  EXPECT_EQ(h.type(), GgmlType::Q8_0);
  EXPECT_TRUE(from[1].empty());
  EXPECT_NEAR(h.logw(1), std::log(2.0), 1e-7);
}

TEST(Plan, StatisticsFollowMerges) {
  StatsNeeds needs;
  needs.taps = {kMassTap, kLastAccessTap};
  AttentionStats st(1, 1, 1, 2, needs);
  const float p[3] = {0.5f, 0.3f, 0.2f};
  st.OnBatch(3, 1);
  st.OnProbs(0, 0, 0, 0, p, 3);
  st.Rebuild(0, 0, {{0, 1}, {2}, {}});
  const HeadStats& hs = st.head(0, 0);
  ASSERT_EQ(taptest::Mass(hs).size(), 3u);
  EXPECT_NEAR(taptest::Mass(hs)[0], 0.8f, 1e-6);
  EXPECT_NEAR(taptest::Mass(hs)[1], 0.2f, 1e-6);
  EXPECT_EQ(taptest::Mass(hs)[2], 0.f);
  EXPECT_EQ(taptest::LastAccess(hs), (std::vector<int64_t>{3, -1, -1}));  // 0.2 < 1/3: entry 2 not accessed
}

TEST(Plan, MalformedPlansAreRefused) {
  EXPECT_TRUE(ValidatePlan(Plan::Keep({0, 2}), 3, 4).ok());
  EXPECT_NE(ValidatePlan(Plan::Keep({2, 0}), 3, 4).message().find("out of order"), std::string::npos);
  EXPECT_NE(ValidatePlan(Plan::Keep({0, 3}), 3, 4).message().find("names entry 3 of 3"), std::string::npos);
  Plan p = Plan::Keep({0, 1});
  p.merge.push_back({{1, 2}, {}});
  EXPECT_NE(ValidatePlan(p, 3, 4).message().find("entry 1 twice"), std::string::npos);
  Plan q = Plan::Keep({});
  q.merge.push_back({{0, 1}, {1.f}});
  EXPECT_NE(ValidatePlan(q, 3, 4).message().find("1 key weights for 2"), std::string::npos);
  Plan r = Plan::Keep({});
  r.add.push_back({Vec({1, 2}), Vec({1, 2}), 0, 0.f});
  EXPECT_NE(ValidatePlan(r, 3, 4).message().find("head dimension"), std::string::npos);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
