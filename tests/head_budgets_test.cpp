// Nonuniform head budgets (METHODS.md section 4): the greedy unit moves
// against closed forms and an exhaustive optimum on true curves, the floor
// at the smallest measured share, 2% in units of 1/128, the search again at
// another ratio, and the conversion to entry budgets that sum to the
// uniform total.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "kv/budget.h"
#include "kvtrim/head_budgets.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using budget::DistributeBudget;

HeadSensitivity Curves(const std::vector<double>& scale, double r, double power) {
  HeadSensitivity s;
  s.ratios = DefaultRatioGrid(r);
  for (double a : scale) {
    std::vector<double> l;
    for (double x : s.ratios) l.push_back(a * std::pow(1.0 - x, power));
    s.loss.push_back(l);
  }
  return s;
}

TEST(HeadBudgets, GridAndInterpolation) {
  EXPECT_EQ(DefaultRatioGrid(0.1), (std::vector<double>{0.025, 0.05, 0.1, 0.2, 0.4}));
  EXPECT_EQ(DefaultRatioGrid(0.5), (std::vector<double>{0.125, 0.25, 0.5, 1.0}));
  HeadSensitivity s{{0.1, 0.2}, {{4.0, 2.0}}};
  EXPECT_DOUBLE_EQ(InterpolateLoss(s, 0, 0.05), 4.0);
  EXPECT_DOUBLE_EQ(InterpolateLoss(s, 0, 0.15), 3.0);
  EXPECT_DOUBLE_EQ(InterpolateLoss(s, 0, 0.6), 1.0);  // halfway from 0.2 (2.0) to 1 (0)
  EXPECT_DOUBLE_EQ(InterpolateLoss(s, 0, 1.0), 0.0);
}

TEST(HeadBudgets, IdenticalHeadsStayUniform) {
  auto u = SearchHeadBudgets(Curves({1, 1, 1, 1}, 0.25, 2), {0.25, 32, 1});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u.value(), (std::vector<int>{8, 8, 8, 8}));
}

TEST(HeadBudgets, LinearLossesMoveEverythingToTheSensitiveHead) {
  // Loss a_h (1 - x) is linear: every unit is worth a_h, so the sensitive
  // head takes all it can and the other keeps the smallest measured share
  // (0.125 of 32 units: 4, above the minimum of 2).
  HeadSensitivity s{{0.125, 0.25, 0.5, 1.0}, {}};
  for (double a : {10.0, 1.0}) {
    std::vector<double> l;
    for (double x : s.ratios) l.push_back(a * (1 - x));
    s.loss.push_back(l);
  }
  auto u = SearchHeadBudgets(s, {0.5, 32, 2});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u.value(), (std::vector<int>{28, 4}));
}

// True curves: measured at every unit share k / U, so no value the search
// reads is interpolated or extrapolated; the greedy moves against every
// allocation of the total.
TEST(HeadBudgets, ConvexLossesReachTheExhaustiveOptimumOnTrueCurves) {
  const int U = 16, H = 3, total = 12;  // r = 0.25
  const std::vector<double> a = {5.0, 1.0, 0.2};
  auto f = [&](int h, double x) { return a[h] * std::pow(1.0 - x, 3) + 0.05 * h * (1.0 - x); };
  HeadSensitivity s;
  for (int k = 1; k <= U; ++k) s.ratios.push_back(static_cast<double>(k) / U);
  s.loss.assign(H, {});
  for (int h = 0; h < H; ++h)
    for (double x : s.ratios) s.loss[h].push_back(f(h, x));
  auto u = SearchHeadBudgets(s, {0.25, U, 1});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(std::accumulate(u.value().begin(), u.value().end(), 0), total);
  auto truth = [&](const std::vector<int>& v) {  // the closed form itself, not the curves
    double t = 0;
    for (int h = 0; h < H; ++h) t += f(h, static_cast<double>(v[h]) / U);
    return t;
  };
  double best = 1e300;
  std::vector<int> arg;
  for (int x = 1; x <= U; ++x)
    for (int y = 1; y <= U && x + y < total; ++y)
      if (const int z = total - x - y; z >= 1 && z <= U && truth({x, y, z}) < best) best = truth({x, y, z}), arg = {x, y, z};
  EXPECT_EQ(u.value(), arg);
  EXPECT_NEAR(truth(u.value()), best, 1e-12);
  EXPECT_NE(u.value(), (std::vector<int>{4, 4, 4}));  // the optimum is not the uniform start
}

