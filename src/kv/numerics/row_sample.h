// Row sampling for tall least-squares problems (randomized numerical linear
// algebra; Drineas, Mahoney & Muthukrishnan 2006, "Sampling algorithms for
// l2 regression"): draw s rows with replacement, row i with probability p_i
// proportional to its leverage (mixed with a uniform share), and weigh each
// drawn row by 1 / (s p_i). The weighted sum of squares is then an unbiased
// estimate of the full one, and for s = O(r log r / eps^2) (r the rank) it
// is within (1 +- eps) of it for every x at once, so the sampled problem's
// solution, constrained (NNLS) or not, has a full residual within about
// (1 + eps) of the optimum. A uniform sample has no such bound: rows that
// alone span a direction (a few queries that carry a key's mass) are missed.
// Attention Matching's fit samples its reference queries with it.
#pragma once
#include <cstdint>
#include <vector>

#include "kv/numerics/eigen.h"

namespace kvtrim::kv::numerics {

struct RowSample {
  std::vector<int> rows;   // the distinct rows drawn, increasing
  Eigen::VectorXd weight;  // [rows] each row's weight in the sampled sum of squares: draws / (s p_i)
};

// s draws with replacement, row i with probability
// p_i = (1 - uniform_mix) lev_i / sum(lev) + uniform_mix / n (uniform_mix in
// [0, 1]; all-zero leverage: uniform). Seeded: the same arguments give the
// same sample. s >= n is not a sample: every row with weight 1.
RowSample SampleRows(const Eigen::VectorXd& leverage, int s, double uniform_mix, uint64_t seed);

// The leverage of A's rows: the thin SVD of A when it has at most `sketch`
// columns, else of A Phi with Phi a seeded Gaussian [cols, sketch] (leverage
// within a constant factor, which sampling tolerates).
Eigen::VectorXd RowLeverage(const Eigen::MatrixXd& A, int sketch, uint64_t seed);

}  // namespace kvtrim::kv::numerics
