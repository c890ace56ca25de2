// `needle_kept`: per KV head, the share of the asked needle's tokens a head
// holds after compression, checked against what StreamingLLM's window keeps
// by its definition (the first S sinks and the most recent B - S entries),
// computed here from the task's own needle positions.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine_impl.h"
#include "kvtrim/eval_sweep.h"
#include "kvtrim/eval_tasks.h"
#include "model/config.h"
#include "test_util.h"

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// Tokens of [start, start + len) in [0, sinks) or [n - recent, n).
int InWindow(int start, int len, int sinks, int n, int recent) {
  int in = 0;
  for (int p = start; p < start + len; ++p) in += p < sinks || p >= n - recent;
  return in;
}

TEST(EvalNeedleKept, WindowKeepsTheNeedleTokensItsDefinitionSays) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o;
  o.methods = {"full", "window"};
  o.tasks = {TaskKind::kNiah};
  o.samples = 2;
  o.context_tokens = 300;
  o.fidelity = o.fidelity_decode = false;
  o.haystack = test::SharedPath("data/frankenstein.txt");
  // The samples the sweep will draw, to place the window's edge inside the
  // first sample's needle: a partial share, not only 0 or 1.
  auto hay = Haystack::Load(o.haystack);
  ASSERT_TRUE(hay.ok());
  TaskOptions to;
  to.context_tokens = o.context_tokens;
  to.seed = o.seed;
  std::vector<TaskSample> ts;
  for (int i = 0; i < o.samples; ++i) {
    auto s = MakeSample(*e, hay.value(), TaskKind::kNiah, to, i, o.samples);
    ASSERT_TRUE(s.ok());
    ts.push_back(s.value());
  }
  const int n = static_cast<int>(ts[0].context.size());
  const int start = ts[0].needle_starts[ts[0].asked_needles[0]];
  const int len = ts[0].needle_lengths[ts[0].asked_needles[0]];
  ASSERT_GE(len, 4);
  const double r_mid = (n - start - len / 2 + 4) / static_cast<double>(n);
  o.ratios = {0.05, r_mid, 1.0};
  auto rep = RunSweep(*e, o);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  const int heads = e->impl().config().n_layer * e->impl().config().n_head_kv;
  int partial = 0, checked = 0;
  for (const SampleRecord& s : rep->samples) {
    ASSERT_EQ(static_cast<int>(s.needle_kept.size()), heads) << s.method << " " << s.ratio;
    const TaskSample& t = ts[s.sample];
    const int a = t.needle_starts[t.asked_needles[0]], l = t.needle_lengths[t.asked_needles[0]];
    const int held = static_cast<int>(s.entries_compressed / heads);  // uniform budget
    const int nt = static_cast<int>(t.context.size());
    const double want = s.method == "full" ? 1.0 : InWindow(a, l, 4, nt, held - 4) / static_cast<double>(l);
    for (double v : s.needle_kept) EXPECT_DOUBLE_EQ(v, want) << s.method << " r=" << s.ratio << " sample " << s.sample;
    partial += want > 0 && want < 1;
    ++checked;
  }
  EXPECT_EQ(checked, 2 * (1 + 3));  // full once, window at three ratios
  EXPECT_GE(partial, 1);            // the edge did fall inside a needle
  for (const Cell& c : rep->cells) {
    ASSERT_FALSE(c.needle_kept.empty());
    if (c.method == "full") {
      EXPECT_DOUBLE_EQ(c.needle_kept_mean, 1.0);
    }
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval
