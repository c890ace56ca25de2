// Cardinality weights of merged entries (METHODS.md section 0) that cannot
// divide by zero: c_i = exp(b_i) normalized with the largest b shifted out,
// so entries whose exp(b) all underflow still get weights summing to one.
#pragma once
#include <vector>

namespace kvtrim::kv::numerics {

// w_i = exp(b_i - log_sum), log_sum = log sum_i exp(b_i). NaN log-weights
// count as -inf. When every b_i is -inf (no cardinality left: a merge whose
// weights vanish) the weights are uniform and log_sum is -inf; when some are
// +inf those share the weight equally and log_sum is +inf. Empty b: empty w,
// log_sum -inf.
double CardinalityWeights(const std::vector<double>& b, std::vector<double>* w);

}  // namespace kvtrim::kv::numerics
