// Attention Matching's reference queries (AmReferenceQueries): which rows
// of the prefill's and the repeat pass's queries the fit reads, and the
// sample above --am-max-queries. Every row is made recognisable (its first
// coordinate is its index, negative for the prefill's), so the test reads
// back where each chosen row came from.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kv/policies/am_fit.h"
#include "kv/policy.h"
#include "kv/stats.h"
#include "head_reference.h"
#include "test_util.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

constexpr int kD = 4;

struct Rows {
  HeadStore store;
  HeadStats stats;
};

// A head of 8 entries, n_own prefill rows (first coordinate -1 - i) and
// n_rep repeat rows (first coordinate i).
Rows MakeRows(int n_own, int n_rep) {
  Rows r{test::HeadFromRows(test::GaussianMatrix(8, kD, 1), test::GaussianMatrix(8, kD, 2)), {}};
  for (int i = 0; i < n_own; ++i)
    for (int k = 0; k < kD; ++k) r.stats.q_rot.push_back(k == 0 ? -1.f - i : 0.5f);
  for (int i = 0; i < n_rep; ++i)
    for (int k = 0; k < kD; ++k) r.stats.q_repeat.push_back(k == 0 ? static_cast<float>(i) : 0.25f);
  return r;
}

// The first coordinate of each chosen row, unscaled (AmReferenceQueries
// scales by 1/sqrt(d)).
std::vector<int> Origins(const Rows& r, const AmConfig& c, const AttentionStats* group = nullptr,
                         int64_t chunk_from = -1) {
  PolicyContext ctx;
  ctx.chunk_from = chunk_from;  // >= 0: a chunk of a longer prompt
  ctx.store = &r.store;
  ctx.stats = &r.stats;
  ctx.all_stats = group;  // its group size G (none: 1)
  const Eigen::MatrixXf Q = AmReferenceQueries(ctx, c);
  std::vector<int> o;
  for (int i = 0; i < Q.rows(); ++i) o.push_back(static_cast<int>(std::lround(Q(i, 0) * std::sqrt(double(kD)))));
  return o;
}

AmConfig Config(bool repeat_only, int cap, uint64_t seed = 0) {
  AmConfig c;
  c.repeat = true;
  c.repeat_only = repeat_only;
  c.max_queries = cap;
  c.seed = seed;
  return c;
}

TEST(AmQueries, RepeatOnlyReadsTheRepeatPassAlone) {
  const Rows r = MakeRows(30, 12);
  std::vector<int> all(12);
  for (int i = 0; i < 12; ++i) all[i] = i;
  EXPECT_EQ(Origins(r, Config(true, 100)), all);  // under the cap: every repeat row, in order, no prefill row
  const std::vector<int> both = Origins(r, Config(false, 100));  // --am-queries 1: the prefill's then the repeat's
  ASSERT_EQ(both.size(), 42u);
  EXPECT_EQ(both.front(), -1);
  EXPECT_EQ(both[30], 0);
}

TEST(AmQueries, RepeatOnlyFallsBackToThePrefillWithoutAPass) {
  const Rows r = MakeRows(5, 0);
  EXPECT_EQ(Origins(r, Config(true, 100)), (std::vector<int>{-1, -2, -3, -4, -5}));
}

// Above the cap, one row from each of max_queries equal runs: row i of the
// sample lies in [i n / m, (i + 1) n / m), so every stretch of the repeated
// text is read; seeded.
TEST(AmQueries, RepeatOnlySampleTakesOneRowARun) {
  const int n = 1000, m = 64;
  const Rows r = MakeRows(50, n);
  for (uint64_t seed : {0ull, 1ull, 7ull}) {
    const std::vector<int> o = Origins(r, Config(true, m, seed));
    ASSERT_EQ(static_cast<int>(o.size()), m);
    for (int i = 0; i < m; ++i) {
      EXPECT_GE(o[i], i * n / m) << "row " << i;
      EXPECT_LT(o[i], (i + 1) * n / m) << "row " << i;
    }
  }
  EXPECT_EQ(Origins(r, Config(true, m, 3)), Origins(r, Config(true, m, 3)));
  EXPECT_NE(Origins(r, Config(true, m, 3)), Origins(r, Config(true, m, 4)));
  // Not always a run's first row: the draw is spread over each run.
  int not_first = 0;
  const std::vector<int> o3 = Origins(r, Config(true, m, 3));
  for (int i = 0; i < m; ++i) not_first += o3[i] != i * n / m;
  EXPECT_GT(not_first, m / 2);
}

// With G query heads a KV head, a repeated token's G rows are one run: at
// most one row a token, drawn from the token's heads.
TEST(AmQueries, RepeatOnlyReadsOneQueryHeadAToken) {
  const AttentionStats g3(1, 1, 3, kD, StatsNeeds{});
  const Rows r = MakeRows(10, 30);  // 10 tokens x 3 heads
  for (uint64_t seed : {0ull, 5ull}) {
    const std::vector<int> o = Origins(r, Config(true, 100, seed), &g3);
    ASSERT_EQ(o.size(), 10u);
    for (int i = 0; i < 10; ++i) {
      EXPECT_GE(o[i], 3 * i);
      EXPECT_LT(o[i], 3 * i + 3);
    }
  }
  EXPECT_EQ(Origins(r, Config(true, 4), &g3).size(), 4u);  // the cap still bounds it
  EXPECT_EQ(Origins(r, Config(false, 100), &g3).size(), 40u);  // --am-queries 1: every row
}

