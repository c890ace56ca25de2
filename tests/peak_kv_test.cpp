// Peak KV bytes (Session::peak_kv_bytes): the most the session's KV held at
// once, against figures computed by hand on stories260K (5 layers, 4 KV
// heads, head dim 8; an f32 entry is 2 x 32 bytes of rows + 4 of position +
// 4 of log-weight = 72 bytes, and a batch prefill reserves exactly).
#include <gtest/gtest.h>

#include <random>

#include "engine/engine_impl.h"
#include "kv/cache.h"
#include "kvtrim/engine.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

constexpr size_t kHeads = 5 * 4, kEntryBytes = 2 * 8 * 4 + 4 + 4;

std::vector<int> Tokens(int n) {
  std::mt19937 rng(7);
  std::vector<int> t(n);
  for (int& x : t) x = 3 + static_cast<int>(rng() % 500);
  return t;
}

std::unique_ptr<Session> Prefilled(const Engine& e, const std::string& policy, double ratio, int n) {
  SessionOptions so;
  so.ubatch = 64;
  so.kv.policy = policy, so.kv.ratio = ratio, so.kv.ratio_explicit = true;
  auto s = Session::Create(e, so);
  EXPECT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s.value()->Prefill(Tokens(n)).ok());
  return std::move(s.value());
}

TEST(PeakKv, OneShotCompressionPeaksAtTheFullCache) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  auto full = Prefilled(*e, "full", 1.0, 200);
  EXPECT_EQ(full->peak_kv_bytes(), kHeads * 200 * kEntryBytes);  // 288,000
  auto s = Prefilled(*e, "snapkv", 0.5, 200);
  ASSERT_TRUE(s->Compress().ok());
  EXPECT_EQ(s->impl().cache().BytesUsed(), kHeads * 100 * kEntryBytes);
  EXPECT_LT(s->impl().cache().BytesHeld(), kHeads * 200 * kEntryBytes);  // memory really freed ...
  EXPECT_EQ(s->peak_kv_bytes(), kHeads * 200 * kEntryBytes);      // ... after the full prefill held it all
  for (int t = 0; t < 3; ++t) ASSERT_TRUE(s->Decode(5 + t).ok());
  EXPECT_EQ(s->peak_kv_bytes(), kHeads * 200 * kEntryBytes);  // decoding past 100 kept stays below
  KvOptions same;
  same.policy = "snapkv", same.ratio = 0.5, same.ratio_explicit = true;
  auto f = s->Fork(same);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f.value()->peak_kv_bytes(), f.value()->impl().cache().BytesHeld());  // a fork starts at its copy
}

TEST(PeakKv, AReferencePassHoldsTheCacheAndItsCopy) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  auto s = Prefilled(*e, "kvzip", 0.5, 200);
  ASSERT_TRUE(s->Compress().ok());
  // The copy of the 200 entries replays them after the instruction: at least
  // 400 entries per head beside the cache's 200.
  EXPECT_GE(s->peak_kv_bytes(), kHeads * (200 + 400) * kEntryBytes);
  EXPECT_LE(s->impl().cache().BytesUsed(), kHeads * 100 * kEntryBytes + kHeads * kEntryBytes);  // one shared budget
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
