// KVSlimmer and merge-mean (METHODS.md section 5): the closed-form key
// weights against hand computation for both norms, the fallback on a
// degenerate pair, the pair choice, the decode trigger at budget + chunk, a
// merged pair that leaves attention unchanged, the recent-window statistics,
// and 1000 decode steps on the needle model within budget + chunk with sinks
// and recent tokens never merged and cardinalities adding up to the tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>

#include "engine/engine_impl.h"
#include "tap_values.h"
#include "io/tokenizer.h"
#include "kernels/attention.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/merging.h"
#include "kv/policy.h"
#include "kv/stats.h"
#include "kvtrim/engine.h"
#include "test_util.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

int64_t Counter(const Policy& p, const std::string& name) {
  for (const auto& [n, v] : p.Counters())
    if (n == name) return v;
  ADD_FAILURE() << "no counter " << name;
  return -1;
}

TEST(Kvslimmer, ClosedFormWeightsEqualHandComputation) {
  // a_m = 0.1, a_n = 0.2, v_m - o = (3, 4), v_n - o = (0, -2), v_m + v_n - 2o = (3, 2).
  const float o[2] = {1, 1}, vm[2] = {4, 5}, vn[2] = {1, -1};
  // L2: c11 = 0.1 * 0.8 * 5 = 0.4, c22 = 0.2 * 0.6 * 2 = 0.24, c12 = 0.02 sqrt(13);
  // den = 0.64 - 0.04 sqrt(13); w_m = (0.4 - 0.02 sqrt(13)) / den.
  const double s13 = std::sqrt(13.0), den = 0.64 - 0.04 * s13;
  PairWeights w = SlimmerWeights(0.1, 0.2, vm, vn, o, 2, false, false);
  EXPECT_FALSE(w.fallback);
  EXPECT_NEAR(w.wm, (0.4 - 0.02 * s13) / den, 1e-7);
  EXPECT_NEAR(w.wn, (0.24 - 0.02 * s13) / den, 1e-7);
  EXPECT_NEAR(w.wm, 0.661363, 1e-6);
  // L1: c11 = 0.08 * 7 = 0.56, c22 = 0.12 * 2 = 0.24, c12 = 0.02 * 5 = 0.1; den = 0.6.
  w = SlimmerWeights(0.1, 0.2, vm, vn, o, 2, true, false);
  EXPECT_FALSE(w.fallback);
  EXPECT_NEAR(w.wm, 0.46 / 0.6, 1e-7);
  EXPECT_NEAR(w.wn, 0.14 / 0.6, 1e-7);
  // Diagonal only (c12 = 0): w_m = 0.4 / 0.64.
  w = SlimmerWeights(0.1, 0.2, vm, vn, o, 2, false, true);
  EXPECT_FALSE(w.fallback);
  EXPECT_NEAR(w.wm, 0.625, 1e-7);
  EXPECT_NEAR(w.wn, 0.375, 1e-7);
}

TEST(Kvslimmer, DegeneratePairsFallBackToAttentionWeightedMean) {
  const float o[2] = {0, 0}, same[2] = {0, 0};
  // v_m = v_n = o: every c vanishes, the denominator is 0.
  PairWeights w = SlimmerWeights(0.1, 0.3, same, same, o, 2, false, false);
  EXPECT_TRUE(w.fallback);
  EXPECT_NEAR(w.wm, 0.25, 1e-12);
  EXPECT_NEAR(w.wn, 0.75, 1e-12);
  // L1 with v_m = (3, 4), v_n = (1, 0): c11 = 0.56, c22 = 0.12, c12 = 0.16,
  // w_m = 0.4 / 0.36 > 1: leaves [0, 1].
  const float vm[2] = {3, 4}, vn[2] = {1, 0};
  w = SlimmerWeights(0.1, 0.2, vm, vn, o, 2, true, false);
  EXPECT_TRUE(w.fallback);
  EXPECT_NEAR(w.wm, 1.0 / 3, 1e-12);
  // The same pair in L2 is fine: w_m = (0.4 - 0.02 * 4 sqrt 2) / (0.52 - 0.04 * 4 sqrt 2).
  w = SlimmerWeights(0.1, 0.2, vm, vn, o, 2, false, false);
  EXPECT_FALSE(w.fallback);
  EXPECT_NEAR(w.wm, (0.4 - 0.08 * std::sqrt(2.0)) / (0.52 - 0.16 * std::sqrt(2.0)), 1e-7);
}

