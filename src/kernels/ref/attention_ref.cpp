#include "kernels/ref/attention_ref.h"

#include <algorithm>
#include <cmath>

namespace kvtrim::kernels::ref {

std::vector<double> Attend(const std::vector<float>& q, const std::vector<std::vector<float>>& keys,
                           const std::vector<std::vector<float>>& values, const std::vector<float>& logw,
                           double scale, std::vector<double>* probs) {
  const size_t n = keys.size(), d = q.size();
  std::vector<double> s(n);
  double m = -INFINITY;
  for (size_t j = 0; j < n; ++j) {
    double dot = 0;
    for (size_t i = 0; i < d; ++i) dot += double{q[i]} * keys[j][i];
    s[j] = dot * scale + logw[j];
    m = std::max(m, s[j]);
  }
  double z = 0;
  for (double& x : s) z += (x = std::exp(x - m));
  std::vector<double> out(d, 0.0);
  for (size_t j = 0; j < n; ++j) {
    s[j] /= z;
    for (size_t i = 0; i < d; ++i) out[i] += s[j] * values[j][i];
  }
  if (probs) *probs = s;
  return out;
}

}  // namespace kvtrim::kernels::ref
