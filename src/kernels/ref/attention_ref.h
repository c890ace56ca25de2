// Scalar float64 reference attention over an entry list with log-weights.
#pragma once
#include <vector>

namespace kvtrim::kernels::ref {

// q: [d]; keys, values: [n][d]; logw: [n]. Returns the output [d] and, in
// probs, the attention weights.
std::vector<double> Attend(const std::vector<float>& q, const std::vector<std::vector<float>>& keys,
                           const std::vector<std::vector<float>>& values, const std::vector<float>& logw,
                           double scale, std::vector<double>* probs = nullptr);

}  // namespace kvtrim::kernels::ref