TEST(Kvslimmer, PairsAreLowestMassNonOverlappingAndEligible) {
  //                       0    1    2    3    4    5    6
  const std::vector<double> m = {0.0, 0.1, 0.1, 0.5, 0.05, 0.0, 0.9};
  const std::vector<bool> e = {false, true, true, true, true, true, true};
  // Pair masses: (1,2) .2, (2,3) .6, (3,4) .55, (4,5) .05, (5,6) .9; (0,1) not eligible.
  EXPECT_EQ(ChoosePairs(m, e, 1), std::vector<int>({4}));
  EXPECT_EQ(ChoosePairs(m, e, 2), std::vector<int>({1, 4}));
  EXPECT_EQ(ChoosePairs(m, e, 3), std::vector<int>({1, 4}));  // (2,3), (3,4), (5,6) overlap those taken
  EXPECT_EQ(EffectiveChunk(512, 2048), 512);
  EXPECT_EQ(EffectiveChunk(512, 128), 32);
  EXPECT_EQ(EffectiveChunk(512, 3), 1);
}

// A head of 2-d entries, key i = keys[i], value i = values[i], and statistics
// in which one query at the last position attended with `probs`.
struct Fixture {
  HeadStore store{2, GgmlType::F32};
  std::unique_ptr<AttentionStats> stats;
  Fixture(const std::vector<std::vector<float>>& keys, const std::vector<std::vector<float>>& values,
          const std::vector<float>& probs, int window) {
    StatsNeeds n;
    n.taps = {{kRecentRowsTap, window}};
    stats = std::make_unique<AttentionStats>(1, 1, 1, 2, n);
    for (size_t i = 0; i < keys.size(); ++i) store.Append(keys[i].data(), values[i].data(), static_cast<int>(i), 0.f);
    stats->OnBatch(static_cast<int>(keys.size()) - 1, 1);
    stats->OnProbs(0, 0, 0, 0, probs.data(), static_cast<int>(probs.size()));
  }
  Plan Run(Policy& p, int budget, Phase phase) {
    PolicyContext ctx;
    ctx.phase = phase;
    ctx.store = &store;
    ctx.stats = &stats->head(0, 0);
    ctx.all_stats = stats.get();
    ctx.budget = budget;
    ctx.logical_len = store.size();
    return p.Compress(ctx);
  }
};

std::unique_ptr<Policy> Make(const std::string& name, const Params& p) {
  auto r = MakePolicy(name, p);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return std::move(r.value());
}

// The seed's eqs. 9 and 23-25 in float64, written out: alpha_i the observed
// attention over every entry (sinks included; renorm: over the non-sinks
// only, the ablation), o = sum alpha_i v_i over the same entries, then the
// closed form for the pair (m, m + 1). Returns (w_m, w_{m+1}).
std::pair<double, double> SeedPairWeights(const std::vector<float>& probs, const std::vector<std::vector<float>>& values,
                                          int sinks, int m, bool renorm) {
  const int n = static_cast<int>(probs.size());
  double total = 0;
  for (int i = sinks; i < n; ++i) total += probs[i];
  std::vector<double> a(n);
  double o[2] = {0, 0};
  for (int i = 0; i < n; ++i) {
    a[i] = renorm ? (i < sinks ? 0.0 : probs[i] / total) : double{probs[i]};
    o[0] += a[i] * values[i][0];
    o[1] += a[i] * values[i][1];
  }
  auto l2 = [](double x, double y) { return std::sqrt(x * x + y * y); };
  const auto &vm = values[m], &vn = values[m + 1];
  const double c11 = std::abs(a[m] * (1 - 2 * a[m])) * l2(vm[0] - o[0], vm[1] - o[1]);
  const double c22 = std::abs(a[m + 1] * (1 - 2 * a[m + 1])) * l2(vn[0] - o[0], vn[1] - o[1]);
  const double c12 = a[m] * a[m + 1] * l2(vm[0] + vn[0] - 2 * o[0], vm[1] + vn[1] - 2 * o[1]);
  const double den = c11 - 2 * c12 + c22;
  return {(c11 - c12) / den, (c22 - c12) / den};
}

