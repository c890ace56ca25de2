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
PolicyInfo KvslimmerPolicyInfo();
PolicyInfo MergeMeanPolicyInfo();
PolicyInfo RazorPolicyInfo();
PolicyInfo CompactorPolicyInfo();

// SnapKV (snapkv.cpp); PyramidKV is SnapKV with layer budgets.
class SnapkvPolicy : public Policy {
 public:
  SnapkvPolicy(int window, int kernel, int value_norm = 0)
      : window_(window), kernel_(kernel), value_norm_(value_norm) {}
  StatsNeeds needs() const override;
  bool decode_time() const override { return false; }
  int protected_entries() const override { return window_; }
  Plan Compress(const PolicyContext& ctx) override;

 private:
  int window_, kernel_, value_norm_;
};

}  // namespace kvtrim::kv
