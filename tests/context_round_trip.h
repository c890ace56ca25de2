// The round trip of a compressed context through a transport (a context
// file, a Redis value): for every registered policy and KV type the loaded
// session holds the same entries, logits and bytes as the in-memory one; a
// policy that compresses only at prefill also answers a question with the
// same 24 greedy tokens. A decode-time policy's statistics are not saved
// (docs/context-file.md), so those are compared by the state loaded.
// Used by context_file_test.cpp (files) and server_store_test.cpp (Redis).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kvtrim/engine.h"

namespace kvtrim::test {

// n greedy tokens from s's logits (n - 1 fed back).
inline std::vector<int> Greedy(Session& s, int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    const std::vector<float>& l = s.logits();
    const int id = static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin());
    out.push_back(id);
    if (i + 1 < n) {
      EXPECT_TRUE(s.Decode(id).ok());
    }
  }
  return out;
}

// Saves `saved` somewhere and loads it back (`name`: policy and type).
using ContextTransport =
    std::function<Expected<std::unique_ptr<Session>>(const Session& saved, const std::string& name)>;

// `e` is stories260K; every policy at ratio 0.5 (razor, out of reach there, is skipped).
inline void ExpectEveryPolicyRoundTrips(const Engine& e, const ContextTransport& through) {
  const io::Tokenizer& tok = e.impl().tokenizer();
  const std::vector<int> ctx = tok.Encode("Once upon a time, there was a little girl named Lily. She loved to play "
                                          "outside in the park with her big red ball. One day she met a dog.", true);
  const std::vector<int> question = tok.Encode(" Lily said", false);
  int answered = 0, compared = 0;
  for (const kv::PolicyInfo& info : kv::Registry()) {
    const std::string& policy = info.name;
    auto pol = kv::MakePolicy(policy, {});
    ASSERT_TRUE(pol.ok()) << policy;
    const bool prefill_only = !pol.value()->traits().decode_time;
    for (const std::string quant : {"f32", "f16", "q8_0", "q4_0"}) {
      const std::string name = policy + "-" + quant;
      SessionOptions so;
      so.kv.policy = policy, so.kv.ratio = 0.5, so.kv.ratio_explicit = true, so.kv.quant = quant;
      auto a = Session::Create(e, so);
      ASSERT_TRUE(a.ok()) << a.error().message;
      ASSERT_TRUE(a.value()->Prefill(ctx).ok());
      Status st = a.value()->Compress();
      if (st.code() == ErrorCode::kUnreachable) continue;  // razor: ratio 0.5 out of its reach here
      ASSERT_TRUE(st.ok()) << name << ": " << st.message();
      auto b = through(*a.value(), name);
      ASSERT_TRUE(b.ok()) << b.error().message;
      ++compared;
      EXPECT_EQ(b.value()->position(), a.value()->position()) << name;
      EXPECT_EQ(b.value()->impl().cache().EntriesHeld(), a.value()->impl().cache().EntriesHeld()) << name;
      EXPECT_EQ(b.value()->impl().compressor().options().policy, policy);
      EXPECT_EQ(b.value()->logits(), a.value()->logits()) << name;
      EXPECT_EQ(b.value()->ContextBytes(), a.value()->ContextBytes()) << name;
      if (!prefill_only) continue;
      ++answered;
      ASSERT_TRUE(a.value()->Prefill(question).ok());
      ASSERT_TRUE(b.value()->Prefill(question).ok());
      EXPECT_EQ(Greedy(*b.value(), 24), Greedy(*a.value(), 24)) << name;
    }
  }
  EXPECT_GE(answered, 4 * 8);  // the eight prefill-only policies answered in every type
  EXPECT_GE(compared, 4 * static_cast<int>(kv::Registry().size()) - 8);
}

}  // namespace kvtrim::test
