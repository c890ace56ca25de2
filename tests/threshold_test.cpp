// Threshold eviction (--kv-threshold T): each head keeps the entries whose
// normalised score exceeds T times the head's mean and those the policy
// protects, after the prefill and at every decode step.
#include <gtest/gtest.h>

#include "kv/budget.h"
#include "kv/compressor.h"
#include "one_head.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

TEST(Threshold, HeadBudgetsCountTheSharesOverTheThreshold) {
  using budget::EntryScores;
  // Scores relative to the head's mean (share times n):
  const EntryScores peaked{{5, 3, 1, 1}, {false, false, false, false}, true};   // 2 1.2 .4 .4
  const EntryScores flat{{1, 1, 1, 1}, {false, false, false, false}, true};     // 1 each
  const EntryScores guarded{{1, 0, 0, 1}, {false, false, false, true}, true};   // 2 0 0 2, entry 3 protected
  const EntryScores shifted{{-3, -1, 1, -3}, {false, false, false, false}, false};  // 0 2 4 0 -> 0 4/3 8/3 0
  EXPECT_EQ(budget::ThresholdHeadBudgets({peaked, flat, guarded, shifted}, 0.8), (std::vector<int>{2, 4, 2, 2}));
  EXPECT_EQ(budget::ThresholdHeadBudgets({peaked, flat, guarded, shifted}, 0.2), (std::vector<int>{4, 4, 2, 2}));
  EXPECT_EQ(budget::ThresholdHeadBudgets({peaked, flat, guarded, shifted}, 1.5), (std::vector<int>{1, 1, 2, 1}));
  // A score equal to T times the mean is not over it; a head keeps at least one entry.
  EXPECT_EQ(budget::ThresholdHeadBudgets({flat}, 1.0), (std::vector<int>{1}));
  EXPECT_EQ(budget::ThresholdHeadBudgets({shifted}, 2.0), (std::vector<int>{1}));
  EXPECT_EQ(budget::ThresholdHeadBudgets({EntryScores{}}, 0.1), (std::vector<int>{0}));
}

// h2o ranking by mass alone (no recent share, no sinks) under threshold T.
test::OneHead OneHeadAt(double threshold) {
  KvOptions o;
  o.policy = "h2o";
  o.params = {{"heavy-ratio", 1}, {"sink-guard", 0}};
  o.threshold = threshold;
  return test::OneHead(o);
}

TEST(Threshold, PrefillAndDecodeKeepTheEntriesOverIt) {
  test::OneHead o = OneHeadAt(0.6);
  // Six prompt entries; only the last query's row carries mass on all of them.
  std::vector<std::vector<float>> rows;
  for (int t = 0; t < 5; ++t) rows.push_back(std::vector<float>(t + 1, 0.f));
  rows.push_back({0.40f, 0.05f, 0.30f, 0.02f, 0.03f, 0.20f});
  o.Chunk(0, rows);
  ASSERT_TRUE(o.comp->CompressPrefill(o.cache).ok());
  // Relative to the mean (x6): 2.4 .3 1.8 .12 .18 1.2: over .6 are 0, 2 and 5 (5 is also the newest, protected).
  EXPECT_EQ(o.Positions(), (std::vector<int>{0, 2, 5}));
  // A decode step: mass .9 .32 .23 and the new entry's .45 (x4 / 1.9: 1.89 .67 .48 .95).
  o.Chunk(6, {{0.50f, 0.02f, 0.03f, 0.45f}});
  ASSERT_TRUE(o.comp->AfterDecodeStep(o.cache).ok());
  EXPECT_EQ(o.Positions(), (std::vector<int>{0, 2, 6}));
  // A lower threshold keeps more of the same prompt: the total follows the scores, not a ratio.
  test::OneHead low = OneHeadAt(0.15);
  low.Chunk(0, rows);
  ASSERT_TRUE(low.comp->CompressPrefill(low.cache).ok());
  EXPECT_EQ(low.Positions(), (std::vector<int>{0, 1, 2, 4, 5}));
}

TEST(Threshold, RefusedWhereItCannotApply) {
  auto make = [](const std::string& policy, double t, const std::string& head_budget = "uniform") {
    KvOptions o;
    o.policy = policy;
    o.threshold = t;
    o.head_budget = head_budget;
    auto c = Compressor::Create(o, 1, 1, 1, 2);
    return c.ok() ? std::string() : c.error().message;
  };
  EXPECT_EQ(make("h2o", 0.01), "");
  EXPECT_EQ(make("kvzip", 0.01), "--kv-threshold: policy 'kvzip' allocates its own per-head budgets");
  EXPECT_NE(make("lru", 0.01).find("--kv-threshold needs a policy that scores entries"), std::string::npos);
  EXPECT_EQ(make("h2o", 0.01, "adaptive"), "--kv-threshold and --head-budget adaptive exclude each other");
  EXPECT_NE(make("h2o", -1).find("is outside (0, 1e6]"), std::string::npos);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
