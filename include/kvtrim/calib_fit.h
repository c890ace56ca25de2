// Context-calibrated compression (METHODS.md section 3): the quality curve
// f(r) of a retention ratio r for a context of difficulty k = alpha NLL(c) +
// beta, its inverse r*(tau), and the asymmetric least-squares fit of
// (alpha, beta) from measured triples (r, NLL(c), y).
#pragma once
#include <vector>

#include "kvtrim/status.h"

namespace kvtrim {

// f(r) = (exp(r k - k) - exp(-k)) / (1 - exp(-k)) = expm1(r k) / expm1(k);
// f(0) = 0, f(1) = 1, f -> r as k -> 0. Evaluated without overflow for any k.
double QualityCurve(double r, double k);
// The smallest r with f(r) >= tau: r* = 1 + ln(tau (1 - e^-k) + e^-k) / k,
// r* = tau for |k| < 1e-4, clipped to [kMinRatio, 1]. tau is clamped to [0, 1].
double RetentionForQuality(double tau, double k);
inline constexpr double kMinRatio = 1e-3;

struct CalibSample {
  double r = 1;      // retention ratio
  double nll_c = 0;  // token-averaged NLL of the context under the model
  double y = 1;      // measured quality: NLL(answer | q, c) / NLL(answer | q, c_r)
};

struct CalibFit {
  double alpha = 0, beta = 0;
  double penalty = 4;              // weight on residuals where the fit over-predicts
  double rmse = 0;                 // unweighted root mean squared residual
  double weighted_loss = 0;        // sum w_i (f_i - y_i)^2 / n
  double over_share = 0;           // share of samples the fit over-predicts
  std::vector<double> residuals;   // f(r_i; k_i) - y_i, per sample
  int iterations = 0;
};

// Minimizes sum_i w_i (f(r_i; alpha nll_i + beta) - y_i)^2, w_i = penalty
// where f_i > y_i and 1 elsewhere: a coarse grid, then damped Gauss-Newton
// (Levenberg-Marquardt) on the two parameters. Errors on no samples, a
// non-finite sample or penalty < 1 is not an error (any positive weight).
Expected<CalibFit> FitCalibration(const std::vector<CalibSample>& samples, double penalty = 4);

}  // namespace kvtrim
