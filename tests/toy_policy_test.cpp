// A policy with a statistic of its own, written in this file only: its
// statistic is a fold (kv/taps/fold.h), its facts are data (PolicyTraits),
// and one RegisterPolicy call makes it a policy like the built-in ones: it
// is listed (DescribePolicies, what `kvtrim policies` prints) without being
// built, a Session compresses with it on the default model, and a chunked
// prefill streams through it or is refused, as its traits say.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kv/taps/fold.h"
#include "kvtrim/engine.h"
#include "kvtrim/policies.h"
#include "model/config.h"
#include "test_util.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

constexpr const char kPeakTap[] = "toy-policy-peak";

// The largest probability any query of the group gave each entry (its fold).
struct PeakFold {
  static constexpr float kFresh = 0.f;
  static void Tile(std::vector<float>& v, const ProbTile& tile, const TapClock&) {
    for (int t = tile.t0; t < tile.t1; ++t)
      for (int g = 0; g < tile.G; ++g)
        for (int j = tile.j0; j < std::min(tile.j1, tile.Visible(t)); ++j)
          v[j] = std::max(v[j], tile.Row(t, g)[j - tile.j0]);
  }
  static float Merge(float a, float b) { return std::max(a, b); }
};
using PeakStat = FoldStat<float, PeakFold>;

// Keeps the first --toy-sinks entries and the highest peaks.
class PeakPolicy : public Policy {
 public:
  explicit PeakPolicy(int sinks) : sinks_(sinks) {}
  EntryScores Score(const PolicyContext& ctx) override {
    const int n = ctx.store->size();
    std::vector<double> score(n, 0.0);
    const std::vector<float>& peak = ctx.stats->taps.Get<PeakStat>(kPeakTap)->values();
    for (int i = 0; i < n && i < static_cast<int>(peak.size()); ++i) score[i] = peak[i];
    return {std::move(score), ProtectSinksAndRecent(*ctx.store, sinks_, 0), true};
  }
  Plan Compress(const PolicyContext& ctx) override {
    const EntryScores e = Score(ctx);
    return Plan::Keep(KeepTop(e.score, e.prot, ctx.budget));
  }

 private:
  int sinks_;
};

PolicyInfo Toy(const std::string& name, bool streams) {
  return {name,
          "Toy: the highest peak attention (a statistic of its own), sinks kept.",
          {{"toy-sinks", 4, "sink tokens kept"}},
          [](const Params& p) { return std::make_unique<PeakPolicy>(static_cast<int>(p.at("toy-sinks"))); },
          [streams](const Params& p) {
            PolicyTraits t{.decode_time = false,
                           .needs = {.taps = {kPeakTap}},
                           .protected_entries = static_cast<int>(p.at("toy-sinks")),
                           .scores_entries = true};
            if (!streams) t.stream_blocker = "the toy reads the whole prompt at once";
            return t;
          },
          {FoldTapInfo<PeakStat>(kPeakTap)}};
}

class ToyPolicy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(RegisterPolicy(Toy("toy-peak", true)).ok());
    ASSERT_TRUE(RegisterPolicy(Toy("toy-peak-whole", false)).ok());
  }
};

TEST_F(ToyPolicy, IsListedFromItsTraitsWithoutBeingBuilt) {
  const std::vector<PolicyDescription> all = DescribePolicies();
  auto it = std::find_if(all.begin(), all.end(), [](const PolicyDescription& d) { return d.name == "toy-peak"; });
  ASSERT_NE(it, all.end());
  EXPECT_EQ(it->params.size(), 1u);
  EXPECT_EQ(it->params[0].name, "toy-sinks");
  EXPECT_TRUE(it->adaptive);  // it scores entries, leaving the allocation
  EXPECT_TRUE(it->prefill_time);
  EXPECT_EQ(it->stream_blocker, "");
  auto whole = std::find_if(all.begin(), all.end(), [](const PolicyDescription& d) { return d.name == "toy-peak-whole"; });
  ASSERT_NE(whole, all.end());
  EXPECT_EQ(whole->stream_blocker, "the toy reads the whole prompt at once");
  // Names and factories are checked; its statistic was registered with it.
  EXPECT_FALSE(RegisterPolicy(Toy("toy-peak", true)).ok());
  EXPECT_FALSE(RegisterPolicy({"", "no name", {}, [](const Params&) { return std::make_unique<PeakPolicy>(0); }}).ok());
  EXPECT_FALSE(RegisterPolicy({"toy-none", "no factory", {}, nullptr}).ok());
  EXPECT_NE(FindTap(kPeakTap), nullptr);
  EXPECT_FALSE(MakePolicy("toy-peak", {{"toy-sinks", 1.5}}).ok());  // a whole number, as its spec says
}

