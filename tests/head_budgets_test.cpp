// Nonuniform head budgets (METHODS.md section 4): the greedy unit moves
// against closed forms and a brute-force optimum, and the conversion to
// entry budgets that sum to the uniform total.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "kv/budget.h"
#include "kv/head_budgets.h"

namespace kvtrim::kv {
namespace {

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

double Total(const HeadSensitivity& s, const std::vector<int>& u, int U) {
  double t = 0;
  for (size_t h = 0; h < u.size(); ++h) t += InterpolateLoss(s, static_cast<int>(h), double(u[h]) / U);
  return t;
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
  // head takes all it can (32 units) and the other keeps its minimum.
  HeadSensitivity s{{0.125, 0.25, 0.5, 1.0}, {}};
  for (double a : {10.0, 1.0}) {
    std::vector<double> l;
    for (double x : s.ratios) l.push_back(a * (1 - x));
    s.loss.push_back(l);
  }
  auto u = SearchHeadBudgets(s, {0.5, 32, 2});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u.value(), (std::vector<int>{30, 2}));
}

TEST(HeadBudgets, ConvexLossesReachTheBruteForceOptimum) {
  const HeadSensitivity s = Curves({5.0, 1.0, 0.2}, 0.25, 3);
  const int U = 32, total = 24;  // r = 0.25 over 3 heads
  auto u = SearchHeadBudgets(s, {0.25, U, 1});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(std::accumulate(u.value().begin(), u.value().end(), 0), total);
  double best = 1e300;
  for (int a = 1; a <= U; ++a)
    for (int b = 1; b <= U && a + b < total; ++b) {
      const int c = total - a - b;
      if (c >= 1 && c <= U) best = std::min(best, Total(s, {a, b, c}, U));
    }
  EXPECT_NEAR(Total(s, u.value(), U), best, 1e-12);
  EXPECT_GT(u.value()[0], u.value()[1]);
  EXPECT_GT(u.value()[1], u.value()[2]);
  for (int x : u.value()) EXPECT_GE(x, 1);
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

}  // namespace
}  // namespace kvtrim::kv
