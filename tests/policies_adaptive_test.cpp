// tova, knorm, keydiff on hand-made caches (the evicted entries computed by
// hand, the scores against scalar references) and AdaKV head-adaptive
// budgets (--head-budget adaptive): closed-form allocations, the layer total,
// the floor, and the whole path through a session on the default model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "engine/engine_impl.h"
#include "policy_keep.h"
#include "io/tokenizer.h"
#include "kvtrim/eval_report.h"
#include "kvtrim/eval_sweep.h"
#include "kv/budget.h"
#include "kv/compressor.h"
#include "kv/policies/key_scores.h"
#include "kv/policy.h"
#include "kv/stats.h"
#include "kv/taps/latest_query.h"
#include "kvtrim/engine.h"
#include "model/config.h"
#include "test_util.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// TOVA's statistic, the latest-query tap (kv/taps/latest_query.h).
const std::vector<float>& Cur(const HeadStats& h) {
  static const std::vector<float> none;
  const auto* s = h.taps.Get<LatestQueryStat>(kLatestQueryTap);
  return s ? s->values() : none;
}


using budget::AdaptiveHeadBudgets;
using budget::NormalizeHeadScores;

HeadStore HeadWithKeys(const std::vector<std::vector<float>>& keys) {
  const int d = static_cast<int>(keys[0].size());
  HeadStore h(d, GgmlType::F32);
  for (size_t i = 0; i < keys.size(); ++i) h.Append(keys[i].data(), keys[i].data(), static_cast<int32_t>(i), 0.f);
  return h;
}

HeadStore ZeroHead(int n, int d = 4) { return HeadWithKeys(std::vector<std::vector<float>>(n, std::vector<float>(d, 0.f))); }

using test::KeepOf;

// One query (the latest) over 6 entries from 2 query heads of the group:
// group mean {.20, .15, .15, .06, .24, .20}.
AttentionStats TovaStats() {
  StatsNeeds n;
  n.taps = {kLatestQueryTap};
  AttentionStats st(1, 1, 2, 4, n);
  // A batch of two queries at positions 4, 5: only the last (5) counts.
  st.OnBatch(4, 2);
  const float early[5] = {1.f, 0.f, 0.f, 0.f, 0.f};
  st.OnProbs(0, 0, 0, 0, early, 5);
  st.OnProbs(0, 0, 0, 1, early, 5);
  const float p0[6] = {.30f, .05f, .20f, .10f, .15f, .20f}, p1[6] = {.10f, .25f, .10f, .02f, .33f, .20f};
  st.OnProbs(0, 0, 1, 0, p0, 6);
  st.OnProbs(0, 0, 1, 1, p1, 6);
  return st;
}

TEST(Tova, CurrentQueryGroupMean) {
  AttentionStats st = TovaStats();
  const std::vector<float> want = {.20f, .15f, .15f, .06f, .24f, .20f};
  ASSERT_EQ(Cur(st.head(0, 0)).size(), want.size());
  for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(Cur(st.head(0, 0))[j], want[j], 1e-6) << j;
}

TEST(Tova, EvictsLowestCurrentAttention) {
  AttentionStats st = TovaStats();
  HeadStore h = ZeroHead(6);
  // Decode step: one over budget, the least attended (3: .06) goes.
  EXPECT_EQ(KeepOf("tova", {}, h, &st.head(0, 0), 5, Phase::kDecode), (std::vector<int>{0, 1, 2, 4, 5}));
  // Budget 3: the newest (5) stays, then 4 (.24) and 0 (.20); 1, 2, 3 go.
  EXPECT_EQ(KeepOf("tova", {}, h, &st.head(0, 0), 3), (std::vector<int>{0, 4, 5}));
  // --sinks 2 protects positions 0 and 1, then the best other is 4 (.24).
  EXPECT_EQ(KeepOf("tova", {{"sinks", 2}}, h, &st.head(0, 0), 4), (std::vector<int>{0, 1, 4, 5}));
  // The statistics follow an eviction.
  st.Retain(0, 0, {0, 4, 5});
  EXPECT_NEAR(Cur(st.head(0, 0))[1], .24f, 1e-6);
}

