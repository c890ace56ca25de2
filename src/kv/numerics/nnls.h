// Non-negative least squares, min ||A x - b|| subject to x >= 0, by the
// Lawson-Hanson active-set method (Lawson & Hanson 1974, ch. 23) in the
// normal-equation form of Bro & de Jong (1997, "FNNLS"). Used by Attention
// Matching (METHODS.md section 4) and shared with the other fitted methods.
//
// Why not Eigen's: Debian's Eigen 3.4 has no unsupported/Eigen/NNLS (it
// arrived after 3.4), so this is the same standard, finite-step algorithm on
// top of Eigen's triangular solves: every subproblem is an unconstrained
// least squares on the passive set, solved through that set's Cholesky
// factor, which is updated as a variable enters or leaves
// (passive_cholesky.h) rather than refactored. A variable whose column is,
// within round-off, a combination of the passive set's (a duplicate key)
// does not enter: the set's columns stay independent and the answer finite.
// No projected gradient, no step sizes to tune.
#pragma once
#include "kv/numerics/eigen.h"

namespace kvtrim::kv::numerics {

struct NnlsOptions {
  int max_iter = 0;        // outer iterations; 0: 3 * n (the method is finite; this only guards round-off)
  double tol = 1e-10;      // a variable enters while its gradient exceeds tol * max |A^T b|
};

struct NnlsResult {
  Eigen::VectorXd x;       // [n] the solution, x >= 0
  int iterations = 0;      // outer iterations taken
  bool converged = true;   // false only when max_iter stopped it
};

// Gram form: P = A^T A [n, n], c = A^T b [n]. `x0` (optional, x0 >= 0) warm
// starts the passive set with its positive entries (OMP refits).
NnlsResult NnlsGram(const Eigen::MatrixXd& P, const Eigen::VectorXd& c, const Eigen::VectorXd* x0 = nullptr,
                    const NnlsOptions& o = {});
// Plain form: A [m, n], b [m].
NnlsResult Nnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, const NnlsOptions& o = {});

}  // namespace kvtrim::kv::numerics
