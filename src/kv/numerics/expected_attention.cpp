#include "kv/numerics/expected_attention.h"

#include <cmath>

namespace kvtrim::kv::numerics {

Eigen::MatrixXd RopeAverage(int d, int rot_dims, double base, bool neox, int64_t p0, int horizon) {
  Eigen::MatrixXd A = Eigen::MatrixXd::Identity(d, d);
  const int half = rot_dims / 2;
  for (int i = 0; i < half; ++i) {
    const double theta = std::pow(base, -2.0 * i / rot_dims);
    // mean_k exp(i (p0 + k) theta) = exp(i (p0 + (h-1)/2) theta) sin(h theta/2) / (h sin(theta/2))
    const double den = horizon * std::sin(theta / 2);
    const double amp = std::abs(den) < 1e-300 ? 1.0 : std::sin(horizon * theta / 2) / den;
    const double mid = (static_cast<double>(p0) + (horizon - 1) / 2.0) * theta;
    const double c = amp * std::cos(mid), s = amp * std::sin(mid);
    const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
    A(i0, i0) = c, A(i0, i1) = -s;
    A(i1, i0) = s, A(i1, i1) = c;
  }
  return A;
}

Moments QueryMoments(const Eigen::MatrixXd& Q) {
  Moments m;
  m.mean = Q.colwise().mean().transpose();
  const Eigen::MatrixXd C = Q.rowwise() - m.mean.transpose();
  m.cov = C.transpose() * C / static_cast<double>(Q.rows());
  return m;
}

Eigen::VectorXd ExpectedAttention(const Eigen::VectorXd& mu, const Eigen::MatrixXd& cov, const Eigen::MatrixXd& K,
                                  const Eigen::VectorXd& b) {
  const double d = static_cast<double>(K.cols());
  Eigen::VectorXd z = K * mu / std::sqrt(d) + b;
  z += (K * cov).cwiseProduct(K).rowwise().sum() / (2.0 * d);
  z.array() -= z.maxCoeff();
  z = z.array().exp().matrix();
  return z / z.sum();
}

}  // namespace kvtrim::kv::numerics
