#include "kv/numerics/eigen.h"  // first: see eigen.h

#include "kv/policies/key_scores.h"

namespace kvtrim::kv {

namespace {

// The head's keys as an [n, d] matrix in double (dequantized when stored quantized).
Eigen::MatrixXd ReadKeys(const HeadStore& s) {
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> k(s.size(), s.head_dim());
  for (int i = 0; i < s.size(); ++i) s.ReadKey(i, k.row(i).data());
  return k.cast<double>();
}

std::vector<double> Negated(const Eigen::VectorXd& v) {
  std::vector<double> out(v.size());
  for (Eigen::Index i = 0; i < v.size(); ++i) out[i] = -v[i];
  return out;
}

}  // namespace

std::vector<double> KNormScores(const HeadStore& s) { return Negated(ReadKeys(s).rowwise().norm()); }

std::vector<double> KeyDiffScores(const HeadStore& s) {
  if (s.size() == 0) return {};
  const Eigen::MatrixXd k = ReadKeys(s);
  const Eigen::VectorXd norm = k.rowwise().norm();
  const Eigen::VectorXd inv = (norm.array() > 0).select(norm.cwiseInverse(), 0.0);
  const Eigen::MatrixXd unit = inv.asDiagonal() * k;
  const Eigen::RowVectorXd anchor = unit.colwise().mean();
  const double an = anchor.norm();
  if (!(an > 0)) return std::vector<double>(s.size(), 0.0);
  return Negated(unit * anchor.transpose() / an);
}

}  // namespace kvtrim::kv
