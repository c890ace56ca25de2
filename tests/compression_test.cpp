// Compression on real models: ratio 1.0 is exact, decode-time budgets hold
// for 500 steps without touching protected entries, quantized storage
// reports the bytes it allocates, and a windowed generation holds far less.
#include <gtest/gtest.h>

#include <set>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/config.h"
#include "model/transformer.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::vector<int> Prompt(const Engine& e) {
  return e.impl().tokenizer().Encode("It was a dark and stormy night. The special magic number for quiet-river is: 4829173. "
                              "Once upon a time there was a little girl who lived in a village near the forest.", true);
}

// Logits after prefill, compression, and 16 decode steps of fixed tokens
// (teacher-forced, so traces stay comparable when a policy changes the argmax).
std::vector<float> Trace(const Engine& e, const KvOptions& kv) {
  SessionOptions so;
  so.kv = kv;
  auto s = Session::Create(e, so);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  Session& ses = *s.value();
  EXPECT_TRUE(ses.Prefill(Prompt(e)).ok());
  EXPECT_TRUE(ses.Compress().ok());
  std::vector<float> trace = ses.logits();
  const std::vector<int> forced = e.impl().tokenizer().Encode("The fiend was in the cottage, and the girl was there.", false);
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(ses.Decode(forced[i % forced.size()]).ok());
    trace.insert(trace.end(), ses.logits().begin(), ses.logits().end());
  }
  return trace;
}

TEST(Compression, RatioOneReproducesFullBitForBit) {
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::vector<float> full = Trace(*e, {});
  for (const auto& p : kv::Registry()) {
    KvOptions kv;
    kv.policy = p.name;
    kv.ratio = 1.0;
    EXPECT_EQ(Trace(*e, kv), full) << p.name;  // exact float equality
  }
}

TEST(Compression, LowRatioChangesLogits) {
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::vector<float> full = Trace(*e, {});
  for (const char* p : {"window", "h2o", "snapkv"}) {
    KvOptions kv;
    kv.policy = p;
    kv.ratio = 0.25;
    EXPECT_NE(Trace(*e, kv), full) << p;
  }
}

TEST(Compression, DecodeBudgetHoldsFor500StepsAndProtectsEntries) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  const int budget = 48;
  struct Case { std::string policy; int sinks; int recent; };
  const std::vector<Case> cases = {{"window", 4, 0}, {"random", 4, 0}, {"lru", 0, 0}, {"h2o", 4, 0}, {"scissorhands", 4, 10}};
  for (const auto& c : cases) {
    SessionOptions so;
    so.kv.policy = c.policy;
    so.kv.budget_tokens = budget;
    auto s = Session::Create(*e, so);
    ASSERT_TRUE(s.ok()) << s.error().message;
    Session& ses = *s.value();
    ASSERT_TRUE(ses.Prefill(e->impl().tokenizer().Encode("Tom ran.", true)).ok());  // 500 steps fit in 512
    ASSERT_TRUE(ses.Compress().ok());
    Sampler sampler({0.8f, 0.95f, 3});
    for (int step = 0; step < 500; ++step) {
      Status st = ses.Decode(sampler.Sample(ses.logits()));
      ASSERT_TRUE(st.ok()) << c.policy << " step " << step << ": " << st.message();
      const kv::KvCache& cache = ses.impl().cache();
      for (int l = 0; l < cache.n_layer(); ++l)
        for (int h = 0; h < cache.n_head_kv(); ++h) {
          const kv::HeadStore& hs = cache.head(l, h);
          ASSERT_LE(hs.size(), budget) << c.policy << " step " << step;
          std::set<int> pos(hs.positions().begin(), hs.positions().end());
          for (int p = 0; p < c.sinks; ++p) ASSERT_TRUE(pos.count(p)) << c.policy << " lost sink " << p;
          const int64_t n = cache.logical_length();
          for (int64_t p = std::max<int64_t>(0, n - c.recent); p < n; ++p)
            ASSERT_TRUE(pos.count(static_cast<int>(p))) << c.policy << " lost recent " << p << " at step " << step
                                                        << " (n " << n << ", layer " << l << ", head " << h << ")";
          ASSERT_EQ(*pos.rbegin(), n - 1) << c.policy << " newest entry must stay";
        }
    }
    EXPECT_GT(ses.impl().compressor().evictions(), 0) << c.policy;
  }
}

TEST(Compression, QuantizedStorageBytesEqualAllocation) {
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  for (const char* q : {"f32", "f16", "q8_0", "q4_0"}) {
    SessionOptions so;
    so.kv.policy = "h2o";
    so.kv.ratio = 0.5;
    so.kv.quant = q;
    auto s = Session::Create(*e, so);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(s.value()->Prefill(Prompt(*e)).ok());
    ASSERT_TRUE(s.value()->Compress().ok());
    const kv::KvCache& c = s.value()->impl().cache();
    auto type = kv::ParseKvQuant(q).value();
    const size_t row = kernels::RowBytesPadded(type, 32);  // head dim 32
    size_t want = 0;
    for (int l = 0; l < c.n_layer(); ++l)
      for (int h = 0; h < c.n_head_kv(); ++h) {
        EXPECT_EQ(c.head(l, h).type(), type);
        want += c.head(l, h).size() * (2 * row + sizeof(int32_t) + sizeof(float));
      }
    EXPECT_EQ(c.BytesHeld(), want) << q;  // exact after compression (no slack)
    EXPECT_LT(c.BytesHeld(), c.BytesFull()) << q;
    // Decode keeps working on quantized rows.
    ASSERT_TRUE(s.value()->Decode(5).ok());
  }
}

TEST(Compression, QuantizedStorageStaysCloseToFull) {
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::vector<float> full = Trace(*e, {});
  double prev = 0;
  for (const char* q : {"f16", "q8_0", "q4_0"}) {
    KvOptions kv;
    kv.quant = q;
    std::vector<float> t = Trace(*e, kv);
    double md = 0;
    for (size_t i = 0; i < full.size(); ++i) md = std::max(md, double{std::fabs(t[i] - full[i])});
    std::printf("kv quant %s: max |logit - full| over 17 positions = %.4f\n", q, md);
    EXPECT_LT(md, std::string(q) == "f16" ? 0.02 : std::string(q) == "q8_0" ? 0.2 : 2.0) << q;
    EXPECT_GE(md, prev * 0.5) << q << ": coarser storage should not be much closer";
    prev = md;
  }
}

TEST(Compression, WindowedGenerationHoldsFarLessThanFull) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  SessionOptions so;
  so.kv.policy = "window";
  so.kv.ratio = 0.1;
  auto s = Session::Create(*e, so);
  ASSERT_TRUE(s.ok());
  Session& ses = *s.value();
  ASSERT_TRUE(ses.Prefill({1}).ok());
  ASSERT_TRUE(ses.Compress().ok());
  size_t peak_after_64 = 0;
  for (int step = 0; step < 500; ++step) {
    ASSERT_TRUE(ses.Decode(static_cast<int>(std::max_element(ses.logits().begin(), ses.logits().end()) - ses.logits().begin())).ok());
    if (step >= 64) peak_after_64 = std::max(peak_after_64, ses.impl().cache().BytesHeld());
  }
  // Full at the end: 501 tokens; the window holds about 10% plus growth slack.
  EXPECT_LT(ses.impl().cache().BytesHeld(), ses.impl().cache().BytesFull() / 5);
  EXPECT_LT(peak_after_64, ses.impl().cache().BytesFull() / 4);
}

