// Key-geometry scorers of `knorm` and `keydiff` (exposed for the tests):
// both read the keys as the cache stores them (post-RoPE; RoPE is a rotation
// per pair of dimensions, so a key's L2 norm is the same before and after it).
#pragma once
#include <vector>

#include "kv/cache.h"

namespace kvtrim::kv {

// KNorm: -||k_i||_2 (the smallest norms score highest).
std::vector<double> KNormScores(const HeadStore& s);
// KeyDiff: -cos(k_i, a) with the anchor a = mean_j k_j / ||k_j|| (the mean of
// the unit keys, as in the KeyDiff paper); a zero key or anchor has cosine 0.
std::vector<double> KeyDiffScores(const HeadStore& s);

}  // namespace kvtrim::kv