TEST(KNorm, KeepsSmallestNorms) {
  // norms 5, 1, 2, 0.5, 6, 2 (entry 5 is the newest, always kept).
  HeadStore h = HeadWithKeys({{3, 4, 0, 0}, {1, 0, 0, 0}, {0, 0, 2, 0}, {0, 0, 0, .5f}, {6, 0, 0, 0}, {1, 1, 1, 1}});
  EXPECT_EQ(KeepOf("knorm", {}, h, nullptr, 3), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(KeepOf("knorm", {}, h, nullptr, 4), (std::vector<int>{1, 2, 3, 5}));
}

TEST(KNorm, ScoresMatchScalarReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.f, 2.f);
  std::vector<std::vector<float>> keys(40, std::vector<float>(32));
  for (auto& k : keys)
    for (float& x : k) x = g(rng);
  const std::vector<double> s = KNormScores(HeadWithKeys(keys));
  for (size_t i = 0; i < keys.size(); ++i) {
    double ss = 0;
    for (float x : keys[i]) ss += static_cast<double>(x) * x;
    EXPECT_NEAR(s[i], -std::sqrt(ss), 1e-9) << i;
  }
}

TEST(KeyDiff, KeepsKeysLeastLikeTheAnchor) {
  // Unit keys (1,0), (1,0), (0,1), (-1,0), (1,0); entry 1 is (5,0): the
  // anchor is the mean of the UNIT keys, (0.4, 0.2). cos: entries 0, 1, 4
  // 0.894, entry 2 0.447, entry 3 -0.894. Budget 3: the newest (4), then 3
  // and 2; 0 and 1 go.
  HeadStore h = HeadWithKeys({{1, 0}, {5, 0}, {0, 1}, {-1, 0}, {1, 0}});
  const std::vector<double> s = KeyDiffScores(h);
  EXPECT_NEAR(s[0], -0.4 / std::sqrt(0.2), 1e-6);
  EXPECT_NEAR(s[1], -0.4 / std::sqrt(0.2), 1e-6);
  EXPECT_NEAR(s[2], -0.2 / std::sqrt(0.2), 1e-6);
  EXPECT_NEAR(s[3], 0.4 / std::sqrt(0.2), 1e-6);
  EXPECT_EQ(KeepOf("keydiff", {}, h, nullptr, 3), (std::vector<int>{2, 3, 4}));
}

TEST(KeyDiff, ScoresMatchScalarReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.5f, 1.f);
  const int n = 30, d = 16;
  std::vector<std::vector<float>> keys(n, std::vector<float>(d));
  for (auto& k : keys)
    for (float& x : k) x = g(rng);
  std::vector<double> anchor(d, 0.0);
  for (const auto& k : keys) {
    double nn = 0;
    for (float x : k) nn += static_cast<double>(x) * x;
    for (int c = 0; c < d; ++c) anchor[c] += k[c] / std::sqrt(nn) / n;
  }
  const std::vector<double> s = KeyDiffScores(HeadWithKeys(keys));
  for (int i = 0; i < n; ++i) {
    double dot = 0, kk = 0, aa = 0;
    for (int c = 0; c < d; ++c) dot += keys[i][c] * anchor[c], kk += static_cast<double>(keys[i][c]) * keys[i][c], aa += anchor[c] * anchor[c];
    EXPECT_NEAR(s[i], -dot / std::sqrt(kk * aa), 1e-9) << i;
  }
}

EntryScores Mass(std::vector<double> s, std::vector<bool> prot = {}) {
  if (prot.empty()) prot.assign(s.size(), false);
  return {std::move(s), std::move(prot), true};
}

TEST(AdaptiveBudget, Normalisation) {
  const std::vector<double> a = NormalizeHeadScores(Mass({1, 3, 4}));
  EXPECT_EQ(a, (std::vector<double>{0.125, 0.375, 0.5}));
  const std::vector<double> b = NormalizeHeadScores({{-5, -3, -1}, {false, false, false}, false});  // shifted: 0, 2, 4
  EXPECT_EQ(b, (std::vector<double>{0.0, 2.0 / 6, 4.0 / 6}));
  const std::vector<double> c = NormalizeHeadScores(Mass({0, 0, 0, 0}));
  EXPECT_EQ(c, std::vector<double>(4, 0.25));
}

