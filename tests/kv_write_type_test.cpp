// The KV in the asked type from the first token (KvOptions::quant_at
// "write"): a prefill in one batch stores exactly what an f32 prefill
// quantized afterwards stores (the batch attends its own rows in f32), a
// prefill in several batches stays close to it, the peak follows the type
// (the decode kernels over stored entries: attention_decode_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/engine_impl.h"
#include "kernels/attention.h"
#include "kernels/quant.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kvtrim/engine.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::vector<int> Tokens(int n) {
  std::mt19937 rng(11);
  std::vector<int> t(n);
  for (int& x : t) x = 3 + static_cast<int>(rng() % 500);
  return t;
}

std::unique_ptr<Session> Prefilled(const Engine& e, const std::string& quant, const std::string& at, int ubatch,
                                   int n, const std::string& rotate = "auto") {
  SessionOptions so;
  so.ubatch = ubatch;
  so.kv.quant = quant;
  so.kv.quant_at = at;
  so.kv.rotate = rotate;
  auto s = Session::Create(e, so);
  EXPECT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s.value()->Prefill(Tokens(n)).ok());
  return std::move(s.value());
}

// Largest |x| over every key and value of every head.
float MaxEntry(const kv::KvCache& a) {
  float mx = 0.f;
  std::vector<float> x(a.head_dim());
  for (int l = 0; l < a.n_layer(); ++l)
    for (int h = 0; h < a.n_head_kv(); ++h)
      for (int i = 0; i < a.head(l, h).size(); ++i) {
        a.head(l, h).ReadKey(i, x.data());
        for (float y : x) mx = std::max(mx, std::fabs(y));
        a.head(l, h).ReadValue(i, x.data());
        for (float y : x) mx = std::max(mx, std::fabs(y));
      }
  return mx;
}

// Largest |a - b| over every key and value of every head (dequantized).
float MaxEntryDiff(const kv::KvCache& a, const kv::KvCache& b) {
  float md = 0.f;
  const int d = a.head_dim();
  std::vector<float> x(d), y(d);
  for (int l = 0; l < a.n_layer(); ++l)
    for (int h = 0; h < a.n_head_kv(); ++h) {
      const kv::HeadStore &ha = a.head(l, h), &hb = b.head(l, h);
      EXPECT_EQ(ha.size(), hb.size());
      for (int i = 0; i < std::min(ha.size(), hb.size()); ++i) {
        ha.ReadKey(i, x.data()), hb.ReadKey(i, y.data());
        for (int k = 0; k < d; ++k) md = std::max(md, std::fabs(x[k] - y[k]));
        ha.ReadValue(i, x.data()), hb.ReadValue(i, y.data());
        for (int k = 0; k < d; ++k) md = std::max(md, std::fabs(x[k] - y[k]));
      }
    }
  return md;
}

TEST(KvWriteType, OneBatchPrefillStoresTheQuantizedF32Entries) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  auto ref = Prefilled(*e, "f32", "write", 256, 200);
  for (const char* q : {"f16", "q8_0", "q4_0"})
    for (const char* rotate : {"auto", "off"}) {
    auto s = Prefilled(*e, q, "write", 256, 200, rotate);
    const kv::KvCache& c = s->impl().cache();
    ASSERT_EQ(c.type(), kv::ParseKvQuant(q).value()) << q;
    ASSERT_EQ(c.rotated(), std::string(q) != "f16" && std::string(rotate) == "auto") << q;
    // Same logits: the batch attended its own rows in f32, as the f32 prefill
    // did (rotated, to the rotation's rounding).
    if (!c.rotated()) {
      EXPECT_EQ(s->logits(), ref->logits()) << q;
    }
    for (size_t i = 0; i < ref->logits().size(); ++i)
      ASSERT_NEAR(s->logits()[i], ref->logits()[i], 1e-4f * (1.f + std::fabs(ref->logits()[i]))) << q << " " << i;
    // Same stored bytes as the f32 entries quantized afterwards.
    kv::KvCache conv = ref->impl().cache();
    conv.Convert(c.type(), c.rotated());
    for (int l = 0; l < c.n_layer(); ++l)
      for (int h = 0; h < c.n_head_kv(); ++h) {
        // Rotated, the layers after the first see the rotation's rounding
        // in their inputs (attention's output): their rows differ by it.
        if (c.rotated() && l > 0) continue;
        const kv::HeadStore &a = c.head(l, h), &b = conv.head(l, h);
        ASSERT_EQ(a.size(), 200);
        ASSERT_EQ(b.size(), 200);
        for (int i = 0; i < a.size(); ++i) {
          ASSERT_EQ(0, std::memcmp(a.key_row(i), b.key_row(i), a.row_bytes())) << q << " l" << l << " h" << h;
          ASSERT_EQ(0, std::memcmp(a.value_row(i), b.value_row(i), a.row_bytes())) << q << " l" << l << " h" << h;
        }
      }
    }
}

TEST(KvWriteType, PrefillInBatchesStaysCloseAndKeptEqualsF32ThenQuantized) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  auto ref = Prefilled(*e, "f32", "write", 256, 200);
  for (const char* q : {"f16", "q8_0"}) {
    // Later batches read earlier batches' entries in the stored type.
    auto s = Prefilled(*e, q, "write", 32, 200);
    kv::KvCache conv = ref->impl().cache();
    conv.Convert(s->impl().cache().type(), s->impl().cache().rotated());
    const float md = MaxEntryDiff(s->impl().cache(), conv) / MaxEntry(conv);
    std::printf("kv %s written in batches of 32: max |entry - f32 entry quantized| / max |entry| = %.5f\n", q, md);
    EXPECT_GT(md, 0.f) << q;  // the batches really read stored rows
    // f16: within a few units in the last place (2^-11 relative); q8_0: a few steps of 1/127.
    EXPECT_LT(md, std::string(q) == "f16" ? 4e-3f : 0.05f) << q;
    // "kept": f32 throughout the prefill, so entries equal the f32 ones
    // (quantized only by Compress, after compression).
    auto k = Prefilled(*e, q, "kept", 32, 200);
    EXPECT_EQ(k->impl().cache().type(), GgmlType::F32);
    EXPECT_EQ(MaxEntryDiff(k->impl().cache(), ref->impl().cache()), 0.f) << q;
  }
}

TEST(KvWriteType, PeakFollowsTheType) {
  auto e = test::LoadEngine("stories260K.gguf");  // 5 layers x 4 KV heads, head dim 8
  ASSERT_TRUE(e);
  constexpr size_t kHeads = 20;
  // f16: 2 rows x 8 x 2 bytes + position 4 + log-weight 4 = 40 bytes an entry
  // (f32: 72); q8_0 rows are one padded block each.
  auto f16 = Prefilled(*e, "f16", "write", 64, 200);
  EXPECT_EQ(f16->peak_kv_bytes(), kHeads * 200 * 40);
  auto q8 = Prefilled(*e, "q8_0", "write", 64, 200);
  EXPECT_EQ(q8->peak_kv_bytes(), kHeads * 200 * (2 * kernels::RowBytesPadded(GgmlType::Q8_0, 8) + 8));
  auto kept = Prefilled(*e, "f16", "kept", 64, 200);
  EXPECT_EQ(kept->peak_kv_bytes(), kHeads * 200 * 72);  // f32 until compression
}

TEST(KvWriteType, AnUnknownQuantizationPointIsAnError) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  SessionOptions so;
  so.kv.quant = "f16";
  so.kv.quant_at = "later";
  auto s = Session::Create(*e, so);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("'later'"), std::string::npos) << s.error().message;
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
