// Compactor's scorers (METHODS.md section 3), exposed for the tests: the
// non-causal chunked attention score, SnapKV-style average pooling and the
// z-score blend. The policy itself is registered from compactor.cpp.
#pragma once
#include <vector>

namespace kvtrim::kv {

// Column sums of softmax(Q_c K_c^T / sqrt(d)) inside consecutive chunks of
// `chunk` positions (no causal mask), summed over the G query heads.
// q: [n, G, d] rotated queries, k: [n, d] rotated keys. Returns [n].
std::vector<double> ChunkAttentionScores(const float* q, const float* k, int n, int G, int d, int chunk);
// Average pooling with zero padding, divided by the kernel (avg_pool1d with
// count_include_pad, as SnapKV); kernel 1 returns x.
std::vector<double> AvgPool(const std::vector<double>& x, int kernel);
// (x - mean) / sd; all zeros when sd is 0 (constant input), never NaN.
std::vector<double> ZScore(const std::vector<double>& x);
// z(a) + lambda z(o).
std::vector<double> BlendScores(const std::vector<double>& a, const std::vector<double>& o, double lambda);

}  // namespace kvtrim::kv