TEST(Kvslimmer, MergesTheLowestMassPairWithClosedFormKey) {
  // Sink 0 carries 30% of the mass; recent 6 and 7 protected; pair masses
  // (1,2) .17, (2,3) .2, (3,4) .19, (4,5) .13.
  const std::vector<float> probs = {0.3f, 0.12f, 0.05f, 0.15f, 0.04f, 0.09f, 0.1f, 0.15f};
  std::vector<std::vector<float>> keys(8, {0.5f, 0.5f}), values;
  keys[4] = {1, 0};
  keys[5] = {0, 1};
  values.push_back({9, -6});  // the sink's value is far from the others: o depends on whether it counts
  for (int i = 1; i < 8; ++i) values.push_back({static_cast<float>(i), static_cast<float>(i % 3) - 1.f});
  Fixture f(keys, values, probs, 2);
  auto pol = Make("kvslimmer", {{"sinks", 1}, {"obs-window", 2}});
  Plan plan = f.Run(*pol, 7, Phase::kPrefill);  // chunk = max(1, 7 / 4) = 1: one merge
  ASSERT_FALSE(plan.noop);
  EXPECT_EQ(plan.keep, std::vector<int>({0, 1, 2, 3, 6, 7}));
  ASSERT_EQ(plan.merge.size(), 1u);
  EXPECT_EQ(plan.merge[0].sources, std::vector<int>({4, 5}));
  const auto [wm, wn] = SeedPairWeights(probs, values, 1, 4, false);
  ASSERT_EQ(plan.merge[0].key_weights.size(), 2u);
  EXPECT_NEAR(plan.merge[0].key_weights[0], wm, 1e-5);
  EXPECT_NEAR(plan.merge[0].key_weights[1], wn, 1e-5);
  EXPECT_EQ(Counter(*pol, "merges"), 1);
  EXPECT_EQ(Counter(*pol, "fallbacks"), 0);
  // The ablation differs here (the sink's mass and value matter), and
  // matches the renormalised reading.
  const auto [rm, rn] = SeedPairWeights(probs, values, 1, 4, true);
  ASSERT_GT(std::abs(rm - wm), 1e-3);
  Fixture r(keys, values, probs, 2);
  auto renorm = Make("kvslimmer", {{"sinks", 1}, {"obs-window", 2}, {"renorm", 1}});
  Plan pr = r.Run(*renorm, 7, Phase::kPrefill);
  ASSERT_EQ(pr.merge.size(), 1u);
  EXPECT_EQ(pr.merge[0].sources, std::vector<int>({4, 5}));  // the same pair: scaling keeps the order
  EXPECT_NEAR(pr.merge[0].key_weights[0], rm, 1e-5);
  EXPECT_NEAR(pr.merge[0].key_weights[1], rn, 1e-5);
  // Applied: key = (w_m, w_n) since k4, k5 are the unit vectors; value = mean; b = log 2.
  f.store.Apply(plan);
  ASSERT_EQ(f.store.size(), 7);
  std::vector<float> k(2), v(2);
  f.store.ReadKey(4, k.data());
  f.store.ReadValue(4, v.data());
  EXPECT_NEAR(k[0], wm, 1e-5);
  EXPECT_NEAR(k[1], wn, 1e-5);
  EXPECT_NEAR(v[0], 4.5f, 1e-6);
  EXPECT_NEAR(v[1], 0.5f * (values[4][1] + values[5][1]), 1e-6);
  EXPECT_NEAR(f.store.logw(4), std::log(2.0), 1e-7);
  // merge-mean takes the same pair with the mean key.
  Fixture g(keys, values, probs, 2);
  auto mean = Make("merge-mean", {{"sinks", 1}, {"obs-window", 2}});
  Plan pm = g.Run(*mean, 7, Phase::kPrefill);
  ASSERT_EQ(pm.merge.size(), 1u);
  EXPECT_EQ(pm.merge[0].sources, std::vector<int>({4, 5}));
  EXPECT_EQ(pm.merge[0].key_weights, std::vector<float>({0.5f, 0.5f}));
}

