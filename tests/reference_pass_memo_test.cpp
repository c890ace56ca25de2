// Forks of one prefilled session share a reference pass (src/engine/
// reference_pass.cpp): a fork that compresses unchanged reuses the pass
// another fork ran, and keeps exactly what a session of its own keeps; a
// fork that changed first (a decoded token) runs its own.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine_impl.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "io/tokenizer.h"
#include "kvtrim/engine.h"
#include "prose_prompt.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// Every head's kept positions, and the counter ref-pass-us.
std::pair<std::vector<std::vector<int>>, int64_t> Kept(const Session& s) {
  std::vector<std::vector<int>> out;
  for (int l = 0; l < s.impl().cache().n_layer(); ++l)
    for (int h = 0; h < s.impl().cache().n_head_kv(); ++h) {
      out.emplace_back();
      for (int i = 0; i < s.impl().cache().head(l, h).size(); ++i) out.back().push_back(s.impl().cache().head(l, h).pos(i));
    }
  int64_t us = -1;
  for (const auto& [k, v] : s.impl().compressor().counters())
    if (k == "ref-pass-us") us = v;
  return {out, us};
}

std::pair<std::vector<std::vector<int>>, int64_t> Alone(const Engine& e, const KvOptions& kv,
                                                        const std::vector<int>& prompt, int decode = -1) {
  SessionOptions so;
  so.kv = kv;
  auto s = Session::Create(e, so);
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(s.value()->Prefill(prompt).ok());
  if (decode >= 0) {
    EXPECT_TRUE(s.value()->Decode(decode).ok());
  }
  EXPECT_TRUE(s.value()->Compress().ok());
  return Kept(*s.value());
}

TEST(ReferencePassMemo, ForksShareOnePassAndKeepWhatTheirOwnWouldKeep) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::vector<int> prompt = test::ProsePrompt(*e, 400);
  std::vector<KvOptions> kvs;
  for (const char* p : {"kvzip", "kvzip+", "am"})
    for (double r : {0.1, 0.05}) {
      KvOptions k;
      k.policy = p, k.ratio = r, k.ratio_explicit = true;
      if (k.policy == "am") k.params["am-onpolicy"] = 0;  // off-policy: the pass a fork can share
      kvs.push_back(k);
    }
  SessionOptions so;
  so.fork_targets = kvs;
  auto base = Session::Create(*e, so);
  ASSERT_TRUE(base.ok());
  ASSERT_TRUE(base.value()->Prefill(prompt).ok());
  std::map<std::string, int64_t> first_us;
  for (const KvOptions& k : kvs) {
    auto f = base.value()->Fork(k);
    ASSERT_TRUE(f.ok()) << f.error().message;
    ASSERT_TRUE(f.value()->Compress().ok());
    const auto [kept, us] = Kept(*f.value());
    EXPECT_EQ(kept, Alone(*e, k, prompt).first) << k.policy << " " << k.ratio;
    // The second ratio reused the first's pass and is charged its time.
    if (!first_us.count(k.policy)) {
      first_us[k.policy] = us;
      EXPECT_EQ(f.value()->impl().compressor().reused_pass_seconds(), 0.0);
    } else {
      EXPECT_EQ(us, first_us[k.policy]) << k.policy;
      EXPECT_NEAR(f.value()->impl().compressor().reused_pass_seconds() * 1e6, us, 1.0) << k.policy;
    }
  }
  // A fork that decodes first has a state of its own: its own pass.
  const int next = 17;
  auto f = base.value()->Fork(kvs[0]);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f.value()->Decode(next).ok());
  ASSERT_TRUE(f.value()->Compress().ok());
  EXPECT_EQ(Kept(*f.value()).first, Alone(*e, kvs[0], prompt, next).first);
  // Compressed once, the same tokens are another state: compressing again
  // at a lower ratio runs a pass over what the fork holds now.
  auto twice = [&](Session& s) {
    EXPECT_TRUE(s.Compress().ok());
    s.impl().compressor().SetRatio(0.05);
    EXPECT_TRUE(s.Compress().ok());
    return Kept(s).first;
  };
  auto g = base.value()->Fork(kvs[0]);
  ASSERT_TRUE(g.ok());
  SessionOptions own;
  own.kv = kvs[0];
  auto alone = Session::Create(*e, own);
  ASSERT_TRUE(alone.ok());
  ASSERT_TRUE(alone.value()->Prefill(prompt).ok());
  EXPECT_EQ(twice(*g.value()), twice(*alone.value()));
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
