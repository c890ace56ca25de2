#include "kv/numerics/cardinality.h"

#include <cmath>
#include <limits>

namespace kvtrim::kv::numerics {

double CardinalityWeights(const std::vector<double>& b, std::vector<double>* w) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const size_t n = b.size();
  w->assign(n, 0.0);
  double m = -kInf;
  for (double x : b)
    if (x > m) m = x;  // NaN never compares greater
  if (n == 0) return -kInf;
  if (m == -kInf || m == kInf) {  // uniform over every entry, or over the +inf ones
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) k += m == -kInf || b[i] == kInf;
    for (size_t i = 0; i < n; ++i) (*w)[i] = m == -kInf || b[i] == kInf ? 1.0 / static_cast<double>(k) : 0.0;
    return m;
  }
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += (*w)[i] = b[i] > -kInf ? std::exp(b[i] - m) : 0.0;  // the max gives 1: s >= 1
  for (double& x : *w) x /= s;
  return m + std::log(s);
}

}  // namespace kvtrim::kv::numerics
