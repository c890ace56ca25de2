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

// SnapKV (snapkv.cpp); PyramidKV is SnapKV with layer budgets.
class SnapkvPolicy : public Policy {
 public:
  SnapkvPolicy(int window, int kernel) : window_(window), kernel_(kernel) {}
  StatsNeeds needs() const override;
  bool decode_time() const override { return false; }
  int protected_entries() const override { return window_; }
  Plan Compress(const PolicyContext& ctx) override;

 private:
  int window_, kernel_;
};

}  // namespace kvtrim::kv