TEST(Kvslimmer, AlphaIsTheMeanOverTheWindowsQueriesAndTheGroup) {
  // Two query heads (G = 2) and three observed queries (w = 3): alpha is the
  // mean of the six probability rows over all entries, the sink included
  // (the seed's eq. 9 averaged over the observation), and the merged key
  // follows the seed's closed form with that alpha (float64 reference).
  const int n = 8;
  std::vector<std::vector<float>> keys, values;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int i = 0; i < n; ++i) {
    keys.push_back({nd(rng), nd(rng)});
    values.push_back({nd(rng) * 2, nd(rng)});
  }
  const std::vector<std::vector<float>> rows = {  // [query][g] over 8 entries; each sums to 1
      {0.30f, 0.10f, 0.05f, 0.15f, 0.04f, 0.06f, 0.10f, 0.20f}, {0.40f, 0.05f, 0.05f, 0.10f, 0.05f, 0.05f, 0.10f, 0.20f},
      {0.25f, 0.15f, 0.10f, 0.05f, 0.02f, 0.03f, 0.20f, 0.20f}, {0.35f, 0.05f, 0.15f, 0.05f, 0.03f, 0.07f, 0.10f, 0.20f},
      {0.20f, 0.20f, 0.05f, 0.15f, 0.05f, 0.05f, 0.10f, 0.20f}, {0.50f, 0.05f, 0.05f, 0.05f, 0.02f, 0.03f, 0.10f, 0.20f}};
  StatsNeeds need;
  need.taps = {{kRecentRowsTap, 3}};
  AttentionStats st(1, 1, 2, 2, need);
  HeadStore store(2, GgmlType::F32);
  for (int i = 0; i < n; ++i) store.Append(keys[i].data(), values[i].data(), i, 0.f);
  st.OnBatch(n - 3, 3);  // the last three positions are the observed queries
  for (int t = 0; t < 3; ++t)
    for (int g = 0; g < 2; ++g) st.OnProbs(0, 0, t, g, rows[t * 2 + g].data(), n);
  std::vector<float> mean(n, 0.f);
  for (const auto& r : rows)
    for (int i = 0; i < n; ++i) mean[i] += r[i] / 6.f;
  auto pol = Make("kvslimmer", {{"sinks", 1}, {"obs-window", 3}});
  PolicyContext ctx;
  ctx.phase = Phase::kPrefill;
  ctx.store = &store;
  ctx.stats = &st.head(0, 0);
  ctx.all_stats = &st;
  ctx.budget = 7;  // one merge among entries 1..4 (sink 0 and the 3 newest protected)
  ctx.logical_len = n;
  Plan plan = pol->Compress(ctx);
  ASSERT_EQ(plan.merge.size(), 1u);
  // Pair masses: (1,2) .175, (2,3) .167, (3,4) .127: the pair (3, 4).
  EXPECT_EQ(plan.merge[0].sources, std::vector<int>({3, 4}));
  const auto [wm, wn] = SeedPairWeights(mean, values, 1, 3, false);
  EXPECT_NEAR(plan.merge[0].key_weights[0], wm, 1e-5);
  EXPECT_NEAR(plan.merge[0].key_weights[1], wn, 1e-5);
  EXPECT_EQ(Counter(*pol, "fallbacks"), 0);
}

TEST(Kvslimmer, DegeneratePairInThePolicyIsCountedAsFallback) {
  // Every value equal: o = v, all c vanish; the key is the attention-weighted mean.
  const std::vector<float> probs = {0.5f, 0.1f, 0.3f, 0.05f, 0.05f};
  std::vector<std::vector<float>> keys = {{0, 0}, {1, 0}, {0, 1}, {2, 2}, {3, 3}}, values(5, {1.f, -1.f});
  Fixture f(keys, values, probs, 1);
  auto pol = Make("kvslimmer", {{"sinks", 1}, {"obs-window", 1}});
  Plan plan = f.Run(*pol, 4, Phase::kPrefill);  // pairs (1,2) .4, (2,3) .35: takes (2,3)
  ASSERT_EQ(plan.merge.size(), 1u);
  EXPECT_EQ(plan.merge[0].sources, std::vector<int>({2, 3}));
  EXPECT_NEAR(plan.merge[0].key_weights[0], 0.3 / 0.35, 1e-6);
  EXPECT_NEAR(plan.merge[0].key_weights[1], 0.05 / 0.35, 1e-6);
  EXPECT_EQ(Counter(*pol, "fallbacks"), 1);
  EXPECT_EQ(Counter(*pol, "merges"), 1);
}

TEST(Kvslimmer, DecodeWaitsForBudgetPlusChunk) {
  auto run = [](int n) {
    std::vector<std::vector<float>> keys, values;
    std::vector<float> probs;
    for (int i = 0; i < n; ++i) {
      keys.push_back({static_cast<float>(i), 1});
      values.push_back({1, static_cast<float>(i)});
      probs.push_back(1.f / n);
    }
    Fixture f(keys, values, probs, 2);
    auto pol = Make("kvslimmer", {{"sinks", 1}, {"obs-window", 2}});
    return f.Run(*pol, 8, Phase::kDecode);  // chunk = 8 / 4 = 2
  };
  EXPECT_TRUE(run(9).noop);
  Plan p = run(10);
  ASSERT_FALSE(p.noop);
  EXPECT_EQ(p.merge.size(), 2u);
  EXPECT_EQ(p.keep.size() + p.merge.size(), 8u);
  for (const MergeEntry& m : p.merge)
    for (int i : m.sources) EXPECT_TRUE(i >= 1 && i < 8) << i;  // not the sink, not the 2 most recent
}