// Curves measured from 0.25 up: no head is drained below 0.25 even where the
// flat extension below the grid would make it look free, and a ratio below
// the grid cannot be searched.
TEST(HeadBudgets, NoHeadGoesBelowTheSmallestMeasuredShare) {
  HeadSensitivity s{{0.25, 0.5, 1.0}, {{0.01, 0.005, 0.0}, {9.0, 3.0, 0.0}, {8.0, 2.0, 0.0}}};
  auto u = SearchHeadBudgets(s, {0.5, 32, 1});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(std::accumulate(u.value().begin(), u.value().end(), 0), 48);
  EXPECT_EQ(u.value()[0], 8);  // ceil(0.25 * 32): the donor stops at the grid
  for (int x : u.value()) EXPECT_GE(x, 8);
  auto low = SearchHeadBudgets(s, {0.2, 32, 1});
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.error().code, ErrorCode::kUnreachable);
  EXPECT_NE(low.error().message.find("smallest measured ratio"), std::string::npos) << low.error().message;
}

// 2% of a head is 2.56 units of 1/128: heads get 2 or 3 units around it
// and the total is 2% of every head to within one unit.
TEST(HeadBudgets, TwoPercentIsExpressible) {
  const int H = 16;
  std::vector<double> scale;
  for (int h = 0; h < H; ++h) scale.push_back(0.1 + h);
  HeadSensitivity s = Curves(scale, 0.02, 2);
  s.ratios.push_back(1.0);
  for (auto& l : s.loss) l.push_back(0.0);
  const HeadBudgetOptions o{0.02, 128, 1};
  EXPECT_EQ(HeadBudgetOptions{}.units_per_head, 128);
  auto u = SearchHeadBudgets(s, o);
  ASSERT_TRUE(u.ok());
  const int sum = std::accumulate(u.value().begin(), u.value().end(), 0);
  EXPECT_EQ(sum, 41);  // round(0.02 * 128 * 16)
  EXPECT_NEAR(static_cast<double>(sum) / (128 * H), 0.02, 0.5 / 128);
  EXPECT_LT(u.value()[0], u.value()[H - 1]);  // the budget follows the sensitivity
  const std::vector<int> b = DistributeBudget(u.value(), 20, 1000, 1);  // 2% of 1,000 entries
  EXPECT_EQ(std::accumulate(b.begin(), b.end(), 0), 20 * H);
}

// Budgets stored at one ratio are searched again at another on the stored
// curves; below them, or without curves, the error says what to measure.
TEST(HeadBudgets, UnitsAtAnotherRatioAreSearchedAgain) {
  StoredHeadBudgets b;
  b.ratio = 0.1;
  b.units_per_head = 32;
  b.sensitivity = Curves({4, 2, 1, 0.5}, 0.1, 2);  // 0.025 .. 0.4
  b.units = SearchHeadBudgets(NonIncreasing(b.sensitivity), {0.1, 32, 1}).value();
  EXPECT_EQ(UnitsAtRatio(b, 0.1).value(), b.units);
  auto at = UnitsAtRatio(b, 0.05);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at.value(), SearchHeadBudgets(NonIncreasing(b.sensitivity), {0.05, 32, 1}).value());
  EXPECT_EQ(std::accumulate(at.value().begin(), at.value().end(), 0), static_cast<int>(std::lround(0.05 * 32 * 4)));
  auto below = UnitsAtRatio(b, 0.02);
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.error().code, ErrorCode::kUnreachable);
  b.sensitivity = {};
  auto bare = UnitsAtRatio(b, 0.05);
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.error().message.find("--head-budget-ratio 0.05"), std::string::npos) << bare.error().message;
}

TEST(HeadBudgets, BadInputsAreErrors) {
  EXPECT_FALSE(SearchHeadBudgets({{0.1}, {{1.0, 2.0}}}, {}).ok());   // shape
  EXPECT_FALSE(SearchHeadBudgets({{0.2, 0.1}, {{1.0, 2.0}}}, {}).ok());  // order
  auto low = SearchHeadBudgets(Curves({1, 1}, 0.01, 1), {0.01, 32, 1});  // 1 unit for 2 heads, minimum 1 each
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.error().code, ErrorCode::kUnreachable);
}

TEST(HeadBudgets, EntryBudgetsSumToTheUniformTotal) {
  const std::vector<int> units = {15, 5, 3, 1};  // mean 6
  auto b = DistributeBudget(units, 60, 1000, 4);
  EXPECT_EQ(std::accumulate(b.begin(), b.end(), 0), 240);
  EXPECT_EQ(b, (std::vector<int>{150, 50, 30, 10}));
  auto m = DistributeBudget(units, 6, 1000, 4);  // 15, 5, 3, 1 -> minima of 4 taken from the largest
  EXPECT_EQ(std::accumulate(m.begin(), m.end(), 0), 24);
  for (int x : m) EXPECT_GE(x, 4);
  EXPECT_EQ(m, (std::vector<int>{11, 5, 4, 4}));
  auto c = DistributeBudget(units, 60, 100, 1);  // capped at n = 100, excess to the smallest
  EXPECT_EQ(std::accumulate(c.begin(), c.end(), 0), 240);
  for (int x : c) EXPECT_LE(x, 100);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
