#include "kv/numerics/leverage.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "io/splitmix.h"

namespace kvtrim::kv::numerics {
namespace {

double StdNormal(uint64_t& s) {  // Box-Muller (the same numbers on every platform)
  const double u = io::Uniform01(s), v = io::Uniform01(s);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
}

}  // namespace

const std::vector<std::string>& LeverageMethodNames() {
  static const std::vector<std::string> n = {"sketch", "eig", "qr", "exact", "srht"};
  return n;
}

Eigen::VectorXd LeverageSvd(const Eigen::MatrixXd& A, double rel_tol) {
  Eigen::VectorXd out = Eigen::VectorXd::Zero(A.rows());
  if (A.rows() == 0 || A.cols() == 0) return out;
  Eigen::BDCSVD<Eigen::MatrixXd> svd(A, Eigen::ComputeThinU);
  const Eigen::VectorXd& s = svd.singularValues();  // decreasing
  if (!(s(0) > 0) || !std::isfinite(s(0))) return out;
  int r = 0;
  while (r < s.size() && s(r) > rel_tol * s(0)) ++r;
  return svd.matrixU().leftCols(r).rowwise().squaredNorm();
}

Eigen::VectorXd LeverageEig(const Eigen::MatrixXd& A, double rel_tol) {
  Eigen::VectorXd out = Eigen::VectorXd::Zero(A.rows());
  if (A.rows() == 0 || A.cols() == 0) return out;
  const Eigen::MatrixXd G = A.transpose() * A;  // [m, m]
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(G);
  const double lam_max = es.eigenvalues().maxCoeff();
  if (!(lam_max > 0) || !std::isfinite(lam_max)) return out;
  const Eigen::VectorXd inv_sqrt = es.eigenvalues().cwiseMax(rel_tol * lam_max).cwiseSqrt().cwiseInverse();
  const Eigen::MatrixXd U = (A * es.eigenvectors()) * inv_sqrt.asDiagonal();  // [n, m]
  return U.rowwise().squaredNorm();
}

Eigen::VectorXd LeverageQr(const Eigen::MatrixXd& A, double rel_tol) {
  Eigen::VectorXd out = Eigen::VectorXd::Zero(A.rows());
  if (A.rows() == 0 || A.cols() == 0) return out;
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(A);
  qr.setThreshold(rel_tol);
  const int r = static_cast<int>(qr.rank());
  if (r == 0 || !(qr.maxPivot() > 0)) return out;
  Eigen::MatrixXd Q = Eigen::MatrixXd::Identity(A.rows(), r);  // thin Q: [n, r]
  Q.applyOnTheLeft(qr.householderQ());
  return Q.rowwise().squaredNorm();
}

Eigen::MatrixXd GaussianSketch(int d, int k, uint64_t seed) {
  uint64_t s = seed ^ 0xC0FFEE123456789ull;
  Eigen::MatrixXd phi(d, k);
  const double scale = 1.0 / std::sqrt(static_cast<double>(k));
  for (int j = 0; j < k; ++j)
    for (int i = 0; i < d; ++i) phi(i, j) = scale * StdNormal(s);
  return phi;
}

Eigen::MatrixXd SrhtSketch(int d, int k, uint64_t seed) {
  uint64_t s = seed ^ 0x5EEDF00DBEEFull;
  int p = 1;
  while (p < d) p *= 2;
  // Normalized Sylvester Hadamard matrix [p, p] (orthogonal).
  Eigen::MatrixXd H = Eigen::MatrixXd::Ones(1, 1);
  while (H.rows() < p) {
    const Eigen::Index m = H.rows();
    Eigen::MatrixXd H2(2 * m, 2 * m);
    H2 << H, H, H, -H;
    H = std::move(H2);
  }
  H /= std::sqrt(static_cast<double>(p));
  // Random signs on the rows, then k columns sampled without replacement.
  std::vector<int> cols(p);
  std::iota(cols.begin(), cols.end(), 0);
  for (int i = p - 1; i > 0; --i) std::swap(cols[i], cols[io::SplitMix64(s) % static_cast<uint64_t>(i + 1)]);
  Eigen::MatrixXd phi(d, k);
  const double scale = std::sqrt(static_cast<double>(p) / k);
  for (int i = 0; i < d; ++i) {
    const double sign = (io::SplitMix64(s) & 1) ? 1.0 : -1.0;
    for (int j = 0; j < k; ++j) phi(i, j) = sign * scale * H(i, cols[j]);
  }
  return phi;
}

std::vector<double> LeverageScores(const float* K, int n, int d, const LeverageOptions& o) {
  std::vector<double> out(std::max(0, n), 0.0);
  if (n <= 0 || d <= 0) return out;
  Eigen::MatrixXd A = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(K, n, d)
                          .cast<double>();  // [n, d]
  if (o.center) A.rowwise() -= A.colwise().mean();
  if (!A.allFinite()) return out;
  // k >= d reduces nothing: an invertible d x d sketch leaves the column
  // space, hence the scores, unchanged, so the keys are used as they are
  // (a d x d block of a padded Hadamard matrix can also be singular).
  const int k = std::clamp(o.sketch_dim, 1, d);
  const bool sketch = k < d && o.method != LeverageMethod::kExact;
  if (sketch) A = o.method == LeverageMethod::kSrht ? Eigen::MatrixXd(A * SrhtSketch(d, k, o.seed))
                                                    : Eigen::MatrixXd(A * GaussianSketch(d, k, o.seed));  // [n, k]
  Eigen::VectorXd lev;
  switch (o.method) {
    case LeverageMethod::kEig: lev = LeverageEig(A); break;
    case LeverageMethod::kQr: lev = LeverageQr(A); break;
    default: lev = LeverageSvd(A); break;  // sketch, srht, exact
  }
  for (int i = 0; i < n; ++i) out[i] = std::isfinite(lev(i)) ? lev(i) : 0.0;
  return out;
}

}  // namespace kvtrim::kv::numerics
