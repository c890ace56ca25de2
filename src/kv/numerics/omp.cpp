#include "kv/numerics/omp.h"

#include <algorithm>
#include <numeric>

#include "kv/numerics/nnls.h"

namespace kvtrim::kv::numerics {

OmpResult OmpNnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, int t, int step) {
  const int n = static_cast<int>(A.cols());
  t = std::min(t, n);
  step = std::max(1, step);
  OmpResult r;
  r.w.resize(0);
  const Eigen::VectorXd norm = A.colwise().norm().transpose();  // [n]
  std::vector<char> picked(n, 0);
  Eigen::MatrixXd P(0, 0);   // [k, k] Gram of the picked columns, grown as they come
  Eigen::VectorXd c(0);      // [k] A_S^T b
  Eigen::VectorXd res = b;   // [m] residual
  const double bnorm = b.norm();
  while (static_cast<int>(r.support.size()) < t) {
    Eigen::VectorXd corr = (A.transpose() * res).cwiseAbs();  // [n]
    std::vector<int> cand;
    for (int j = 0; j < n; ++j)
      if (!picked[j] && norm(j) > 0) {
        corr(j) /= norm(j);
        if (corr(j) > 1e-13 * bnorm) cand.push_back(j);
      }
    if (cand.empty()) break;  // the residual is explained (or orthogonal to what is left)
    const int take = std::min<int>({step, t - static_cast<int>(r.support.size()), static_cast<int>(cand.size())});
    std::partial_sort(cand.begin(), cand.begin() + take, cand.end(),
                      [&](int a, int b2) { return corr(a) > corr(b2) || (corr(a) == corr(b2) && a < b2); });
    const int k0 = static_cast<int>(r.support.size());
    const int k1 = k0 + take;
    r.support.insert(r.support.end(), cand.begin(), cand.begin() + take);
    for (int a = k0; a < k1; ++a) picked[r.support[a]] = 1;
    // Grow the Gram matrix by the new columns only.
    Eigen::MatrixXd An(A.rows(), take);  // [m, take]
    for (int a = 0; a < take; ++a) An.col(a) = A.col(r.support[k0 + a]);
    P.conservativeResize(k1, k1);
    c.conservativeResize(k1);
    for (int a = 0; a < k1; ++a) {
      Eigen::VectorXd row = An.transpose() * A.col(r.support[a]);  // [take]
      P.block(k0, a, take, 1) = row;
      P.block(a, k0, 1, take) = row.transpose();
    }
    c.tail(take) = An.transpose() * b;
    Eigen::VectorXd x0 = Eigen::VectorXd::Zero(k1);
    x0.head(k0) = r.w;
    r.w = NnlsGram(P, c, &x0).x;
    res = b;
    for (int a = 0; a < k1; ++a)
      if (r.w(a) != 0) res -= r.w(a) * A.col(r.support[a]);
  }
  return r;
}

}  // namespace kvtrim::kv::numerics
