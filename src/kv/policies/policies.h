// Policy classes more than one policy file builds on; every policy is one
// source file under policies/, registered by one line in registry.cpp.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "kv/policy.h"

namespace kvtrim::kernels {
class HugeScratch;  // kernels/scratch.h
}  // namespace kvtrim::kernels

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

// KVzip and KVzip+ (kvzip.cpp): entries scored by the reconstruction pass,
// the scores carried from chunk to chunk; Select turns a head's scores into
// its plan (the top ctx.budget; kvzip-am fits the kept entries).
class KvzipPolicy : public Policy {
 public:
  KvzipPolicy(bool plus, int pool) : plus_(plus), pool_(pool) {}
  EntryScores Score(const PolicyContext& ctx) override;
  Plan Compress(const PolicyContext& ctx) override;
  void EndChunk(const PolicyContext& ctx) override;

 protected:
  virtual Plan Select(const PolicyContext& ctx, const std::vector<double>& score);

 private:
  bool plus_;
  int pool_;  // max-pooling kernel over neighbouring positions (1: none)
  std::once_flag sized_;
  // Per head (l * n_head_kv + h), the largest reconstruction score of its
  // first entries (those kept by an earlier chunk's or turn's compression),
  // in store order; sized at the first chunk's end or compression.
  std::vector<std::vector<double>> carried_;

  std::vector<double>* Carried(const PolicyContext& ctx);
  std::vector<double> Combined(const PolicyContext& ctx);
  // Combined's scores, each raised to its neighbours' within the pooling
  // window (what ranks the entries; the carried scores stay unpooled).
  std::vector<double> Ranked(const PolicyContext& ctx, const std::vector<double>& combined) const;
};
// Each entry's score raised to the largest of the entries whose positions
// lie within kernel / 2 of its own (a max-pool over positions, SnapKV's
// maxpool option, on a head's entries in store order); kernel 1: unchanged.
std::vector<double> MaxPoolByPosition(const HeadStore& store, const std::vector<double>& score, int kernel);
// KVzip's parameters and traits (the shared budget, the reconstruction pass);
// the pooling kernel's and the floor share's defaults are the policy's own
// (kvzip: 3 and 0.25, the setting measured best at 8k; kvzip+ and kvzip-am:
// 1 and 0, as they were measured).
std::vector<ParamSpec> KvzipParams(int pool_default = 1, double floor_share_default = 0);
std::function<PolicyTraits(const Params&)> KvzipTraits(bool plus);

// Attention Matching (am.cpp; METHODS.md section 4).
struct AmConfig;
class AmFitCounters;
class AmPolicy : public Policy {
 public:
  explicit AmPolicy(const AmConfig& c);
  ~AmPolicy() override;
  Plan Compress(const PolicyContext& ctx) override;
  // Picked keys dropped because NNLS gave them weight 0 (or < 1e-12 max w).
  int64_t dropped() const;
  // am-dropped, am-refilled (keys the refill rounds added that kept a
  // weight), am-filled-plain (added after the rounds with their own b);
  // the fit's time split, summed over heads and threads: am-scores-us (the
  // scores, their exp, the full outputs, the distinct candidates), am-select-us (selection, NNLS,
  // refill), am-values-us (the values' least squares).
  std::vector<std::pair<std::string, int64_t>> Counters() const override;

 private:
  std::unique_ptr<AmConfig> c_;
  std::unique_ptr<AmFitCounters> counters_;
  std::unique_ptr<kernels::HugeScratch> scratch_;  // the fit's scores buffers, reused across heads and chunks
};

}  // namespace kvtrim::kv
