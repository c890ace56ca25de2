// `POLICY+threshold` in the eval (src/eval/threshold_match.cpp): the matched
// T holds the ratio on its calibration contexts, as sessions at that T
// measure independently; the sweep runs its cells at the matched T and
// reports each column's T.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/engine_impl.h"
#include "kvtrim/eval_sweep.h"
#include "kvtrim/eval_tasks.h"
#include "eval/threshold_match.h"
#include "kv/cache.h"
#include "test_util.h"

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// The mean held share at threshold T, by plain sessions.
double HeldShare(const Engine& e, KvOptions kv, double T, const std::vector<std::vector<int>>& contexts) {
  kv.threshold = T;
  double sum = 0;
  for (const auto& t : contexts) {
    SessionOptions so;
    so.kv = kv;
    auto s = Session::Create(e, so);
    EXPECT_TRUE(s.ok()) << s.error().message;
    EXPECT_TRUE(s.value()->Prefill(t).ok());
    EXPECT_TRUE(s.value()->Compress().ok());
    const kv::KvCache& c = s.value()->impl().cache();
    double held = 0;
    for (int l = 0; l < c.n_layer(); ++l)
      for (int h = 0; h < c.n_head_kv(); ++h) held += c.head(l, h).size();
    sum += held / (static_cast<double>(c.n_layer()) * c.n_head_kv() * t.size());
  }
  return sum / static_cast<double>(contexts.size());
}

TEST(EvalThreshold, MatchedThresholdHoldsTheRatioOnItsContexts) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  EXPECT_TRUE(MethodThreshold("snapkv+threshold"));
  EXPECT_FALSE(MethodThreshold("snapkv+adaptive"));
  EXPECT_EQ(MethodPolicy("snapkv+threshold"), "snapkv");
  auto contexts = HeadBudgetContexts(*e, test::SharedPath("data/frankenstein.txt"), 2, 400, 0, 7);
  ASSERT_TRUE(contexts.ok()) << contexts.error().message;
  const KvOptions kv = MethodOptions({}, "snapkv+threshold", 0.1);
  EXPECT_EQ(kv.policy, "snapkv");
  auto matched = MatchThreshold(*e, kv, {0.1}, contexts.value());
  ASSERT_TRUE(matched.ok()) << matched.error().message;
  const ThresholdMatch* m = &matched.value()[0];
  EXPECT_NEAR(m->held, 0.1, 0.01) << "T " << m->threshold;
  // What plain sessions at that T hold, and the share falls as T grows.
  EXPECT_NEAR(HeldShare(*e, kv, m->threshold, contexts.value()), m->held, 1e-12);
  EXPECT_GT(HeldShare(*e, kv, m->threshold / 2, contexts.value()), m->held);
  EXPECT_LT(HeldShare(*e, kv, m->threshold * 2, contexts.value()), m->held);
  // A policy without entry scores is refused, naming the flag.
  auto bad = MatchThreshold(*e, MethodOptions({}, "window+threshold", 0.1), {0.1}, contexts.value());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("--kv-threshold"), std::string::npos) << bad.error().message;
}

TEST(EvalThreshold, SweepRunsEachColumnAtItsMatchedThreshold) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o;
  o.methods = {"snapkv+threshold"};
  o.ratios = {0.25, 0.1};
  o.tasks = {TaskKind::kNiah};
  o.fidelity = o.fidelity_decode = false;
  o.samples = 2;
  o.context_tokens = 400;
  o.haystack = test::SharedPath("data/frankenstein.txt");
  auto rep = RunSweep(*e, o);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->meta.notes.size(), 2u);
  EXPECT_EQ(rep->meta.notes[1].rfind("snapkv+threshold at 0.1: T = ", 0), 0u) << rep->meta.notes[1];
  // The T of each column, matched on the sweep's own calibration contexts.
  auto contexts = HeadBudgetContexts(*e, o.haystack, kThresholdContexts, 400, 0, o.seed + 1000);
  ASSERT_TRUE(contexts.ok());
  double share[2] = {0, 0};
  auto matched = MatchThreshold(*e, MethodOptions({}, "snapkv+threshold", 1.0), o.ratios, contexts.value());
  ASSERT_TRUE(matched.ok());
  for (int i = 0; i < 2; ++i) {
    char t[64];
    std::snprintf(t, sizeof t, "T = %.4g ", matched.value()[i].threshold);
    EXPECT_NE(rep->meta.notes[i].find(t), std::string::npos) << rep->meta.notes[i] << " vs " << t;
  }
  // The cells ran at a threshold: heads hold different counts (a ratio
  // holds ceil(r n) in every head).
  for (const SampleRecord& r : rep->samples) {
    if (r.method == "full") continue;
    ASSERT_EQ(r.head_entries.size(), 16u) << r.ratio;
    EXPECT_NE(*std::min_element(r.head_entries.begin(), r.head_entries.end()),
              *std::max_element(r.head_entries.begin(), r.head_entries.end()));
  }
  for (const Cell& c : rep->cells) {
    if (c.method == "full") continue;
    ASSERT_EQ(c.n, 2) << c.note;
    share[c.ratio == 0.25 ? 0 : 1] = c.kv_bytes / c.kv_bytes_full;
  }
  // Samples are not the calibration contexts: near the ratio, not at it.
  EXPECT_GT(share[0], share[1]);
  EXPECT_NEAR(share[0], 0.25, 0.1);
  EXPECT_NEAR(share[1], 0.1, 0.05);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval
