// The budget module (kv/budget.h): the target as entries, each allocator on
// hand-worked cases (totals, floors, ties, a head with all the mass) and the
// two top-k allocators against a brute-force ranking of every entry.
#include "kv/budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <numeric>
#include <random>
#include <tuple>

namespace kvtrim::kv::budget {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

int Sum(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

TEST(Budget, TheTargetAsEntries) {
  EXPECT_EQ(Uniform({0.3, 0}, 10), 3);     // 0.3 * 10 lands on 3 in decimal, 3.0000000000000004 in binary
  EXPECT_EQ(Uniform({0.25, 0}, 10), 3);    // ceil(2.5)
  EXPECT_EQ(Uniform({0.1, 0}, 1000), 100);
  EXPECT_EQ(Uniform({0.1, 64}, 1000), 64);  // a token budget wins over the ratio
  EXPECT_EQ(Uniform({1.0, 0}, 7), 7);
  EXPECT_DOUBLE_EQ(Ratio({0.1, 0}, 1000), 0.1);
  EXPECT_DOUBLE_EQ(Ratio({0.1, 250}, 1000), 0.25);
  EXPECT_DOUBLE_EQ(Ratio({0.1, 5000}, 1000), 1.0);  // never above 1
  EXPECT_DOUBLE_EQ(Ratio({0.1, 5}, 0), 1.0);        // an empty sequence: n taken as 1
}

TEST(Budget, UniformHeadsWithFloorsAndTheWholeSequence) {
  const Spec uniform;
  // r n = 3 of 10, two layers of two heads: 3 each, 12 in all.
  EXPECT_EQ(HeadBudgets(uniform, 3, 10, 2, 2, 1), (std::vector<int>{3, 3, 3, 3}));
  // What the policy protects is a floor.
  EXPECT_EQ(HeadBudgets(uniform, 3, 10, 2, 2, 5), (std::vector<int>{5, 5, 5, 5}));
  // A zero budget still keeps one entry.
  EXPECT_EQ(HeadBudgets(uniform, 0, 10, 1, 2, 1), (std::vector<int>{1, 1}));
  // A budget covering the sequence compresses nothing (n, not the budget).
  EXPECT_EQ(HeadBudgets(uniform, 12, 10, 1, 2, 1), (std::vector<int>{10, 10}));
}

TEST(Budget, PyramidFallsLinearlyAndKeepsTheTotal) {
  Spec s;
  s.kind = Kind::kPyramid;
  s.pyramid_beta = 20;
  // B = 100, 5 layers: 195, 147.5, 100, 52.5, 5 (rounded half away from zero).
  const std::vector<int> want = {195, 148, 100, 53, 5};
  for (int l = 0; l < 5; ++l) EXPECT_EQ(LayerBudget(s, l, 5, 100), want[l]) << l;
  EXPECT_EQ(LayerBudget(s, 0, 1, 100), 100);  // one layer: nothing to slope
  const std::vector<int> b = HeadBudgets(s, 100, 1000, 5, 2, 1);
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ(b[l * 2], want[l]);
    EXPECT_EQ(b[l * 2 + 1], want[l]);
  }
  EXPECT_NEAR(Sum(b), 1000, 2);  // L * H * B up to rounding
  // beta 1: flat.
  s.pyramid_beta = 1;
  for (int l = 0; l < 5; ++l) EXPECT_EQ(LayerBudget(s, l, 5, 100), 100);
  // The last layer's floor: what the policy protects.
  s.pyramid_beta = 20;
  EXPECT_EQ(HeadBudgets(s, 100, 1000, 5, 1, 8)[4], 8);
}

TEST(Budget, CastesKeepWholeHeadsWhole) {
  Spec s;
  s.kind = Kind::kCastes;
  s.whole = {0, 1, 0, 0};
  s.caste_budget = 17;
  EXPECT_EQ(HeadBudgets(s, 3, 100, 2, 2, 1), (std::vector<int>{17, INT_MAX, 17, 17}));
  s.caste_budget = -1;  // no window solved: nothing is compressed
  EXPECT_EQ(HeadBudgets(s, 3, 100, 2, 2, 1), (std::vector<int>(4, INT_MAX)));
}

TEST(Budget, SharedCountsReplaceTheUniformShare) {
  Spec s;
  s.kind = Kind::kShared;
  const std::vector<int> counts = {5, 1, 1, 1};
  EXPECT_EQ(HeadBudgets(s, 2, 6, 2, 2, 1, &counts), counts);
  EXPECT_EQ(HeadBudgets(s, 2, 6, 2, 2, 1), (std::vector<int>{2, 2, 2, 2}));  // not computed: uniform
}

TEST(Budget, SharedTopKWithAHeadHoldingAllTheMass) {
  // Head 0 holds every non-zero score: after the floors of 1 it takes the rest.
  const std::vector<std::vector<double>> s = {{0.4, 0.3, 0.2, 0.1}, {0, 0, 0}, {0, 0}};
  EXPECT_EQ(SharedTopK(s, 6, 1), (std::vector<int>{4, 1, 1}));
  // Ties at zero go to the later entry, then the later head.
  EXPECT_EQ(SharedTopK(s, 6, 0), (std::vector<int>{4, 1, 1}));  // entry 2 (head 1) vs entry 1 (head 2): index wins
  EXPECT_EQ(SharedTopK(s, 5, 0), (std::vector<int>{4, 1, 0}));
  EXPECT_EQ(Sum(SharedTopK(s, 100, 0)), 9);
}

EntryScores Mass(std::vector<double> s) { return {s, std::vector<bool>(s.size(), false), true}; }

// Brute force for AdaKV without floors: every entry of every head ranked by
// (normalised score desc, entry desc, head asc), the first heads * b counted.
std::vector<int> BruteAdaptive(const std::vector<EntryScores>& heads, int b) {
  std::vector<std::tuple<double, int, int>> all;  // (-score, -entry, head): ascending = better first
  for (int h = 0; h < static_cast<int>(heads.size()); ++h) {
    double sum = 0;
    for (double x : heads[h].score) sum += x;
    for (int i = 0; i < static_cast<int>(heads[h].score.size()); ++i)
      all.emplace_back(-(sum > 0 ? heads[h].score[i] / sum : 1.0 / heads[h].score.size()), -i, h);
  }
  std::sort(all.begin(), all.end());
  std::vector<int> c(heads.size(), 0);
  const size_t take = std::min(all.size(), heads.size() * static_cast<size_t>(b));
  for (size_t k = 0; k < take; ++k) ++c[std::get<2>(all[k])];
  return c;
}

TEST(Budget, AdaptiveIsTheBruteForceTopKOfNormalisedScores) {
  std::mt19937 g(11);
  std::uniform_int_distribution<int> len(1, 30), q(0, 4);  // coarse: many ties
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<EntryScores> heads(4);
    for (int h = 0; h < 2; ++h) {
      std::vector<double> s(len(g));
      for (double& x : s) x = q(g);
      heads[h] = Mass(s);
    }
    heads[2] = heads[0], heads[3] = heads[1];  // copies: ties across heads everywhere
    const int b = 1 + trial % 9;
    EXPECT_EQ(AdaptiveHeadBudgets(heads, b, 0.0), BruteAdaptive(heads, b)) << trial;
  }
}

TEST(Budget, AdaptiveFloorsAndAHeadWithAllTheMass) {
  // b = 4, 3 heads: T = 12. Head 0 has all the mass.
  const std::vector<EntryScores> heads = {Mass({1, 1, 1, 1, 1, 1, 1, 1, 1, 1}), Mass(std::vector<double>(10, 0)),
                                          Mass(std::vector<double>(10, 0))};
  // Without a floor the zero heads normalise to 1/10 each, head 0 to 1/10
  // too: a tie everywhere, broken by the newer entry then the lower head.
  EXPECT_EQ(Sum(AdaptiveHeadBudgets(heads, 4, 0.0)), 12);
  // Ties across heads: the newer entry, then the lower head. Head 2 (one
  // entry: 1.0) first, then 0.25 at entries 3, 3, 2, 2, 1 of heads 0, 1, 0, 1, 0.
  EXPECT_EQ(AdaptiveHeadBudgets({Mass({1, 1, 1, 1}), Mass({1, 1, 1, 1}), Mass({5})}, 2, 0.0),
            (std::vector<int>{3, 2, 1}));
  // With min share 1/2: floors of 2 each, the other 6 by score.
  const std::vector<int> f = AdaptiveHeadBudgets(heads, 4, 0.5);
  EXPECT_EQ(Sum(f), 12);
  for (int x : f) EXPECT_GE(x, 2);
  // A head with real mass against heads with a little: it takes every free place.
  const std::vector<EntryScores> skew = {Mass({9, 9, 9, 9, 9, 9}), Mass({1, 0, 0, 0, 0, 0}), Mass({1, 0, 0, 0, 0, 0})};
  EXPECT_EQ(AdaptiveHeadBudgets(skew, 2, 0.5), (std::vector<int>{4, 1, 1}));
  // Floors beyond the total stand (protected entries are never dropped).
  std::vector<EntryScores> prot = {Mass({1, 1, 1}), Mass({1, 1, 1})};
  prot[0].prot = {true, true, true};
  EXPECT_EQ(AdaptiveHeadBudgets(prot, 1, 0.0), (std::vector<int>{3, 0}));
}

TEST(Budget, ProfileUnitsKeepTheTotal) {
  // Units 3:1 over two heads at base 10: 15 and 5, 20 in all.
  EXPECT_EQ(DistributeBudget({3, 1}, 10, 100, 1), (std::vector<int>{15, 5}));
  // Largest remainder: 1:1:1 at base 10 is exact; 2:1 at base 5 is 6.67 / 3.33 -> 7, 3.
  EXPECT_EQ(DistributeBudget({2, 1}, 5, 100, 1), (std::vector<int>{7, 3}));
  // Floors from the largest, the cap at n to the smallest.
  EXPECT_EQ(DistributeBudget({7, 1}, 4, 100, 2), (std::vector<int>{6, 2}));
  EXPECT_EQ(DistributeBudget({7, 1}, 40, 50, 1), (std::vector<int>{50, 30}));
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv::budget
