#include "kv/numerics/lstsq.h"

namespace kvtrim::kv::numerics {

Eigen::MatrixXd RidgeLstsq(const Eigen::MatrixXd& X, const Eigen::MatrixXd& Y, double rel_ridge) {
  const Eigen::Index k = X.cols();
  if (k == 0) return Eigen::MatrixXd(0, Y.cols());
  if (rel_ridge <= 0) return X.completeOrthogonalDecomposition().solve(Y);
  Eigen::MatrixXd G = X.transpose() * X;  // [k, k]
  const double tr = G.trace();
  const double lambda = rel_ridge * (tr > 0 ? tr / static_cast<double>(k) : 1.0);
  G.diagonal().array() += lambda;
  return G.ldlt().solve(X.transpose() * Y);  // G is positive definite now
}

}  // namespace kvtrim::kv::numerics
