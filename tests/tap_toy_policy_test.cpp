// A policy and its own statistic written here only (issue 28): the tap is
// registered at run time, the policy asks for it by name, and the library's
// Compressor and AttentionStats collect it, keep it aligned through an
// eviction and copy it for a fork, with no library file knowing of either.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kv/stats.h"
#include "kv/taps.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

constexpr const char kPeakTap[] = "toy-peak";

// The largest probability any query of any head of the group gave each entry.
class PeakStat : public EntryStat {
 public:
  void OnTile(const ProbTile& tile, const TapClock&) override {
    const int n = std::min(tile.j1, tile.Visible(tile.t1 - 1));
    if (n > static_cast<int>(peak_.size())) peak_.resize(n, 0.f);
    for (int t = tile.t0; t < tile.t1; ++t) {
      const int je = std::min(tile.j1, tile.Visible(t));
      for (int g = 0; g < tile.G; ++g)
        for (int j = tile.j0; j < je; ++j) peak_[j] = std::max(peak_[j], tile.Row(t, g)[j - tile.j0]);
    }
  }
  void Retain(const std::vector<int>& keep) override { RetainEntries(peak_, keep, 0.f); }
  void Rebuild(const std::vector<std::vector<int>>& from) override {
    peak_ = RebuildEntries(peak_, from, 0.f, [](float a, float b) { return std::max(a, b); });
  }
  size_t BytesHeld() const override { return 4 * peak_.capacity(); }
  std::unique_ptr<EntryStat> Clone() const override { return std::make_unique<PeakStat>(*this); }
  const std::vector<float>& values() const { return peak_; }

 private:
  std::vector<float> peak_;
};

// Keeps the entries with the highest peak.
class ToyPolicy : public Policy {
 public:
  explicit ToyPolicy(std::string tap = kPeakTap) { mutable_traits().needs.taps = {tap}; }
  Plan Compress(const PolicyContext& ctx) override {
    const int n = ctx.store->size();
    std::vector<double> score(n, 0.0);
    const std::vector<float>& peak = ctx.stats->taps.Get<PeakStat>(kPeakTap)->values();
    for (int i = 0; i < n && i < static_cast<int>(peak.size()); ++i) score[i] = peak[i];
    return Plan::Keep(KeepTop(score, std::vector<bool>(n, false), ctx.budget));
  }
};

void RegisterOnce() {
  static const Status st = RegisterTap({.name = kPeakTap, .make = [](const TapShape&) { return std::make_unique<PeakStat>(); }});
  ASSERT_TRUE(st.ok()) << st.message();
}

TEST(TapRegistry, AToyPolicyWithItsOwnStatistic) {
  RegisterOnce();
  const int G = 2, d = 4, n = 40;
  KvOptions o;
  o.policy = "toy";
  o.ratio = 0.25;
  auto c = Compressor::CreateFor(std::make_unique<ToyPolicy>(), o, 1, 1, G, d);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_NE(c.value()->tap(), nullptr);  // a tap is asked for: the forward pass reports probabilities
  // A causal prefill of n queries, G rows each, seeded random probabilities.
  std::mt19937 rng(5);
  std::vector<double> peak(n, 0.0);  // the independent reference
  AttentionStats& st = c.value()->stats();
  st.OnBatch(0, n);
  for (int t = 0; t < n; ++t)
    for (int g = 0; g < G; ++g) {
      std::vector<float> p(t + 1);
      float z = 0;
      for (float& x : p) z += (x = std::exponential_distribution<float>(1.f)(rng));
      for (int j = 0; j <= t; ++j) peak[j] = std::max<double>(peak[j], p[j] /= z);
      st.OnProbs(0, 0, t, g, p.data(), t + 1);
    }
  KvCache cache(1, 1, d);
  std::vector<float> zero(d, 0.f);
  for (int i = 0; i < n; ++i) cache.head(0, 0).Append(zero.data(), zero.data(), i, 0.f);
  cache.AdvanceLogical(n);
  ASSERT_TRUE(c.value()->CompressPrefill(cache).ok());
  // The 10 entries of highest peak, in order.
  std::vector<int> want(n);
  std::iota(want.begin(), want.end(), 0);
  std::sort(want.begin(), want.end(), [&](int a, int b) { return peak[a] > peak[b]; });
  want.resize(10);
  std::sort(want.begin(), want.end());
  const HeadStore& h = cache.head(0, 0);
  ASSERT_EQ(h.size(), 10);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(h.pos(i), want[i]) << i;
  // The statistic followed the eviction, and a copy of the statistics (a fork) clones it.
  const std::vector<float>& kept = st.head(0, 0).taps.Get<PeakStat>(kPeakTap)->values();
  ASSERT_EQ(kept.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(kept[i], static_cast<float>(peak[want[i]])) << i;
  AttentionStats copy = st;
  EXPECT_NE(copy.head(0, 0).taps.Find(kPeakTap), st.head(0, 0).taps.Find(kPeakTap));
  EXPECT_EQ(copy.head(0, 0).taps.Get<PeakStat>(kPeakTap)->values(), kept);
  EXPECT_GE(st.BytesHeld(), 40u);
}

TEST(TapRegistry, NamesAreCheckedAndUnique) {
  RegisterOnce();
  EXPECT_FALSE(RegisterTap({.name = kPeakTap, .make = [](const TapShape&) { return std::make_unique<PeakStat>(); }}).ok());
  EXPECT_FALSE(RegisterTap({.name = "", .make = [](const TapShape&) { return std::make_unique<PeakStat>(); }}).ok());
  EXPECT_FALSE(RegisterTap({.name = "toy-none", .make = nullptr}).ok());
  // A policy asking for a tap nobody registered is refused when the compressor is made.
  KvOptions o;
  auto c = Compressor::CreateFor(std::make_unique<ToyPolicy>("no-such-tap"), o, 1, 1, 1, 4);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("no-such-tap"), std::string::npos);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
