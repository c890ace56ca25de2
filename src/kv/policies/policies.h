// Policy classes more than one policy file builds on; every policy is one
// source file under policies/, registered by one line in registry.cpp.
#pragma once
#include <atomic>
#include <memory>

#include "kv/policy.h"

namespace kvtrim::kv {

// SnapKV (snapkv.cpp); PyramidKV is SnapKV with layer budgets.
class SnapkvPolicy : public Policy {
 public:
  SnapkvPolicy(int window, int kernel, int value_norm = 0)
      : window_(window), kernel_(kernel), value_norm_(value_norm) {}
  // Its traits with observation window w (PyramidKV adds its allocator).
  static PolicyTraits Traits(int window);
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
  Plan Compress(const PolicyContext& ctx) override;
  // Picked keys dropped because NNLS gave them weight 0 (or < 1e-12 max w).
  int64_t dropped() const { return dropped_.load(); }
  // am-dropped, am-refilled (keys the refill rounds added that kept a
  // weight), am-filled-plain (added after the rounds with their own b);
  // the fit's time split, summed over heads and threads: am-scores-us (the
  // scores, their exp, the full outputs, the distinct candidates), am-select-us (selection, NNLS,
  // refill), am-values-us (the values' least squares).
  std::vector<std::pair<std::string, int64_t>> Counters() const override;

 private:
  std::unique_ptr<AmConfig> c_;
  std::atomic<int64_t> dropped_{0}, refilled_{0}, filled_plain_{0};
  std::atomic<int64_t> scores_us_{0}, select_us_{0}, nnls_us_{0}, values_us_{0};
};

}  // namespace kvtrim::kv
