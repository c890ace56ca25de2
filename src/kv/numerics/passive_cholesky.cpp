#include "kv/numerics/passive_cholesky.h"

#include <algorithm>
#include <cmath>

namespace kvtrim::kv::numerics {

PassiveCholesky::PassiveCholesky(const Eigen::MatrixXd& P) : P_(P), R_(P.rows(), P.rows()) {}

bool PassiveCholesky::Add(int i) {
  const int k = static_cast<int>(set_.size());
  const double pii = P_(i, i);
  if (!(pii > 0) || !std::isfinite(pii)) return false;
  Eigen::VectorXd r(k);  // R^T r = P_S,i
  for (int a = 0; a < k; ++a) r(a) = P_(set_[a], i);
  if (k > 0) R_.topLeftCorner(k, k).triangularView<Eigen::Upper>().transpose().solveInPlace(r);
  const double d2 = pii - r.squaredNorm();
  if (!(d2 > kMinPivot * pii)) return false;
  R_.col(k).head(k) = r;
  R_(k, k) = std::sqrt(d2);
  set_.push_back(i);
  return true;
}

void PassiveCholesky::Remove(int i) {
  const int k = static_cast<int>(set_.size());
  const int p = static_cast<int>(std::find(set_.begin(), set_.end(), i) - set_.begin());
  if (p == k) return;
  // Drop column p: columns p+1.. shift left and leave one entry below the
  // diagonal each (upper Hessenberg); a Givens rotation of rows (j, j+1)
  // clears each, which keeps R^T R equal to the reduced Gram block.
  for (int j = p; j + 1 < k; ++j) R_.col(j).head(j + 2) = R_.col(j + 1).head(j + 2);
  for (int j = p; j + 1 < k; ++j) {
    Eigen::JacobiRotation<double> g;
    g.makeGivens(R_(j, j), R_(j + 1, j), &R_(j, j));
    R_(j + 1, j) = 0;
    if (j + 1 < k - 1) R_.block(j, j + 1, 2, k - 2 - j).applyOnTheLeft(0, 1, g.adjoint());
  }
  set_.erase(set_.begin() + p);
}

Eigen::VectorXd PassiveCholesky::Solve(const Eigen::VectorXd& c) const {
  const int k = static_cast<int>(set_.size());
  Eigen::VectorXd z = Eigen::VectorXd::Zero(c.size());
  if (k == 0) return z;
  Eigen::VectorXd y(k);
  for (int a = 0; a < k; ++a) y(a) = c(set_[a]);
  const auto R = R_.topLeftCorner(k, k).triangularView<Eigen::Upper>();
  R.transpose().solveInPlace(y);
  R.solveInPlace(y);
  for (int a = 0; a < k; ++a) z(set_[a]) = y(a);
  return z;
}

}  // namespace kvtrim::kv::numerics