TEST(Kvslimmer, IdenticalKeysAndValuesMergeWithoutChangingAttention) {
  const std::vector<float> probs = {0.4f, 0.3f, 0.01f, 0.01f, 0.28f};
  std::vector<std::vector<float>> keys = {{1, 0}, {0.5f, -1}, {0.3f, 0.7f}, {0.3f, 0.7f}, {-1, 2}};
  std::vector<std::vector<float>> values = {{1, 1}, {2, 0}, {-3, 4}, {-3, 4}, {0, 5}};
  Fixture f(keys, values, probs, 1);
  const HeadStore before = f.store;
  auto pol = Make("kvslimmer", {{"sinks", 1}, {"obs-window", 1}});
  Plan plan = f.Run(*pol, 4, Phase::kPrefill);
  ASSERT_EQ(plan.merge.size(), 1u);
  EXPECT_EQ(plan.merge[0].sources, std::vector<int>({2, 3}));
  f.store.Apply(plan);
  ASSERT_EQ(f.store.size(), 4);
  std::vector<float> k(2);
  f.store.ReadKey(2, k.data());
  EXPECT_NEAR(k[0], 0.3f, 1e-6);  // identical keys merge to that key
  EXPECT_NEAR(k[1], 0.7f, 1e-6);
  EXPECT_NEAR(f.store.logw(2), std::log(2.0), 1e-7);
  for (const auto& q : std::vector<std::vector<float>>{{1, 2}, {-3, 0.5f}, {0.2f, -4}}) {
    std::vector<float> a(2), b(2), s(5);
    kernels::AttendOne(before.View(), q.data(), 1, 0.7f, a.data(), s.data());
    kernels::AttendOne(f.store.View(), q.data(), 1, 0.7f, b.data(), s.data());
    EXPECT_NEAR(a[0], b[0], 1e-6);
    EXPECT_NEAR(a[1], b[1], 1e-6);
  }
}

TEST(Kvslimmer, RecentWindowStatisticsAverageGroupAndFollowMerges) {
  StatsNeeds n;
  n.taps = {{kRecentRowsTap, 2}};
  AttentionStats st(1, 1, 2, 4, n);  // group of 2 query heads
  const float r0[2] = {1, 0}, r1a[3] = {0.2f, 0.3f, 0.5f}, r1b[3] = {0.6f, 0.1f, 0.3f};
  const float r2a[4] = {0.1f, 0.2f, 0.3f, 0.4f}, r2b[4] = {0.3f, 0.2f, 0.1f, 0.4f};
  st.OnBatch(0, 1);
  st.OnProbs(0, 0, 0, 0, r0, 2);
  st.OnProbs(0, 0, 0, 1, r0, 2);
  st.OnBatch(1, 2);  // two queries; both within the window of 2
  st.OnProbs(0, 0, 0, 0, r1a, 3);
  st.OnProbs(0, 0, 0, 1, r1b, 3);
  st.OnProbs(0, 0, 1, 0, r2a, 4);
  st.OnProbs(0, 0, 1, 1, r2b, 4);
  // Queries 1 and 2 (query 0 left the window): group means summed.
  std::vector<double> m = taptest::RecentMass(st, 0, 0, 4);
  EXPECT_NEAR(m[0], 0.4 + 0.2, 1e-6);
  EXPECT_NEAR(m[1], 0.2 + 0.2, 1e-6);
  EXPECT_NEAR(m[2], 0.4 + 0.2, 1e-6);
  EXPECT_NEAR(m[3], 0.4, 1e-6);
  st.Rebuild(0, 0, {{0}, {1, 2}, {3}});
  m = taptest::RecentMass(st, 0, 0, 3);
  EXPECT_NEAR(m[0], 0.6, 1e-6);
  EXPECT_NEAR(m[1], 1.0, 1e-6);
  EXPECT_NEAR(m[2], 0.4, 1e-6);
  st.Retain(0, 0, {0, 2});
  m = taptest::RecentMass(st, 0, 0, 2);
  EXPECT_NEAR(m[0], 0.6, 1e-6);
  EXPECT_NEAR(m[1], 0.4, 1e-6);
}

