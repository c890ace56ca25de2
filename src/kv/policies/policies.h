// The registered policies (one source file each); registry.cpp lists them.
#pragma once
#include "kv/policy.h"

namespace kvtrim::kv {

PolicyInfo FullPolicyInfo();
PolicyInfo WindowPolicyInfo();
PolicyInfo RandomPolicyInfo();
PolicyInfo LruPolicyInfo();
PolicyInfo H2oPolicyInfo();
PolicyInfo ScissorhandsPolicyInfo();
PolicyInfo SnapkvPolicyInfo();
PolicyInfo PyramidkvPolicyInfo();

// SnapKV's score, shared with PyramidKV: observation-window mass on every
// entry before the window, average-pooled (kernel k, zero padding).
std::vector<double> SnapkvScores(const PolicyContext& ctx, int window, int kernel);

}  // namespace kvtrim::kv
