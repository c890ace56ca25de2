// Taps asked for by name and parameter: one registry entry per built-in
// statistic, shared between policies forked from one session only with the
// same parameter.
#include <gtest/gtest.h>

#include "kv/compressor.h"
#include "kv/taps.h"
#include "kv/taps/history.h"
#include "kv/taps/mass.h"
#include "kv/taps/window_mass.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

TEST(TapUses, EveryBuiltInStatisticIsARegisteredTap) {
  for (const char* name : {"mass", "window-mass", "last-access", "history", "recent-rows", "latest-query", "max-prob"})
    EXPECT_NE(FindTap(name), nullptr) << name;
  EXPECT_TRUE(CheckTaps({kMassTap, {kWindowMassTap, 8}}).ok());
  EXPECT_NE(CheckTaps({"no-such-tap"}).message().find("unknown statistic tap 'no-such-tap'"), std::string::npos);
}

TEST(TapUses, MergedOnlyWithTheSameParameter) {
  std::vector<TapUse> into;
  ASSERT_TRUE(MergeTaps(&into, {{kWindowMassTap, 32}}, "snapkv").ok());
  ASSERT_TRUE(MergeTaps(&into, {kMassTap, {kWindowMassTap, 32}}, "h2o").ok());
  EXPECT_EQ(into, (std::vector<TapUse>{{kWindowMassTap, 32}, kMassTap}));  // each once
  const Status s = MergeTaps(&into, {{kWindowMassTap, 16}}, "pyramidkv");
  EXPECT_EQ(s.message(), "policy 'pyramidkv' needs another observation window than the others forked from this session");
  EXPECT_TRUE(MergeTaps(&into, {{kHistoryTap, 4}}, "a").ok());  // a new tap is added
  EXPECT_NE(MergeTaps(&into, {{kHistoryTap, 5}}, "b").message().find("another history length"), std::string::npos);
  EXPECT_TRUE(CoversTaps(into, {{kWindowMassTap, 32}}));
  EXPECT_FALSE(CoversTaps(into, {{kWindowMassTap, 16}}));
  EXPECT_FALSE(CoversTaps(into, {"last-access"}));
}

// Through the compressor: a session collecting for snapkv (w 32) forks into
// h2o, but not into a snapkv with another window.
TEST(TapUses, ForkTargetsNeedCompatibleParameters) {
  KvOptions snap;
  snap.policy = "snapkv";
  KvOptions h2o;
  h2o.policy = "h2o";
  KvOptions snap16 = snap;
  snap16.params = {{"obs-window", 16}};
  auto c = Compressor::Create(snap, 1, 1, 1, 4, {h2o});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.value()->stats().needs().taps, (std::vector<TapUse>{{kWindowMassTap, 32}, kMassTap}));
  EXPECT_TRUE(c.value()->Fork(h2o).ok());
  KvOptions lru;
  lru.policy = "lru";
  auto no = c.value()->Fork(lru);  // last-access was not collected
  ASSERT_FALSE(no.ok());
  EXPECT_NE(no.error().message.find("did not collect"), std::string::npos);
  auto bad = Compressor::Create(snap, 1, 1, 1, 4, {snap16});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("another observation window"), std::string::npos);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