TEST(AdaptiveBudget, HandComputedTopK) {
  // b = 2 per head (total 4), floor ceil(0.5 * 2) = 1: A's best (.4) and B's
  // best (.7) first; the other 2 places go to the highest rest, A's .3 and .2.
  EXPECT_EQ(AdaptiveHeadBudgets({Mass({1, 2, 3, 4}), Mass({7, 1, 1, 1})}, 2, 0.5), (std::vector<int>{3, 1}));
  // Without a floor B's .7 still wins one place, A the rest.
  EXPECT_EQ(AdaptiveHeadBudgets({Mass({1, 2, 3, 4}), Mass({7, 1, 1, 1})}, 2, 0.0), (std::vector<int>{3, 1}));
  // Scale does not matter (mass shares): B x 100 changes nothing.
  EXPECT_EQ(AdaptiveHeadBudgets({Mass({1, 2, 3, 4}), Mass({700, 100, 100, 100})}, 2, 0.5), (std::vector<int>{3, 1}));
}

TEST(AdaptiveBudget, LayerTotalFloorAndConcentratedMass) {
  const int H = 4, n = 100, b = 25;
  std::mt19937 rng(11);
  std::exponential_distribution<double> ex(1.0);
  std::vector<EntryScores> heads;
  for (int h = 0; h < H; ++h) {
    std::vector<double> s(n);
    for (double& x : s) x = std::pow(ex(rng), 1 + h);  // heads of different peakedness
    heads.push_back(Mass(s));
  }
  for (double share : {0.0, 0.2, 0.5, 1.0}) {
    const std::vector<int> bud = AdaptiveHeadBudgets(heads, b, share);
    EXPECT_EQ(std::accumulate(bud.begin(), bud.end(), 0), H * b) << share;
    for (int x : bud) EXPECT_GE(x, static_cast<int>(std::ceil(share * b - 1e-9))) << share;
    if (share == 1.0) {
      EXPECT_EQ(bud, std::vector<int>(H, b));  // the floor is the uniform share
    }
  }
  // Head 0 spreads its mass over its 100 entries; heads 1-3 put all of theirs
  // on one protected entry (a window / sink): their other entries score 0.
  // Floors 5 each; the 80 other places all go to head 0.
  std::vector<EntryScores> conc = {Mass(std::vector<double>(n, 1.0))};
  for (int h = 1; h < H; ++h) {
    std::vector<double> s(n, 0.0);
    std::vector<bool> prot(n, false);
    s[n - 1] = 1.0, prot[n - 1] = true;
    conc.push_back(Mass(s, prot));
  }
  EXPECT_EQ(AdaptiveHeadBudgets(conc, b, 0.2), (std::vector<int>{85, 5, 5, 5}));
  // Protected entries raise a head's floor; budgets never exceed a head's entries.
  std::vector<bool> many(n, false);
  for (int i = 0; i < 30; ++i) many[n - 1 - i] = true;
  const std::vector<int> p = AdaptiveHeadBudgets({Mass(std::vector<double>(n, 1.0), many), Mass(std::vector<double>(10, 1.0))}, 25, 0.2);
  EXPECT_GE(p[0], 30);
  EXPECT_EQ(p[1], 10);
  EXPECT_EQ(p[0] + p[1], 50);
}

TEST(AdaptiveBudget, OnlyScoringPolicies) {
  KvOptions o;
  o.policy = "window";
  o.ratio = 0.5;
  o.head_budget = "adaptive";
  EXPECT_FALSE(Compressor::Create(o, 2, 2, 2, 8).ok());
  for (const char* p : {"h2o", "snapkv", "pyramidkv", "compactor", "tova", "knorm", "keydiff"}) {
    o.policy = p;
    EXPECT_TRUE(Compressor::Create(o, 2, 2, 2, 8).ok()) << p;
  }
  o.head_budget = "sometimes";
  EXPECT_FALSE(Compressor::Create(o, 2, 2, 2, 8).ok());
}

TEST(AdaptiveBudget, MethodSpecInEval) {
  KvOptions shared;
  shared.params["obs-window"] = 16;
  shared.params["sinks"] = 2;
  const KvOptions a = eval::MethodOptions(shared, "snapkv+adaptive", 0.25);
  EXPECT_EQ(a.policy, "snapkv");
  EXPECT_EQ(a.head_budget, "adaptive");
  EXPECT_EQ(a.params, (std::map<std::string, double>{{"obs-window", 16}}));
  const KvOptions u = eval::MethodOptions(shared, "snapkv", 0.25);
  EXPECT_EQ(u.head_budget, "uniform");
  EXPECT_EQ(eval::MethodPolicy("tova+adaptive"), "tova");
  EXPECT_FALSE(eval::MethodAdaptive("+adaptive"));
}

