// Expected Attention (kvpress's ExpectedAttentionPress; docs/policies-2.md):
// the distribution of the next queries as a Gaussian estimated from recent
// pre-RoPE queries, carried to the positions ahead by the average RoPE
// rotation, and the attention each key can expect from it.
#pragma once
#include "kv/numerics/eigen.h"

#include <cstdint>

namespace kvtrim::kv::numerics {

// The mean of the RoPE rotation R(p) over p = p0 .. p0 + horizon - 1 as a
// d x d matrix: per frequency i a 2x2 block [[c, -s], [s, c]] on the pair
// (2i, 2i+1) (or (i, i + rot_dims/2) with neox), c and s the means of
// cos(p theta_i) and sin(p theta_i), theta_i = base^(-2i / rot_dims); the
// identity on dimensions past rot_dims. horizon 1 is R(p0) itself.
Eigen::MatrixXd RopeAverage(int d, int rot_dims, double base, bool neox, int64_t p0, int horizon);

// Mean and covariance (divided by the number of rows, as kvpress) of the
// rows of Q [m, d].
struct Moments {
  Eigen::VectorXd mean;
  Eigen::MatrixXd cov;
};
Moments QueryMoments(const Eigen::MatrixXd& Q);

// Expected attention of a query q ~ N(mu, cov) on the keys K [n, d] (rotated
// as the cache holds them) with log-weights b [n]:
//   softmax_j(mu.k_j / sqrt(d) + k_j^T cov k_j / (2d) + b_j),
// the log of E[exp(q.k_j / sqrt(d))] normalised over the keys. With cov = 0
// it is the attention of the mean query.
Eigen::VectorXd ExpectedAttention(const Eigen::VectorXd& mu, const Eigen::MatrixXd& cov, const Eigen::MatrixXd& K,
                                  const Eigen::VectorXd& b);

}  // namespace kvtrim::kv::numerics
