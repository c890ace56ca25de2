#include "kv/numerics/nnls.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kv/numerics/passive_cholesky.h"

namespace kvtrim::kv::numerics {

namespace {

// The inner loop of Lawson-Hanson: from a feasible x (x_S > 0), move towards
// the passive-set minimizer, dropping variables that hit zero, until that
// minimizer is feasible (at most |S| + 1 solves: each step drops one). The
// passive set's Cholesky factor follows the drops (O(k^2) each), where a
// solve from scratch per step was O(k^3) and most of Attention Matching's
// selection time.
void InnerLoop(const Eigen::VectorXd& c, PassiveCholesky& chol, Eigen::VectorXd& x) {
  const int n = static_cast<int>(x.size());
  for (int guard = 0; guard <= n; ++guard) {
    const Eigen::VectorXd z = chol.Solve(c);
    const std::vector<int> S = chol.set();
    bool feasible = true;
    for (int i : S) feasible = feasible && z(i) > 0;
    if (feasible) {
      x = z;
      return;
    }
    double alpha = 1.0;
    for (int i : S)
      if (z(i) <= 0) alpha = std::min(alpha, x(i) / (x(i) - z(i)));
    x += alpha * (z - x);
    const double tiny = 1e-14 * x.cwiseAbs().maxCoeff();
    for (int i : S)
      if (x(i) <= 0 || (z(i) <= 0 && x(i) <= tiny)) {
        x(i) = 0;
        chol.Remove(i);
      }
  }
}

}  // namespace

NnlsResult NnlsGram(const Eigen::MatrixXd& P, const Eigen::VectorXd& c, const Eigen::VectorXd* x0, const NnlsOptions& o) {
  const int n = static_cast<int>(c.size());
  NnlsResult r;
  r.x = Eigen::VectorXd::Zero(n);
  if (n == 0) return r;
  PassiveCholesky chol(P);  // the passive set (free variables)
  std::vector<char> in(n, 0), blocked(n, 0);  // blocked: its column depends on the set's when it would enter
  if (x0) {
    for (int i = 0; i < n; ++i)
      if ((*x0)(i) > 0 && std::isfinite((*x0)(i)) && chol.Add(i)) r.x(i) = (*x0)(i);
    InnerLoop(c, chol, r.x);
  }
  const double scale = c.cwiseAbs().maxCoeff();
  const double tol = o.tol * (scale > 0 ? scale : 1.0);
  const int max_iter = o.max_iter > 0 ? o.max_iter : 3 * n;
  for (r.iterations = 0; r.iterations < max_iter; ++r.iterations) {
    std::fill(in.begin(), in.end(), 0);
    for (int i : chol.set()) in[i] = 1;
    const Eigen::VectorXd w = c - P * r.x;  // [n] negative gradient
    int best = -1;
    for (int i = 0; i < n; ++i)
      if (!in[i] && !blocked[i] && w(i) > tol && (best < 0 || w(i) > w(best))) best = i;
    if (best < 0) return r;  // KKT: no free direction decreases the residual
    if (!chol.Add(best)) {  // a duplicate (or collinear) column: its direction is the set's already
      blocked[best] = 1;
      continue;
    }
    InnerLoop(c, chol, r.x);
    const std::vector<int>& S = chol.set();
    if (std::find(S.begin(), S.end(), best) == S.end()) return r;  // round-off made it leave at once: stop
  }
  r.converged = false;
  return r;
}

NnlsResult Nnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, const NnlsOptions& o) {
  Eigen::MatrixXd P = A.transpose() * A;
  Eigen::VectorXd c = A.transpose() * b;
  return NnlsGram(P, c, nullptr, o);
}

}  // namespace kvtrim::kv::numerics
