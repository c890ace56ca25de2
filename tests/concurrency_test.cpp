// Sessions of one Engine run from several threads at once (they share the
// engine's weights and thread pool): each must give exactly the logits it
// gives alone. Run under TSan by CI (label `concurrency`, tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kernels/thread_pool.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// Prefill, compress with `policy` at ratio 0.5, then 4 greedy decode steps;
// returns the logits after each step, concatenated.
std::vector<float> RunSession(const Engine& e, const std::string& policy, const std::vector<int>& prompt) {
  SessionOptions so;
  so.ctx = 128;
  so.kv.policy = policy;
  so.kv.ratio = 0.5;
  auto s = Session::Create(e, so);
  if (!s.ok()) return {};
  std::vector<float> out;
  if (!s.value()->Prefill(prompt).ok() || !s.value()->Compress().ok()) return {};
  for (int step = 0; step < 4; ++step) {
    const auto& lg = s.value()->logits();
    out.insert(out.end(), lg.begin(), lg.end());
    const int next = static_cast<int>(std::max_element(lg.begin(), lg.end()) - lg.begin());
    if (!s.value()->Decode(next).ok()) return {};
  }
  return out;
}

TEST(Concurrency, SessionsOnOneEngineMatchSerialRuns) {
  auto e = test::LoadEngine("stories260K.gguf", 2);
  ASSERT_TRUE(e);
  const std::vector<std::string> policies = {"full", "snapkv", "h2o", "window"};
  std::vector<std::vector<int>> prompts;
  for (size_t i = 0; i < policies.size(); ++i)
    prompts.push_back(e->impl().tokenizer().Encode("Once upon a time " + std::to_string(i) + " there was a cat", true));
  std::vector<std::vector<float>> serial(policies.size()), parallel(policies.size());
  for (size_t i = 0; i < policies.size(); ++i) serial[i] = RunSession(*e, policies[i], prompts[i]);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < policies.size(); ++i)
    threads.emplace_back([&, i] { parallel[i] = RunSession(*e, policies[i], prompts[i]); });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < policies.size(); ++i) {
    ASSERT_EQ(serial[i].size(), 4u * e->impl().tokenizer().vocab_size()) << policies[i];
    EXPECT_EQ(serial[i], parallel[i]) << policies[i];  // bit for bit
  }
}

// Several threads issue ParallelFor on one pool at the same time: every
// call must see each of its own indices exactly once.
TEST(Concurrency, ThreadPoolServesConcurrentCallers) {
  kernels::ThreadPool pool(3);
  constexpr int kCallers = 4, kN = 1000, kRounds = 50;
  std::vector<std::vector<int>> hits(kCallers, std::vector<int>(kN, 0));
  std::vector<std::thread> th;
  for (int c = 0; c < kCallers; ++c)
    th.emplace_back([&, c] {
      for (int r = 0; r < kRounds; ++r)
        pool.ParallelFor(kN, [&](int64_t a, int64_t b) {
          for (int64_t i = a; i < b; ++i) ++hits[c][i];
        });
    });
  for (auto& t : th) t.join();
  for (int c = 0; c < kCallers; ++c)
    for (int i = 0; i < kN; ++i) ASSERT_EQ(hits[c][i], kRounds) << "caller " << c << " index " << i;
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
