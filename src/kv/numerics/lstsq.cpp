#include "kv/numerics/lstsq.h"

namespace kvtrim::kv::numerics {

Eigen::MatrixXd RidgeLstsq(const Eigen::MatrixXd& X, const Eigen::MatrixXd& Y, double rel_ridge) {
  const Eigen::Index k = X.cols();
  if (k == 0) return Eigen::MatrixXd(0, Y.cols());
  if (rel_ridge <= 0) return X.completeOrthogonalDecomposition().solve(Y);
  // X^T X by a rank update of its lower triangle, the triangle LDLT reads:
  // half the products of the full GEMM (m k^2 / 2 for m k^2), the largest
  // part of Attention Matching's value fit.
  Eigen::MatrixXd G = Eigen::MatrixXd::Zero(k, k);  // [k, k]
  G.selfadjointView<Eigen::Lower>().rankUpdate(X.transpose());
  const double tr = G.trace();
  const double lambda = rel_ridge * (tr > 0 ? tr / static_cast<double>(k) : 1.0);
  G.diagonal().array() += lambda;
  return G.selfadjointView<Eigen::Lower>().ldlt().solve(X.transpose() * Y);  // positive definite now
}

}  // namespace kvtrim::kv::numerics
