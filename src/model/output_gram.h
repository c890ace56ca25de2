// The output projection seen from each query head: for layer l and query
// head q, M = W_o,q^T W_o,q (hd x hd), where W_o,q is the block of columns
// of W_o that head q's attention output multiplies. Then
// ||W_o,q v|| = sqrt(v^T M v) for any value v: KVzip+'s column term
// (kv/policies/kvzip.cpp) without a D-wide product per entry.
#pragma once
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace kvtrim::model {

// [n_layer][n_head][hd][hd], row-major; empty when W_o is not [dim, n_head*hd].
std::vector<float> OutputGrams(const ModelConfig& c, const Weights& w);

}  // namespace kvtrim::model
