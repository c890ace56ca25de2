// Orthogonal matching pursuit with non-negative refits (METHODS.md section
// 4, Attention Matching's `omp` key selection): greedily pick the columns of
// A whose normalised correlation |A_j . r| / ||A_j|| with the residual r is
// largest, `step` per round, and refit the weights on the picked set by NNLS
// (warm started from the previous fit), until `t` columns are picked.
#pragma once
#include <vector>

#include "kv/numerics/eigen.h"

namespace kvtrim::kv::numerics {

struct OmpResult {
  std::vector<int> support;  // picked columns, in the order picked
  Eigen::VectorXd w;         // [support.size()] NNLS weights (>= 0; some may be 0)
};

// A [m, n], target b [m]; picks min(t, n) columns (fewer when the residual
// vanishes or no column correlates with it). Zero columns are never picked.
OmpResult OmpNnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, int t, int step);

}  // namespace kvtrim::kv::numerics
