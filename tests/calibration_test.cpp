// Context-calibrated compression: f(r) and r* in closed form (round trip,
// monotone, extremes), the asymmetric fit recovering planted (alpha, beta),
// and the calibration file read back into r*.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "kv/calibration.h"
#include "kvtrim/calib_fit.h"

namespace kvtrim::kv::numerics {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

TEST(Calibration, QualityCurveClosedForm) {
  for (double k : {-30.0, -2.0, -1e-6, 0.0, 1e-6, 2.0, 30.0, 800.0}) {
    EXPECT_NEAR(QualityCurve(0, k), 0, 1e-12) << k;
    EXPECT_NEAR(QualityCurve(1, k), 1, 1e-12) << k;
  }
  // (e^{rk-k} - e^{-k}) / (1 - e^{-k}) at r = 0.5, k = 2 and k = -2.
  EXPECT_NEAR(QualityCurve(0.5, 2), (std::exp(-1.0) - std::exp(-2.0)) / (1 - std::exp(-2.0)), 1e-12);
  EXPECT_NEAR(QualityCurve(0.5, -2), (std::exp(1.0) - std::exp(2.0)) / (1 - std::exp(2.0)), 1e-12);
  EXPECT_NEAR(QualityCurve(0.3, 1e-7), 0.3, 1e-7);  // f -> r as k -> 0
  EXPECT_TRUE(std::isfinite(QualityCurve(0.2, 1e4)));
  EXPECT_TRUE(std::isfinite(QualityCurve(0.2, -1e4)));
}

TEST(Calibration, RetentionInvertsTheCurve) {
  for (double k : {-40.0, -5.0, -0.5, -2e-4, 2e-4, 0.5, 3.0, 12.0})
    for (double tau : {0.5, 0.9, 0.95, 0.99}) {
      const double r = RetentionForQuality(tau, k);
      if (r > kMinRatio && r < 1) {
        EXPECT_NEAR(QualityCurve(r, k), tau, 1e-9) << "k " << k << " tau " << tau;
      }
      if (r > 2 * kMinRatio) {  // the smallest r: a little less falls short
        EXPECT_LT(QualityCurve(r - 1e-6, k), tau);
      }
    }
  // The spec's closed form, verbatim, away from k = 0.
  const double k = 1.7, tau = 0.9;
  EXPECT_NEAR(RetentionForQuality(tau, k), 1 + std::log(tau * (1 - std::exp(-k)) + std::exp(-k)) / k, 1e-12);
  EXPECT_EQ(RetentionForQuality(0.93, 5e-5), 0.93);  // |k| < 1e-4: r* = tau
  EXPECT_EQ(RetentionForQuality(0.93, -5e-5), 0.93);
}

TEST(Calibration, RetentionIsMonotoneAndStaysInRange) {
  double prev = 0;
  for (double tau = 0.05; tau <= 1.0; tau += 0.05) {  // increasing in tau
    const double r = RetentionForQuality(tau, 2.5);
    EXPECT_GE(r, prev);
    prev = r;
  }
  prev = 0;
  for (double nll = 0; nll <= 8; nll += 0.25) {  // harder contexts (alpha > 0) need more
    const double r = RetentionForQuality(0.95, 1.5 * nll - 4);
    EXPECT_GE(r, prev - 1e-12);
    prev = r;
  }
  for (double k : {-1e6, -700.0, -1e-5, 0.0, 1e-5, 700.0, 1e6})
    for (double tau : {0.0, 1e-9, 0.5, 1.0}) {
      const double r = RetentionForQuality(tau, k);
      EXPECT_TRUE(r > 0 && r <= 1) << k << " " << tau << " -> " << r;
    }
  EXPECT_EQ(RetentionForQuality(1.0, 3.0), 1.0);
  EXPECT_EQ(RetentionForQuality(1.0, -3.0), 1.0);
  EXPECT_EQ(RetentionForQuality(1.0, 0.0), 1.0);
}

std::vector<CalibSample> Planted(double alpha, double beta, double noise, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> nll(1.0, 4.0);
  std::normal_distribution<double> eps(0, noise);
  std::vector<CalibSample> s;
  for (int c = 0; c < 40; ++c) {
    const double x = nll(g);
    for (double r : {0.1, 0.25, 0.5, 0.75, 0.9}) s.push_back({r, x, QualityCurve(r, alpha * x + beta) + eps(g)});
  }
  return s;
}

TEST(Calibration, FitRecoversPlantedParameters) {
  for (auto [a, b] : {std::pair{1.5, -2.0}, std::pair{-0.7, 1.0}, std::pair{0.4, 3.5}}) {
    auto fit = FitCalibration(Planted(a, b, 0, 1), 4);
    ASSERT_TRUE(fit.ok());
    EXPECT_NEAR(fit->alpha, a, 1e-4);
    EXPECT_NEAR(fit->beta, b, 1e-4);
    EXPECT_LT(fit->rmse, 1e-6);
    EXPECT_EQ(fit->residuals.size(), 200u);
  }
}

TEST(Calibration, PenaltyMakesTheFitConservative) {
  auto s = Planted(1.0, -1.0, 0.05, 2);
  auto sym = FitCalibration(s, 1), asym = FitCalibration(s, 4);
  ASSERT_TRUE(sym.ok() && asym.ok());
  EXPECT_NEAR(sym->alpha, 1.0, 0.25);
  EXPECT_NEAR(sym->beta, -1.0, 0.6);
  EXPECT_LT(asym->over_share, sym->over_share);
  EXPECT_LT(asym->over_share, 0.45);
  EXPECT_FALSE(FitCalibration({}, 4).ok());
  EXPECT_FALSE(FitCalibration(s, 0).ok());
  EXPECT_FALSE(FitCalibration({{0.5, NAN, 0.9}}, 4).ok());
}

TEST(Calibration, FileRoundTripChoosesRatio) {
  const std::string path = ::testing::TempDir() + "/kvtrim_calib_test.json";
  {
    std::ofstream f(path);
    f << R"({"model": "m.gguf", "penalty": 4, "methods": {"compactor": {"alpha": 1.2, "beta": -3, "rmse": 0.01, "n": 9}}})";
  }
  auto c = LoadCalibration(path);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->model, "m.gguf");
  auto r = ChooseRatio(c.value(), "compactor", 2.5, 0.95);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r.value(), RetentionForQuality(0.95, 1.2 * 2.5 - 3), 1e-15);
  EXPECT_EQ(r.value(), 0.95);  // k = 0 exactly
  EXPECT_NEAR(ChooseRatio(c.value(), "compactor", 4, 0.9).value(), RetentionForQuality(0.9, 1.8), 1e-15);
  EXPECT_FALSE(ChooseRatio(c.value(), "snapkv", 2.5, 0.95).ok());
  EXPECT_FALSE(ChooseRatio(c.value(), "compactor", 2.5, 1.5).ok());
  EXPECT_FALSE(ChooseRatio(c.value(), "compactor", NAN, 0.9).ok());
  EXPECT_FALSE(LoadCalibration(path + ".missing").ok());
  {
    std::ofstream f(path);
    f << R"({"methods": {"compactor": {"alpha": "x"}}})";
  }
  EXPECT_FALSE(LoadCalibration(path).ok());
  std::remove(path.c_str());
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv::numerics