TEST_F(ToyPolicy, ASessionCompressesWithIt) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::vector<int> prompt = e->impl().tokenizer().Encode(test::ReadFile(test::SharedPath("data/frankenstein.txt")).substr(0, 2400), true);
  SessionOptions so;
  so.kv.policy = "toy-peak";
  so.kv.ratio = 0.25;
  auto s = Session::Create(*e, so);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(s.value()->Prefill(prompt).ok());
  // What each head must keep, from its statistic as collected: the 4 sinks,
  // the newest entry (always kept) and the highest peaks (ties: the newer),
  // the budget ceil(0.25 n).
  const int n = static_cast<int>(prompt.size()), budget = (n + 3) / 4;
  const AttentionStats& st = s.value()->impl().compressor().stats();
  std::vector<std::vector<int>> want;
  for (int l = 0; l < st.n_layer(); ++l)
    for (int h = 0; h < e->impl().config().n_head_kv; ++h) {
      std::vector<float> peak = st.head(l, h).taps.Get<PeakStat>(kPeakTap)->values();
      ASSERT_EQ(static_cast<int>(peak.size()), n);
      std::vector<int> order = {0, 1, 2, 3, n - 1}, rest(n - 5);
      std::iota(rest.begin(), rest.end(), 4);
      std::sort(rest.begin(), rest.end(), [&](int a, int b) { return peak[a] > peak[b] || (peak[a] == peak[b] && a > b); });
      order.insert(order.end(), rest.begin(), rest.end());
      order.resize(budget);
      std::sort(order.begin(), order.end());
      want.push_back(order);
    }
  ASSERT_TRUE(s.value()->Compress().ok());
  for (int l = 0, k = 0; l < st.n_layer(); ++l)
    for (int h = 0; h < e->impl().config().n_head_kv; ++h, ++k) {
      const HeadStore& hs = s.value()->impl().cache().head(l, h);
      ASSERT_EQ(hs.size(), budget) << l << " " << h;
      for (int i = 0; i < budget; ++i) ASSERT_EQ(hs.pos(i), want[k][i]) << l << " " << h << " " << i;
    }
}

TEST_F(ToyPolicy, AChunkedPrefillStreamsOrIsRefusedByItsTraits) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::vector<int> prompt = e->impl().tokenizer().Encode(test::ReadFile(test::SharedPath("data/frankenstein.txt")).substr(0, 2400), true);
  SessionOptions so;
  so.kv.policy = "toy-peak";
  so.kv.ratio = 0.25;
  so.kv.prefill_chunk = 128;
  int64_t most = 0;
  auto s = Session::Create(*e, so);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(s.value()->Prefill(prompt).ok());
  for (int l = 0; l < e->impl().config().n_layer; ++l)
    for (int h = 0; h < e->impl().config().n_head_kv; ++h) most = std::max<int64_t>(most, s.value()->impl().cache().head(l, h).size());
  const int budget = (static_cast<int>(prompt.size()) + 3) / 4;
  EXPECT_LE(most, budget + 128);  // compressed as it went
  so.kv.policy = "toy-peak-whole";
  auto refused = Session::Create(*e, so);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("the toy reads the whole prompt at once"), std::string::npos)
      << refused.error().message;
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
