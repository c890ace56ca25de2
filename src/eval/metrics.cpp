#include "eval/metrics.h"

#include <algorithm>
#include <cmath>

namespace kvtrim::eval {
namespace {

// log-sum-exp of a logit row, in double.
double LogSumExp(const float* x, size_t n) {
  double m = *std::max_element(x, x + n), s = 0;
  for (size_t i = 0; i < n; ++i) s += std::exp(double{x[i]} - m);
  return m + std::log(s);
}

}  // namespace

double KlDivergence(const float* p_logits, const float* q_logits, size_t n) {
  const double lp = LogSumExp(p_logits, n), lq = LogSumExp(q_logits, n);
  double kl = 0;
  for (size_t i = 0; i < n; ++i) {
    const double logp = p_logits[i] - lp, logq = q_logits[i] - lq;
    kl += std::exp(logp) * (logp - logq);
  }
  return std::max(0.0, kl);  // rounding can make an exact 0 slightly negative
}

double Nll(const float* logits, size_t n, int target) { return LogSumExp(logits, n) - logits[target]; }

double MeanNextTokenNll(const std::vector<float>& rows, const std::vector<int>& tokens, size_t V) {
  if (tokens.size() < 2) return NAN;
  double nll = 0;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) nll += Nll(&rows[i * V], V, tokens[i + 1]);
  return nll / static_cast<double>(tokens.size() - 1);
}

MeanSe Summarize(const std::vector<double>& xs) {
  MeanSe r;
  double s = 0;
  for (double x : xs)
    if (!std::isnan(x)) s += x, ++r.n;
  if (r.n == 0) return {NAN, NAN, 0};
  r.mean = s / r.n;
  if (r.n > 1) {
    double v = 0;
    for (double x : xs)
      if (!std::isnan(x)) v += (x - r.mean) * (x - r.mean);
    r.se = std::sqrt(v / (r.n - 1) / r.n);
  }
  return r;
}

}  // namespace kvtrim::eval
