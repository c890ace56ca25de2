// llama-bench-style tests (`kvtrim bench -o md|json`): test names, sample
// counts and the JSON/markdown fields llama-bench writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "kvtrim/bench_llama.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

TEST(LlamaBench, TestsPerDepthWithNamesAndSamples) {
  auto e = test::LoadEngine("stories260K.gguf", 1);
  ASSERT_TRUE(e);
  LlamaBenchOptions o;
  o.prompts = {16};
  o.gens = {4};
  o.depths = {0, 20};
  o.reps = 2;
  o.warmup_s = 0;
  auto r = RunLlamaBench(*e, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r.value().size(), 4u);
  const char* names[] = {"pp16", "tg4", "pp16 @ d20", "tg4 @ d20"};
  for (size_t i = 0; i < 4; ++i) {
    const LlamaBenchTest& t = r.value()[i];
    EXPECT_EQ(t.name(), names[i]);
    ASSERT_EQ(t.samples_ns.size(), 2u);
    ASSERT_EQ(t.samples_reps.size(), 2u);
    // Never negative; a sample is positive on any clock in practice (its
    // runs are repeated until they span 50 clock steps), but the test does
    // not rely on the clock (bench_clock_test.cpp does, on a fake one).
    for (double ns : t.samples_ns) EXPECT_GE(ns, 0);
    for (int k : t.samples_reps) EXPECT_GE(k, 1);
    // tokens / second of each sample: (n_prompt + n_gen) / seconds, 0 for a 0 ns sample, never inf
    const double want = t.samples_ns[0] > 0 ? 1e9 * (t.n_prompt + t.n_gen) / t.samples_ns[0] : 0.0;
    EXPECT_NEAR(t.samples_ts()[0], want, 1e-6 * std::max(1.0, want));
    EXPECT_TRUE(std::isfinite(t.samples_ts()[1]));
    EXPECT_NEAR(t.avg_ns(), (t.samples_ns[0] + t.samples_ns[1]) / 2, 1e-6);
  }
  o.depths = {510};  // 510 + 16 > the context of 512
  auto bad = RunLlamaBench(*e, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("context"), std::string::npos);
}

TEST(LlamaBench, CliJsonAndMarkdownHaveLlamaBenchFields) {
  const std::string base = std::string(KVTRIM_CLI) + " bench -m " + test::ModelPath("stories260K.gguf") +
                           " -t 1 -p 8 -n 4 --reps 2";
  auto j = test::RunCommand(base + " -o json 2>/dev/null");
  ASSERT_EQ(j.code, 0);
  auto rows = nlohmann::json::parse(j.out);
  ASSERT_EQ(rows.size(), 2u);
  for (const char* k : {"model_filename", "model_type", "model_size", "model_n_params", "n_threads", "n_prompt",
                        "n_gen", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns", "samples_ts"})
    EXPECT_TRUE(rows[0].contains(k)) << k;
  EXPECT_EQ(rows[0]["n_prompt"], 8);
  EXPECT_EQ(rows[1]["n_gen"], 4);
  EXPECT_EQ(rows[1]["samples_ns"].size(), 2u);
  EXPECT_EQ(rows[1]["samples_reps"].size(), 2u);
  EXPECT_TRUE(rows[1].contains("clock_step_ns"));
  EXPECT_TRUE(rows[1]["below_clock_resolution"].is_boolean());
  for (const auto& ts : rows[1]["samples_ts"]) EXPECT_TRUE(ts.is_number()) << ts;  // never null (inf/nan)
  auto m = test::RunCommand(base + " -o md 2>/dev/null");
  ASSERT_EQ(m.code, 0);
  EXPECT_NE(m.out.find("| model "), std::string::npos);
  EXPECT_NE(m.out.find("|           pp8 |"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("|           tg4 |"), std::string::npos) << m.out;
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