// --am-query-pick 1: a token's row is the largest of its G rows (here the
// row whose second coordinate is 100, placed at head i % 3 of token i),
// whatever the seed; above the cap, the largest of each run.
TEST(AmQueries, RepeatOnlyCanPickTheLargestQueryAToken) {
  const AttentionStats g3(1, 1, 3, kD, StatsNeeds{});
  Rows r = MakeRows(10, 30);  // 10 tokens x 3 heads
  for (int j = 0; j < 30; ++j) r.stats.q_repeat[static_cast<size_t>(j) * kD + 1] = j % 3 == (j / 3) % 3 ? 100.f : 0.25f;
  AmConfig c = Config(true, 100);
  c.pick = 1;
  for (uint64_t seed : {0ull, 5ull, 9ull}) {
    c.seed = seed;
    const std::vector<int> o = Origins(r, c, &g3);
    ASSERT_EQ(o.size(), 10u);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(o[i], 3 * i + i % 3) << "token " << i;
  }
  c.max_queries = 5;  // runs of two tokens (six rows): the run's largest is its later token's big row
  const std::vector<int> o = Origins(r, c, &g3);
  ASSERT_EQ(o.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(o[i], 3 * (2 * i + 1) + (2 * i + 1) % 3) << "run " << i;
}

// --am-prefill-tail T: after the repeat's rows, the prefill's rows of the
// last T tokens compacted (all G heads' rows), in order.
TEST(AmQueries, RepeatOnlyCanAddThePrefillRowsOfTheLastTokens) {
  const AttentionStats g3(1, 1, 3, kD, StatsNeeds{});
  const Rows r = MakeRows(30, 12);  // the prefill: 10 tokens x 3 heads; the repeat: 4 tokens x 3 heads
  AmConfig c = Config(true, 100);
  c.prefill_tail = 2;
  const std::vector<int> o = Origins(r, c, &g3);
  ASSERT_EQ(o.size(), 4u + 6u);
  for (int i = 0; i < 4; ++i) EXPECT_GE(o[i], 0);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(o[4 + i], -25 - i);  // prefill rows 24..29
  c.prefill_tail = 50;  // more than the block has: every prefill row
  EXPECT_EQ(Origins(r, c, &g3).size(), 4u + 30u);
}

// --am-prefill-mix F: after the repeat's rows, the prefill's picked as
// they are (the largest of a run), from F times as many runs;
// --am-min-queries tops a prompt compacted as one block up to that many.
TEST(AmQueries, RepeatOnlyCanMixInThePrefillRows) {
  const AttentionStats g3(1, 1, 3, kD, StatsNeeds{});
  Rows r = MakeRows(30, 30);  // 10 tokens x 3 heads each
  for (int j = 0; j < 30; ++j) {
    r.stats.q_repeat[static_cast<size_t>(j) * kD + 1] = j % 3 == (j / 3) % 3 ? 100.f : 0.25f;
    r.stats.q_rot[static_cast<size_t>(j) * kD + 1] = j % 3 == (j / 3 + 1) % 3 ? 100.f : 0.5f;
  }
  AmConfig c = Config(true, 100);
  c.pick = 1;
  c.prefill_mix = 1;  // one of each a token
  std::vector<int> o = Origins(r, c, &g3);
  ASSERT_EQ(o.size(), 20u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(o[i], 3 * i + i % 3) << "token " << i;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(o[10 + i], -1 - (3 * i + (i + 1) % 3)) << "prefill token " << i;
  c.prefill_mix = 0.5;  // five runs of two prefill tokens: the later token's big row (its first coordinate larger)
  o = Origins(r, c, &g3);
  ASSERT_EQ(o.size(), 15u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(o[10 + i], -1 - (6 * i + 3 + (2 * i + 2) % 3)) << "prefill run " << i;
  c.prefill_mix = 0;
  c.min_queries = 15;  // ten repeat rows: five prefill runs bring them to 15, the same rows as 0.5
  EXPECT_EQ(Origins(r, c, &g3), o);
  EXPECT_EQ(Origins(r, c, &g3, 512).size(), 10u);  // a chunk of a longer prompt: no top-up
  c.prefill_mix = 0.5;  // asked for: there too
  EXPECT_EQ(Origins(r, c, &g3, 512), o);
  c.prefill_mix = 0;
  c.min_queries = 40;  // at most as many again
  EXPECT_EQ(Origins(r, c, &g3).size(), 20u);
  c.min_queries = 11;  // one short: one run of all ten prefill tokens
  EXPECT_EQ(Origins(r, c, &g3).size(), 11u);
  c.min_queries = 10;  // enough repeat rows: none added
  EXPECT_EQ(Origins(r, c, &g3).size(), 10u);
  c.min_queries = 0;
  c.prefill_mix = 1;  // a prefill of four tokens: each one's largest row (the last, by its first coordinate)
  o = Origins(MakeRows(12, 30), c, &g3);
  ASSERT_EQ(o.size(), 14u);
  for (int t = 0; t < 4; ++t) EXPECT_EQ(o[10 + t], -3 - 3 * t) << "prefill token " << t;
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
