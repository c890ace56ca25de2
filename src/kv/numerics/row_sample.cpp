#include "kv/numerics/row_sample.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "io/splitmix.h"
#include "kv/numerics/leverage.h"

namespace kvtrim::kv::numerics {

RowSample SampleRows(const Eigen::VectorXd& leverage, int s, double uniform_mix, uint64_t seed) {
  RowSample out;
  const int n = static_cast<int>(leverage.size());
  if (n == 0 || s <= 0) return out;
  if (s >= n) {
    for (int i = 0; i < n; ++i) out.rows.push_back(i);
    out.weight = Eigen::VectorXd::Ones(n);
    return out;
  }
  const double total = leverage.cwiseMax(0.0).sum();
  const double mix = (total > 0 && std::isfinite(total)) ? std::clamp(uniform_mix, 0.0, 1.0) : 1.0;
  std::vector<double> p(n), cdf(n);
  double acc = 0;
  for (int i = 0; i < n; ++i) {
    p[i] = (1.0 - mix) * (mix < 1.0 ? std::max(0.0, leverage(i)) / total : 0.0) + mix / n;
    cdf[i] = (acc += p[i]);
  }
  std::map<int, int> draws;  // row -> times drawn
  uint64_t state = seed ^ 0x5A3C9E17D2B4F601ull;
  for (int k = 0; k < s; ++k) {
    const double u = io::Uniform01(state) * acc;
    const int i = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    ++draws[std::min(i, n - 1)];
  }
  out.weight.resize(static_cast<Eigen::Index>(draws.size()));
  for (const auto& [i, c] : draws) {
    out.weight(static_cast<Eigen::Index>(out.rows.size())) = c / (static_cast<double>(s) * p[i] / acc);
    out.rows.push_back(i);
  }
  return out;
}

Eigen::VectorXd RowLeverage(const Eigen::MatrixXd& A, int sketch, uint64_t seed) {
  if (A.cols() <= sketch) return LeverageSvd(A);
  return LeverageSvd(A * GaussianSketch(static_cast<int>(A.cols()), sketch, seed));
}

}  // namespace kvtrim::kv::numerics
