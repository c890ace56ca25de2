// The registered policies (one source file each); registry.cpp lists them.
#pragma once
#include <atomic>
#include <memory>

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
PolicyInfo AmPolicyInfo();
PolicyInfo TovaPolicyInfo();
PolicyInfo KnormPolicyInfo();
PolicyInfo KeydiffPolicyInfo();
PolicyInfo KvzipPolicyInfo();
PolicyInfo KvzipPlusPolicyInfo();
PolicyInfo ExpectedAttentionPolicyInfo();

// SnapKV (snapkv.cpp); PyramidKV is SnapKV with layer budgets.
class SnapkvPolicy : public Policy {
 public:
  SnapkvPolicy(int window, int kernel, int value_norm = 0)
      : window_(window), kernel_(kernel), value_norm_(value_norm) {}
  StatsNeeds needs() const override;
  bool decode_time() const override { return false; }
  int protected_entries() const override { return window_; }
  bool has_entry_scores() const override { return true; }
  EntryScores Score(const PolicyContext& ctx) override;
  Plan Compress(const PolicyContext& ctx) override;

 private:
  int window_, kernel_, value_norm_;
};

// Attention Matching (am.cpp; METHODS.md section 4).
struct AmConfig;
class AmPolicy : public Policy {
 public:
  explicit AmPolicy(const AmConfig& c);
  ~AmPolicy() override;
  StatsNeeds needs() const override;
  bool decode_time() const override { return false; }
  ReferencePass reference_pass() const override;
  Plan Compress(const PolicyContext& ctx) override;
  // A prompt prefilled in chunks: each chunk is compacted to its share of
  // the budget with its own reference queries (its prefill queries and its
  // repeat pass), the entries of earlier chunks left as they are; not with
  // --am-onpolicy.
  std::string StreamBlocker() const override;
  bool compresses_each_chunk() const override { return true; }
  // Picked keys dropped because NNLS gave them weight 0 (or < 1e-12 max w).
  int64_t dropped() const { return dropped_.load(); }
  // am-dropped, am-refilled (keys the refill rounds added that kept a
  // weight), am-filled-plain (added after the rounds with their own b).
  std::vector<std::pair<std::string, int64_t>> Counters() const override;

 private:
  std::unique_ptr<AmConfig> c_;
  std::atomic<int64_t> dropped_{0}, refilled_{0}, filled_plain_{0};
};

}  // namespace kvtrim::kv
