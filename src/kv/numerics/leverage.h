// Leverage scores of the rows of a matrix (METHODS.md section 3): exact, or
// through a seeded sketch of the columns (Gaussian or SRHT), by thin SVD
// (default), Gram eigendecomposition or QR. Eigen does the linear algebra.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kv/numerics/eigen.h"

#include "kvtrim/status.h"

namespace kvtrim::kv::numerics {

// How leverage scores are computed.
enum class LeverageMethod {
  kSketch,  // Gaussian sketch, thin SVD of K Phi (the default)
  kEig,     // Gaussian sketch, eigendecomposition of (K Phi)^T (K Phi)
  kQr,      // Gaussian sketch, column-pivoted QR of K Phi
  kExact,   // no sketch: thin SVD of K
  kSrht,    // subsampled randomized Hadamard sketch, thin SVD
};
// Names as the CLI spells them, in enum order (the flag value is the index).
const std::vector<std::string>& LeverageMethodNames();

struct LeverageOptions {
  LeverageMethod method = LeverageMethod::kSketch;
  int sketch_dim = 64;   // k; k >= d uses the keys unsketched (same scores)
  bool center = false;   // subtract the column means first
  uint64_t seed = 0;
};


// Leverage scores of the n rows of K (row-major [n, d]); finite for any input
// (all-zero K gives all zeros).
std::vector<double> LeverageScores(const float* K, int n, int d, const LeverageOptions& o);

// The building blocks, each on a dense A [n, m]:
// ||U_i||^2 of the thin SVD, singular directions with s > rel_tol * s_max.
Eigen::VectorXd LeverageSvd(const Eigen::MatrixXd& A, double rel_tol = 1e-6);
// Gram route: G = A^T A = V diag(lam) V^T, lam clamped to >= rel_tol * lam_max,
// U = A V diag(lam)^(-1/2).
Eigen::VectorXd LeverageEig(const Eigen::MatrixXd& A, double rel_tol = 1e-6);
// Column-pivoted QR: squared row norms of the first rank(A) columns of Q.
Eigen::VectorXd LeverageQr(const Eigen::MatrixXd& A, double rel_tol = 1e-6);

// Sketches Phi [d, k]: i.i.d. N(0, 1/k) entries, or SRHT (random signs,
// normalized Hadamard of the next power of two, k sampled columns). Seeded.
Eigen::MatrixXd GaussianSketch(int d, int k, uint64_t seed);
Eigen::MatrixXd SrhtSketch(int d, int k, uint64_t seed);

}  // namespace kvtrim::kv::numerics
