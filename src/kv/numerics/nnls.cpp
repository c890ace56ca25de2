#include "kv/numerics/nnls.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvtrim::kv::numerics {

namespace {

// Unconstrained least squares restricted to the passive set: P_SS z_S = c_S,
// z = 0 elsewhere. A pivoted LDL^T (Cholesky-like, a third of a QR's work)
// when P_SS is clearly positive definite; otherwise the COD, which gives the
// minimum-norm solution when P_SS is singular (duplicate columns). The
// inner loop solves once per variable it adds or drops: the solves were most
// of Attention Matching's NNLS time with the COD alone (round 5 profile).
Eigen::VectorXd SolvePassive(const Eigen::MatrixXd& P, const Eigen::VectorXd& c, const std::vector<int>& S) {
  const int k = static_cast<int>(S.size());
  Eigen::MatrixXd Pss(k, k);  // [k, k]
  Eigen::VectorXd cs(k);      // [k]
  for (int a = 0; a < k; ++a) {
    cs(a) = c(S[a]);
    for (int b = 0; b < k; ++b) Pss(a, b) = P(S[a], S[b]);
  }
  Eigen::VectorXd z = Eigen::VectorXd::Zero(c.size());
  if (k == 0) return z;
  constexpr double kMinPivot = 1e-10;  // relative to the largest: below it, rank is in doubt
  Eigen::LDLT<Eigen::MatrixXd> ldlt(Pss);
  const Eigen::VectorXd D = ldlt.vectorD();
  const bool definite = ldlt.info() == Eigen::Success && D.minCoeff() > kMinPivot * D.cwiseAbs().maxCoeff();
  Eigen::VectorXd zs = definite ? Eigen::VectorXd(ldlt.solve(cs)) : Eigen::VectorXd(Pss.completeOrthogonalDecomposition().solve(cs));
  for (int a = 0; a < k; ++a) z(S[a]) = zs(a);
  return z;
}

std::vector<int> Passive(const std::vector<char>& in) {
  std::vector<int> S;
  for (int i = 0; i < static_cast<int>(in.size()); ++i)
    if (in[i]) S.push_back(i);
  return S;
}

// The inner loop of Lawson-Hanson: from a feasible x (x_S > 0), move towards
// the passive-set minimizer, dropping variables that hit zero, until that
// minimizer is feasible (at most |S| + 1 solves: each step drops one).
void InnerLoop(const Eigen::MatrixXd& P, const Eigen::VectorXd& c, Eigen::VectorXd& x, std::vector<char>& in) {
  const int n = static_cast<int>(x.size());
  for (int guard = 0; guard <= n; ++guard) {
    std::vector<int> S = Passive(in);
    Eigen::VectorXd z = SolvePassive(P, c, S);
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
        in[i] = 0;
      }
  }
}

}  // namespace

NnlsResult NnlsGram(const Eigen::MatrixXd& P, const Eigen::VectorXd& c, const Eigen::VectorXd* x0, const NnlsOptions& o) {
  const int n = static_cast<int>(c.size());
  NnlsResult r;
  r.x = Eigen::VectorXd::Zero(n);
  if (n == 0) return r;
  std::vector<char> in(n, 0);  // passive set (free variables)
  if (x0) {
    for (int i = 0; i < n; ++i)
      if ((*x0)(i) > 0 && std::isfinite((*x0)(i))) {
        r.x(i) = (*x0)(i);
        in[i] = 1;
      }
    InnerLoop(P, c, r.x, in);
  }
  const double scale = c.cwiseAbs().maxCoeff();
  const double tol = o.tol * (scale > 0 ? scale : 1.0);
  const int max_iter = o.max_iter > 0 ? o.max_iter : 3 * n;
  for (r.iterations = 0; r.iterations < max_iter; ++r.iterations) {
    Eigen::VectorXd w = c - P * r.x;  // [n] negative gradient
    int best = -1;
    for (int i = 0; i < n; ++i)
      if (!in[i] && w(i) > tol && (best < 0 || w(i) > w(best))) best = i;
    if (best < 0) return r;  // KKT: no free direction decreases the residual
    in[best] = 1;
    InnerLoop(P, c, r.x, in);
    if (!in[best]) {  // round-off made the entering variable leave at once: stop
      return r;
    }
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