// Checks one head: within `limit`, sinks and the `recent` newest tokens
// present as single tokens, cardinalities summing to the tokens seen.
void CheckHead(const HeadStore& hs, int64_t n, int limit, int sinks, int recent, const std::string& where) {
  ASSERT_LE(hs.size(), limit) << where;
  double card = 0;
  int sink_seen = 0;
  for (int i = 0; i < hs.size(); ++i) {
    const double c = std::exp(double{hs.logw(i)});
    ASSERT_NEAR(c, std::round(c), 1e-3) << where;
    card += std::round(c);
    if (hs.pos(i) < sinks) {
      ASSERT_EQ(hs.pos(i), i) << where;
      ASSERT_EQ(hs.logw(i), 0.f) << where << " sink merged";
      ++sink_seen;
    }
  }
  ASSERT_EQ(sink_seen, std::min<int64_t>(sinks, n)) << where;
  ASSERT_EQ(static_cast<int64_t>(card), n) << where << " cardinalities";
  for (int r = 0; r < recent && r < hs.size(); ++r) {
    const int i = hs.size() - 1 - r;
    ASSERT_EQ(hs.pos(i), n - 1 - r) << where << " recent";
    ASSERT_EQ(hs.logw(i), 0.f) << where << " recent merged";
  }
}

TEST(Kvslimmer, ThousandDecodeStepsStayWithinBudgetPlusChunk) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const int budget = 128, chunk = 32;  // min(512, 128 / 4)
  // 1000 steps for kvslimmer; merge-mean shares the rounds, 400 steps suffice.
  for (const auto& [policy, steps] : std::vector<std::pair<std::string, int>>{{"kvslimmer", 1000}, {"merge-mean", 400}}) {
    SessionOptions so;
    so.kv.policy = policy;
    so.kv.budget_tokens = budget;
    auto s = Session::Create(*e, so);
    ASSERT_TRUE(s.ok()) << s.error().message;
    Session& ses = *s.value();
    ASSERT_TRUE(ses.Prefill(e->impl().tokenizer().Encode("Once upon a time there was a little girl.", true)).ok());
    ASSERT_TRUE(ses.Compress().ok());
    Sampler sampler({0.8f, 0.95f, 5});
    for (int step = 0; step < steps; ++step) {
      Status st = ses.Decode(sampler.Sample(ses.logits()));
      ASSERT_TRUE(st.ok()) << policy << " step " << step << ": " << st.message();
      const KvCache& c = ses.impl().cache();
      for (int l = 0; l < c.n_layer(); ++l)
        for (int h = 0; h < c.n_head_kv(); ++h)
          CheckHead(c.head(l, h), c.logical_length(), budget + chunk, 32, 32,
                    std::string(policy) + " step " + std::to_string(step) + " layer " + std::to_string(l));
    }
    auto counters = ses.impl().compressor().counters();
    ASSERT_EQ(counters.size(), 3u);
    EXPECT_GT(counters[0].second, steps) << policy << " merges";
    // A merged entry merged again: some entry stands for more than 2 tokens.
    float max_b = 0;
    for (int i = 0; i < ses.impl().cache().head(0, 0).size(); ++i) max_b = std::max(max_b, ses.impl().cache().head(0, 0).logw(i));
    EXPECT_GT(max_b, std::log(2.5f)) << policy;
  }
}

TEST(Kvslimmer, PrefillMergeRoundsReachTheBudget) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SessionOptions so;
  so.kv.policy = "kvslimmer";
  so.kv.ratio = 0.25;
  auto s = Session::Create(*e, so);
  ASSERT_TRUE(s.ok()) << s.error().message;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "The girl walked to the river and sat down by the old mill. ";
  const std::vector<int> toks = e->impl().tokenizer().Encode(text, true);
  ASSERT_GT(toks.size(), 400u);
  ASSERT_TRUE(s.value()->Prefill(toks).ok());
  ASSERT_TRUE(s.value()->Compress().ok());
  const int budget = static_cast<int>(std::ceil(0.25 * toks.size() - 1e-9));
  const KvCache& c = s.value()->impl().cache();
  for (int l = 0; l < c.n_layer(); ++l)
    for (int h = 0; h < c.n_head_kv(); ++h) {
      ASSERT_EQ(c.head(l, h).size(), budget);
      CheckHead(c.head(l, h), c.logical_length(), budget, 32, 32, "prefill layer " + std::to_string(l));
    }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
