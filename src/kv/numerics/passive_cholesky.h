// The Cholesky factor of a Gram matrix restricted to a set of variables
// that grows and shrinks one variable at a time: NNLS's passive set. Adding
// or removing a variable costs O(k^2) (a triangular solve; Givens rotations),
// where refactoring costs O(k^3) (Golub & Van Loan, "Matrix Computations",
// 4th ed., 6.5.4, updating and downdating the QR/Cholesky factor).
//
// Why by hand: Eigen's LLT offers rank-one updates of the whole matrix, not
// adding or deleting a row and column of the factored block.
#pragma once
#include <vector>

#include "kv/numerics/eigen.h"

namespace kvtrim::kv::numerics {

class PassiveCholesky {
 public:
  // P [n, n], symmetric positive semidefinite; it must outlive this object.
  explicit PassiveCholesky(const Eigen::MatrixXd& P);

  // Adds variable i. False (and nothing added) when its column is, within
  // round-off, a combination of the set's (its squared distance to their
  // span below kMinPivot of P(i, i), or P(i, i) <= 0).
  bool Add(int i);
  // Removes variable i (which must be in the set).
  void Remove(int i);
  // z [n]: z_S = P_SS^{-1} c_S on the set, 0 elsewhere.
  Eigen::VectorXd Solve(const Eigen::VectorXd& c) const;
  const std::vector<int>& set() const { return set_; }

  static constexpr double kMinPivot = 1e-10;

 private:
  const Eigen::MatrixXd& P_;
  std::vector<int> set_;  // the variables, in the factor's order
  Eigen::MatrixXd R_;     // [n, n]; its leading k x k block upper triangular, R^T R = P_SS
};

}  // namespace kvtrim::kv::numerics
