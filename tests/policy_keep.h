// KeepOf: the entries a policy keeps of one head (its Compress plan's keep
// list), shared by the policy tests.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kv/policy.h"
#include "kv/stats.h"

namespace kvtrim::test {

inline std::vector<int> KeepOf(const std::string& name, const kv::Params& p, const kv::HeadStore& h, const kv::HeadStats* st, int budget,
                            kv::Phase phase = kv::Phase::kPrefill, const kv::AttentionStats* all = nullptr) {
  auto pol = kv::MakePolicy(name, p);
  EXPECT_TRUE(pol.ok()) << (pol.ok() ? "" : pol.error().message);
  kv::PolicyContext ctx;
  ctx.phase = phase;
  ctx.store = &h;
  ctx.stats = st;
  ctx.all_stats = all;
  ctx.budget = budget;
  ctx.logical_len = ctx.rope_len = h.size();
  kv::Plan plan = pol.value()->Compress(ctx);
  EXPECT_FALSE(plan.noop);
  return plan.keep;
}

}  // namespace kvtrim::test
