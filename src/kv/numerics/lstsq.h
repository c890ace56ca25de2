// Ridge least squares: min ||X V - Y||^2 + lambda ||V||^2 with lambda
// relative to the mean squared column norm of X (Attention Matching's value
// fit, METHODS.md section 4). Dense, on Eigen.
#pragma once
#include "kv/numerics/eigen.h"

namespace kvtrim::kv::numerics {

// X [m, k], Y [m, d] -> V [k, d]. lambda = rel_ridge * trace(X^T X) / k (or
// rel_ridge when X is zero), so the answer is finite for any X, rank
// deficient included. rel_ridge = 0 gives the minimum-norm least squares.
Eigen::MatrixXd RidgeLstsq(const Eigen::MatrixXd& X, const Eigen::MatrixXd& Y, double rel_ridge);

}  // namespace kvtrim::kv::numerics