// The whole path on the default model: per layer the heads' entries sum to
// the uniform total, each head keeps at least its floor, and the budgets
// really differ between heads.
TEST(AdaptiveBudget, SessionKeepsLayerTotals) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::string text = test::ReadFile(test::SharedPath("data/frankenstein.txt")).substr(30000, 6000);
  std::vector<int> toks = e->impl().tokenizer().Encode(text, true);
  toks.resize(400);
  const int L = e->impl().config().n_layer, H = e->impl().config().n_head_kv;
  for (const char* policy : {"snapkv", "h2o", "knorm", "keydiff", "tova"}) {
    SessionOptions so;
    so.kv.policy = policy;
    so.kv.ratio = 0.25;
    so.kv.head_budget = "adaptive";
    auto s = Session::Create(*e, so);
    ASSERT_TRUE(s.ok()) << policy;
    ASSERT_TRUE(s.value()->Prefill(toks).ok());
    ASSERT_TRUE(s.value()->Compress().ok());
    const int b = s.value()->impl().compressor().Budget(0, 400);
    EXPECT_EQ(b, 100);
    bool differ = false;
    for (int l = 0; l < L; ++l) {
      int total = 0;
      for (int h = 0; h < H; ++h) {
        const int k = s.value()->impl().cache().head(l, h).size();
        total += k;
        EXPECT_GE(k, 20) << policy << " layer " << l << " head " << h;  // 0.2 of 100
        differ |= k != b;
      }
      EXPECT_EQ(total, H * b) << policy << " layer " << l;
    }
    EXPECT_TRUE(differ) << policy;
    // Decode-time (tova, h2o): the layer total stays within the uniform one.
    if (!s.value()->impl().compressor().policy().traits().decode_time) continue;
    for (int t = 0; t < 8; ++t) ASSERT_TRUE(s.value()->Decode(toks[t + 1]).ok());
    const int b2 = s.value()->impl().compressor().Budget(0, s.value()->position());
    for (int l = 0; l < L; ++l) {
      int total = 0;
      for (int h = 0; h < H; ++h) total += s.value()->impl().cache().head(l, h).size();
      EXPECT_LE(total, H * b2) << policy << " layer " << l;
    }
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// An eval column "snapkv+adaptive": its cells carry the per-head entries,
// the same in every layer's sum, and they survive report.json + samples.jsonl.
TEST(AdaptiveBudget, EvalReportsHeadEntries) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o;
  o.methods = {"snapkv", "snapkv+adaptive"};
  o.ratios = {0.25};
  o.tasks = {TaskKind::kNiah};
  o.fidelity = o.fidelity_decode = false;
  o.samples = 2;
  o.context_tokens = 256;
  o.haystack = test::SharedPath("data/frankenstein.txt");
  auto r = RunSweep(*e, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const int L = e->impl().config().n_layer, H = e->impl().config().n_head_kv;
  const Cell* uni = nullptr;
  const Cell* ada = nullptr;
  for (const Cell& c : r->cells) {
    if (c.method == "snapkv") uni = &c;
    if (c.method == "snapkv+adaptive") ada = &c;
  }
  ASSERT_TRUE(uni && ada);
  EXPECT_TRUE(uni->head_entries.empty());
  ASSERT_EQ(ada->head_entries.size(), static_cast<size_t>(L * H));
  double layer0 = 0;
  for (int h = 0; h < H; ++h) layer0 += ada->head_entries[h];
  for (int l = 1; l < L; ++l) {
    double s = 0;
    for (int h = 0; h < H; ++h) s += ada->head_entries[static_cast<size_t>(l) * H + h];
    EXPECT_DOUBLE_EQ(s, layer0) << l;
  }
  const std::string dir = testing::TempDir() + "/adaptive_report";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteJson(r.value(), dir + "/report.json").ok());
  ASSERT_TRUE(WriteSamples(r.value(), dir + "/samples.jsonl").ok());
  auto back = ReadReportDir(dir);
  ASSERT_TRUE(back.ok()) << back.error().message;
  int found = 0;
  for (const Cell& c : SummarizeCells(back->meta, back->samples)) {
    if (c.method != "snapkv+adaptive") continue;
    EXPECT_EQ(c.head_entries, ada->head_entries);
    ++found;
  }
  EXPECT_EQ(found, 1);
  const std::string json = test::ReadFile(dir + "/report.json");
  EXPECT_NE(json.find("\"head_entries\""), std::string::npos);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval
