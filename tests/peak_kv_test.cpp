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

TEST(PeakKv, ReservedRoomTakesEveryBatchWithoutMovingTheHead) {
  // A prompt reserves its length once (KvCache::ReserveMore); each batch's
  // own exact reservation (Transformer::AppendAndAttend's) then finds the
  // room: no head moves to a fresh buffer, and the capacity is what the
  // entries use.
  kv::KvCache c(2, 2, 8);
  c.ReserveMore(64);
  std::vector<const uint8_t*> at;
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) at.push_back(c.head(l, h).key_row(0));
  const std::vector<float> row(8, 0.25f);
  for (int b = 0; b < 8; ++b)
    for (int l = 0, f = 0; l < 2; ++l)
      for (int h = 0; h < 2; ++h, ++f) {
        kv::HeadStore& hs = c.head(l, h);
        hs.Reserve(hs.size() + 8);
        for (int t = 0; t < 8; ++t) hs.Append(row.data(), row.data(), 8 * b + t, 0.f);
        EXPECT_EQ(hs.key_row(0), at[f]) << "batch " << b;
      }
  EXPECT_EQ(c.BytesHeld(), c.BytesUsed());
  EXPECT_EQ(c.BytesUsed(), 4 * 64 * kEntryBytes);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