TEST(Compression, PrefillKeysBeforeRopeRotateIntoTheCache) {
  // Statistics can hold the prefill's pre-RoPE keys and rotated queries for
  // scorers that need them; rotating key i at position i gives the cached key.
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const auto& c = e->impl().config();
  kv::StatsNeeds needs;
  needs.prefill_qk = needs.prefill_k = true;
  kv::AttentionStats stats(c.n_layer, c.n_head_kv, c.group(), c.head_dim, needs);
  // Queries only (AM's reference queries): the same queries, no keys kept.
  kv::AttentionStats queries(c.n_layer, c.n_head_kv, c.group(), c.head_dim, kv::StatsNeeds{.prefill_qk = true});
  kv::KvCache cache(c.n_layer, c.n_head_kv, c.head_dim), cache2(c.n_layer, c.n_head_kv, c.head_dim);
  std::vector<int> ids = Prompt(*e);
  std::vector<float> logits;
  ASSERT_TRUE(e->impl().transformer().Forward(e->impl().pool(), cache, ids.data(), static_cast<int>(ids.size()), false, &logits, &stats).ok());
  const int half = static_cast<int>(ids.size()) / 2;  // in two batches, the second with room reserved
  ASSERT_TRUE(e->impl().transformer().Forward(e->impl().pool(), cache2, ids.data(), half, false, &logits, &queries).ok());
  queries.ReserveQueries(ids.size() - half);
  ASSERT_TRUE(e->impl().transformer().Forward(e->impl().pool(), cache2, ids.data() + half, static_cast<int>(ids.size()) - half,
                                              false, &logits, &queries).ok());
  const int d = c.head_dim;
  for (int l : {0, c.n_layer - 1})
    for (int h = 0; h < c.n_head_kv; ++h) {
      const kv::HeadStats& hs = stats.head(l, h);
      ASSERT_EQ(hs.k_pre.size(), ids.size() * d);
      ASSERT_EQ(hs.q_rot.size(), ids.size() * c.group() * d);
      EXPECT_TRUE(queries.head(l, h).k_pre.empty());
      ASSERT_EQ(queries.head(l, h).q_rot.size(), hs.q_rot.size());
      for (size_t i = 0; i < hs.q_rot.size(); ++i) ASSERT_NEAR(queries.head(l, h).q_rot[i], hs.q_rot[i], 1e-4) << l << " " << h << " " << i;
      for (size_t i = 0; i < ids.size(); i += 7) {
        std::vector<float> k(hs.k_pre.begin() + i * d, hs.k_pre.begin() + (i + 1) * d), cached(d);
        kernels::Rope(k.data(), 1, d, c.rope_dims, static_cast<int>(i), c.rope_base, c.rope_mode);
        cache.head(l, h).ReadKey(static_cast<int>(i), cached.data());
        for (int j = 0; j < d; ++j) ASSERT_NEAR(k[j], cached[j], 1e-5) << l << " " << h << " " << i;
      }
    }
}

TEST(Compression, BadBudgetsAreClearErrors) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  SessionOptions so;
  so.kv.policy = "h2o";
  so.kv.ratio = 0;
  EXPECT_NE(Session::Create(*e, so).error().message.find("outside (0, 1]"), std::string::npos);
  so.kv.ratio = 1.5;
  EXPECT_FALSE(Session::Create(*e, so).ok());
  so.kv.ratio = 1;
  so.kv.budget_tokens = 3;  // sink guard protects 4
  EXPECT_NE(Session::Create(*e, so).error().message.find("smaller than the 4 tokens"), std::string::npos);
  so.kv.policy = "scissorhands";
  so.kv.budget_tokens = 10;  // 4 sinks + 10 recent
  EXPECT_NE(Session::Create(*e, so).error().message.find("14 tokens"), std::string::npos);
  so.kv.policy = "nope";
  EXPECT_NE(Session::Create(*e, so).error().message.find("unknown KV policy"), std::string::npos);
  so.kv.policy = "full";
  so.kv.quant = "q5_k";
  EXPECT_NE(Session::Create(*e, so).error().message.find("unknown KV quantization"), std::string::npos);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
