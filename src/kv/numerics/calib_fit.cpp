#include "kvtrim/calib_fit.h"

#include <algorithm>
#include <cmath>

#include "kv/numerics/eigen.h"

namespace kvtrim {

double QualityCurve(double r, double k) {
  if (std::abs(k) < 1e-9) return r;
  if (k > 0) {  // exp((r-1)k) (1 - e^{-rk}) / (1 - e^{-k}): no overflow
    return std::exp((r - 1) * k) * (-std::expm1(-r * k)) / (-std::expm1(-k));
  }
  return std::expm1(r * k) / std::expm1(k);
}

double RetentionForQuality(double tau, double k) {
  tau = std::clamp(tau, 0.0, 1.0);
  double r;
  if (std::abs(k) < 1e-4) {
    r = tau;
  } else if (k > 0) {
    r = 1 + std::log(tau + (1 - tau) * std::exp(-k)) / k;  // tau (1 - e^-k) + e^-k
  } else {
    r = std::log1p(tau * std::expm1(k)) / k;  // the same, without cancellation for k < 0
  }
  if (!std::isfinite(r)) r = tau;
  return std::clamp(r, kMinRatio, 1.0);
}

namespace {

struct Eval {
  double loss = 0;
  Eigen::Matrix2d JtWJ = Eigen::Matrix2d::Zero();
  Eigen::Vector2d JtWr = Eigen::Vector2d::Zero();
};

// Weighted loss and Gauss-Newton normal equations at (alpha, beta).
Eval Evaluate(const std::vector<CalibSample>& s, double alpha, double beta, double penalty) {
  Eval e;
  for (const CalibSample& c : s) {
    const double k = alpha * c.nll_c + beta;
    const double f = QualityCurve(c.r, k);
    const double res = f - c.y;
    const double w = res > 0 ? penalty : 1.0;
    e.loss += w * res * res;
    const double h = 1e-5 * std::max(1.0, std::abs(k));
    const double dfdk = (QualityCurve(c.r, k + h) - QualityCurve(c.r, k - h)) / (2 * h);
    const Eigen::Vector2d J(dfdk * c.nll_c, dfdk);
    e.JtWJ += w * J * J.transpose();
    e.JtWr += w * J * res;
  }
  e.loss /= static_cast<double>(s.size());
  return e;
}

}  // namespace

Expected<CalibFit> FitCalibration(const std::vector<CalibSample>& samples, double penalty) {
  if (samples.empty()) return MakeError("calibration fit: no samples");
  if (!(penalty > 0)) return MakeError("calibration fit: over-prediction penalty must be positive");
  for (const CalibSample& c : samples)
    if (!std::isfinite(c.r) || !std::isfinite(c.nll_c) || !std::isfinite(c.y))
      return MakeError("calibration fit: a sample is not finite");
  // Coarse grid over (alpha, beta): the loss is not convex in general.
  double a = 0, b = 0, best = Evaluate(samples, 0, 0, penalty).loss;
  for (double ga = -8; ga <= 8.0001; ga += 0.5)
    for (double gb = -30; gb <= 30.0001; gb += 1.0) {
      const double l = Evaluate(samples, ga, gb, penalty).loss;
      if (l < best) best = l, a = ga, b = gb;
    }
  // Levenberg-Marquardt from the best grid point.
  double mu = 1e-3;
  int it = 0;
  Eval cur = Evaluate(samples, a, b, penalty);
  for (; it < 200; ++it) {
    Eigen::Matrix2d M = cur.JtWJ;
    M.diagonal() += mu * (cur.JtWJ.diagonal().array() + 1e-12).matrix();
    const Eigen::Vector2d step = M.ldlt().solve(-cur.JtWr);
    if (!step.allFinite()) break;
    const Eval next = Evaluate(samples, a + step(0), b + step(1), penalty);
    if (next.loss < cur.loss) {
      a += step(0), b += step(1);
      const bool converged = cur.loss - next.loss < 1e-14 * std::max(1.0, cur.loss) && step.norm() < 1e-9;
      cur = next;
      mu = std::max(1e-12, mu / 3);
      if (converged) break;
    } else {
      mu *= 4;
      if (mu > 1e12) break;
    }
  }
  CalibFit fit;
  fit.alpha = a, fit.beta = b, fit.penalty = penalty, fit.iterations = it;
  fit.weighted_loss = cur.loss;
  double ss = 0;
  int over = 0;
  for (const CalibSample& c : samples) {
    const double res = QualityCurve(c.r, a * c.nll_c + b) - c.y;
    fit.residuals.push_back(res);
    ss += res * res;
    over += res > 0;
  }
  fit.rmse = std::sqrt(ss / static_cast<double>(samples.size()));
  fit.over_share = static_cast<double>(over) / static_cast<double>(samples.size());
  return fit;
}

}  // namespace kvtrim
