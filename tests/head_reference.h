// Helpers of the tests that build one KV head by hand (am, kvzip-am,
// expected attention): seeded Gaussian matrices, a head from rows of keys
// and values, and its attention outputs computed in float64 from the
// definition, the independent reference the fitted heads are judged by.
#pragma once
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kv/cache.h"
#include "kv/plan.h"
#include "kv/numerics/eigen.h"

namespace kvtrim::test {

inline Eigen::MatrixXd GaussianMatrix(int r, int c, uint32_t seed, double sd = 1.0) {
  std::mt19937 g(seed);
  std::normal_distribution<double> N(0.0, sd);
  Eigen::MatrixXd m(r, c);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < c; ++j) m(i, j) = N(g);
  return m;
}

// A head of K.rows() entries at positions 0, 1, ... (f32 storage).
inline kv::HeadStore HeadFromRows(const Eigen::MatrixXd& K, const Eigen::MatrixXd& V, const std::vector<float>& logw = {}) {
  kv::HeadStore h(static_cast<int>(K.cols()), GgmlType::F32);
  std::vector<float> k(K.cols()), v(V.cols());
  for (int i = 0; i < K.rows(); ++i) {
    for (int j = 0; j < K.cols(); ++j) k[j] = static_cast<float>(K(i, j)), v[j] = static_cast<float>(V(i, j));
    h.Append(k.data(), v.data(), i, logw.empty() ? 0.f : logw[i]);
  }
  return h;
}

// softmax(q.k/sqrt d + b) V for every query row of Q, in float64.
inline Eigen::MatrixXd HeadOutputs(const kv::HeadStore& s, const Eigen::MatrixXd& Q) {
  const int d = s.head_dim();
  Eigen::MatrixXd out = Eigen::MatrixXd::Zero(Q.rows(), d);
  std::vector<float> k(d), v(d);
  for (int r = 0; r < Q.rows(); ++r) {
    std::vector<double> sc(s.size());
    for (int i = 0; i < s.size(); ++i) {
      s.ReadKey(i, k.data());
      double dot = 0;
      for (int j = 0; j < d; ++j) dot += Q(r, j) * k[j];
      sc[i] = dot / std::sqrt(double(d)) + s.logw(i);
    }
    const double mx = sc.empty() ? 0 : *std::max_element(sc.begin(), sc.end());
    double z = 0;
    for (int i = 0; i < s.size(); ++i) {
      s.ReadValue(i, v.data());
      const double e = std::exp(sc[i] - mx);
      z += e;
      for (int j = 0; j < d; ++j) out(r, j) += e * v[j];
    }
    if (z > 0) out.row(r) /= z;
  }
  return out;
}

// The error of the head after `plan` (fitted weights and values applied)
// and of its kept entries as they are, on the queries' outputs.
struct PlanErrors {
  double fitted = 0, plain = 0;
};
inline PlanErrors ErrorsOfPlan(const kv::HeadStore& h, const kv::Plan& plan, const Eigen::MatrixXd& Q) {
  kv::HeadStore fitted = h, plain = h;
  fitted.Apply(plan);
  plain.Apply(kv::Plan::Keep(plan.keep));
  const Eigen::MatrixXd ref = HeadOutputs(h, Q);
  return {(HeadOutputs(fitted, Q) - ref).norm(), (HeadOutputs(plain, Q) - ref).norm()};
}

}  // namespace kvtrim::test
