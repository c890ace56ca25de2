// End-to-end goldens from independent references (MODELS.md): logits of the
// needle and qwen2 models (float64 numpy), greedy continuations, and the
// llama2.c stories260K texts through the CLI.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cmath>
#include <numeric>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

const nlohmann::json& GoldensV1() {
  static const nlohmann::json j = nlohmann::json::parse(test::ReadFile(test::ModelPath("goldens-v1.json")));
  return j;
}

// The entry for `model` in goldens.json, or in goldens-v1.json for needle v1.
const nlohmann::json* FindEntry(const char* section, const std::string& model) {
  const nlohmann::json& g = model.rfind("needle-v1-", 0) == 0 ? GoldensV1() : test::Goldens();
  for (const auto& e : g[section])
    if (e["model"] == model) return &e;
  return nullptr;
}

void CheckLogits(const std::string& model, double tol, const std::string& kv_type = "f32") {
  const nlohmann::json* g = FindEntry("logits", model);
  ASSERT_NE(g, nullptr) << model;
  auto e = test::LoadEngine(model);
  ASSERT_TRUE(e);
  SessionOptions so;
  so.kv.quant = kv_type;
  auto s = Session::Create(*e, so);
  ASSERT_TRUE(s.ok());
  std::vector<int> ids = (*g)["ids"].get<std::vector<int>>();
  ASSERT_TRUE(s.value()->Prefill(ids).ok());
  const std::vector<float>& lg = s.value()->logits();
  std::vector<int> top = (*g)["top_ids"].get<std::vector<int>>();
  std::vector<double> want = (*g)["top_logits"].get<std::vector<double>>();
  double max_diff = 0;
  for (size_t i = 0; i < top.size(); ++i) max_diff = std::max(max_diff, std::fabs(lg[top[i]] - want[i]));
  EXPECT_LE(max_diff, tol) << model;
  if (g->contains("logits_l2")) {
    double l2 = 0;
    for (float v : lg) l2 += double{v} * v;
    EXPECT_NEAR(std::sqrt(l2), (*g)["logits_l2"].get<double>(), 50 * tol) << model;
  }
  EXPECT_EQ(std::max_element(lg.begin(), lg.end()) - lg.begin(), top[0]);
}

TEST(ModelGolden, NeedleF32Logits) { CheckLogits("needle-3.7M-f32.gguf", 2e-3); }
TEST(ModelGolden, NeedleQ8Logits) { CheckLogits("needle-3.7M-q8_0.gguf", 5e-2); }
TEST(ModelGolden, NeedleQ4Logits) { CheckLogits("needle-3.7M-q4_0.gguf", 5e-2); }
TEST(ModelGolden, NeedleV1F32Logits) { CheckLogits("needle-v1-3.7M-f32.gguf", 2e-3); }
TEST(ModelGolden, NeedleV1Q8Logits) { CheckLogits("needle-v1-3.7M-q8_0.gguf", 5e-2); }
TEST(ModelGolden, NeedleV1Q4Logits) { CheckLogits("needle-v1-3.7M-q4_0.gguf", 5e-2); }
TEST(ModelGolden, NeedleV1PromptTokenizesToGoldenIds) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->impl().tokenizer().Encode(GoldensV1()["prompt"].get<std::string>(), true),
            FindEntry("logits", "needle-v1-3.7M-f32.gguf")->at("ids").get<std::vector<int>>());
}
TEST(ModelGolden, ShippedDefaultModelIsNeedleV1) {
  // models/ holds the retrieving v1 model, byte for byte the shared one.
  // A path, not string + literal: GCC 12's -Warray-bounds misreads the
  // latter's inlined copy here (a false positive, depending on inlining).
  const std::filesystem::path shipped = std::filesystem::path(KVTRIM_SOURCE_DIR) / "models" / "needle-v1-3.7M-f32.gguf";
  EXPECT_EQ(test::ReadFile(shipped.string()),
            test::ReadFile(test::ModelPath("needle-v1-3.7M-f32.gguf")));
}
TEST(ModelGolden, Qwen2Logits) { CheckLogits("qwen2-tiny-random.gguf", 2e-3); }

TEST(ModelGolden, NeedlePromptTokenizesToGoldenIds) {
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  std::string prompt = test::Goldens()["needle_prompt"];
  EXPECT_EQ(e->impl().tokenizer().Encode(prompt, true), FindEntry("logits", "needle-3.7M-f32.gguf")->at("ids").get<std::vector<int>>());
}

void CheckGreedy(const std::string& model) {
  const nlohmann::json* g = FindEntry("greedy", model);
  ASSERT_NE(g, nullptr);
  auto e = test::LoadEngine(model);
  ASSERT_TRUE(e);
  auto s = Session::Create(*e, {});
  ASSERT_TRUE(s.ok());
  std::vector<int> prompt = (*g)["prompt_ids"].get<std::vector<int>>();
  std::vector<int> want = (*g)["generated_ids"].get<std::vector<int>>();
  std::vector<int> got;
  auto st = Generate(*s.value(), prompt, static_cast<int>(want.size()), {0.f, 1.f, 0},
                     [&](int id) { got.push_back(id); });
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(got, want) << model;
}

TEST(ModelGolden, NeedleGreedy) { CheckGreedy("needle-3.7M-f32.gguf"); }
TEST(ModelGolden, NeedleV1Greedy) { CheckGreedy("needle-v1-3.7M-f32.gguf"); }
TEST(ModelGolden, Qwen2Greedy) { CheckGreedy("qwen2-tiny-random.gguf"); }

TEST(ModelGolden, DecodeMatchesPrefillLogits) {
  // Token-by-token decode and one batched prefill must agree (GEMM vs GEMV paths).
  auto e = test::LoadEngine("needle-3.7M-q8_0.gguf");
  ASSERT_TRUE(e);
  std::vector<int> ids = FindEntry("logits", "needle-3.7M-f32.gguf")->at("ids").get<std::vector<int>>();
  auto a = Session::Create(*e, {});
  auto b = Session::Create(*e, {});
  auto all = a.value()->ForwardAll(ids);
  ASSERT_TRUE(all.ok());
  const size_t V = e->impl().tokenizer().vocab_size();
  for (size_t t = 0; t < ids.size(); ++t) {
    ASSERT_TRUE(b.value()->Decode(ids[t]).ok());
    double md = 0;
    for (size_t i = 0; i < V; ++i) md = std::max(md, double{std::fabs(b.value()->logits()[i] - all.value()[t * V + i])});
    EXPECT_LE(md, 1e-3) << "position " << t;
  }
}

std::string Cli() { return KVTRIM_CLI; }

TEST(CliGolden, Stories260KEmptyPrompt) {
  auto r = test::RunCommand(Cli() + " run -m " + test::ModelPath("stories260K.gguf") + " -n 256 --temp 0 2>/dev/null");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, test::ReadFile(test::ModelPath("stories260K.golden.txt")));
}

TEST(CliGolden, Stories260KWithPrompt) {
  // 200 positions in all: 11 prompt tokens (BOS included) + 190 generated tokens
  // (llama2.c's -n 200 counts positions; -n here counts generated tokens).
  auto r = test::RunCommand(Cli() + " run -m " + test::ModelPath("stories260K.gguf") +
                            " -p 'Tom and Sue went to the' -n 190 --temp 0 -t 1 2>/dev/null");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, test::ReadFile(test::ModelPath("stories260K.golden-prompt.txt")));
}

TEST(CliGolden, NeedleFullText) {
  const nlohmann::json* g = FindEntry("greedy", "needle-3.7M-f32.gguf");
  int steps = static_cast<int>((*g)["generated_ids"].size());
  auto r = test::RunCommand(Cli() + " run -m " + test::ModelPath("needle-3.7M-f32.gguf") + " -p '" +
                            test::Goldens()["needle_prompt"].get<std::string>() + "' -n " + std::to_string(steps) +
                            " --temp 0 2>/dev/null");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, (*g)["full_text"].get<std::string>() + "\n");
}

TEST(CliGolden, NeedleV1FullTextWithDefaultModel) {
  // No -m: the default model is needle v1; -n 16 prints its 16 golden tokens.
  const nlohmann::json* g = FindEntry("greedy", "needle-v1-3.7M-f32.gguf");
  auto r = test::RunCommand("cd " + std::string(KVTRIM_SOURCE_DIR) + " && " + Cli() + " run -p '" +
                            GoldensV1()["prompt"].get<std::string>() + "' -n 16 --temp 0 2>/dev/null");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, (*g)["full_text"].get<std::string>() + "\n");
}

TEST(CliErrors, ClearMessagesAndNonZeroExit) {
  struct Case { std::string args, needle; };
  const std::vector<Case> cases = {
      {"run -m /nonexistent.gguf", "cannot open"},
      {"run -m " + test::ModelPath("stories260K.gguf") + " -n 600", "exceeds the context length"},
      {"run --no-such-flag", "no-such-flag"},
      {"run -m " + test::ModelPath("stories260K.gguf") + " --temp -1", "temp"},
      {"inspect " + test::ModelPath("MODELS.md"), "not a GGUF file"},
      {"bench -m " + test::ModelPath("stories260K.gguf") + " --reps 0", "reps"},
      {"run -m " + test::ModelPath("stories260K.gguf") + " --kv nope", "unknown KV policy 'nope'"},
      {"run -m " + test::ModelPath("stories260K.gguf") + " --kv h2o --kv-ratio 1.5", "outside (0, 1]"},
      {"run -m " + test::ModelPath("stories260K.gguf") + " --kv h2o --kv-ratio 0", "outside (0, 1]"},
      {"run -m " + test::ModelPath("stories260K.gguf") + " --kv h2o --kv-budget 2", "smaller than the 4 tokens"},
      {"run -m " + test::ModelPath("stories260K.gguf") + " --kv window --obs-window 8", "does not apply to policy 'window'"},
      {"run -m " + test::ModelPath("stories260K.gguf") + " --kv-quant q5_k", "unknown KV quantization"},
      {"eval -m " + test::ModelPath("stories260K.gguf") + " --tasks nope", "unknown task"},
      {"eval -m " + test::ModelPath("stories260K.gguf") + " --methods h2o,nope --samples 1", "unknown KV policy 'nope'"},
  };
  for (const auto& c : cases) {
    auto r = test::RunCommand(Cli() + " " + c.args + " 2>&1");
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << c.args << "\n" << r.out;
  }
  // A context past the trained one without RoPE scaling runs, as llama.cpp's
  // and the eval's do, with a warning that says which flags scale positions.
  auto past = test::RunCommand(Cli() + " run -m " + test::ModelPath("stories260K.gguf") + " -c 4096 -n 4 2>&1");
  EXPECT_EQ(past.code, 0) << past.out;
  EXPECT_NE(past.out.find("warning: context 4096 is past the model's trained context 512 and positions are not scaled "
                          "(add --rope-scaling yarn --rope-scale 8 --yarn-orig-ctx 512)"),
            std::string::npos)
      << past.out;
}

TEST(CliRun, PoliciesListsEveryPolicyWithFlags) {
  auto r = test::RunCommand(Cli() + " policies");
  EXPECT_EQ(r.code, 0);
  for (const char* s : {"full", "window", "random", "lru", "h2o", "scissorhands", "snapkv", "pyramidkv", "--sink-guard",
                        "--obs-window", "--pyramid-beta", "--history"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

// `kvtrim bench -c`: depths past the file's context (stories260K: 512), the
// first decode step untimed and reported, depths clipped to ctx - gen - 1.
TEST(CliBench, ContextFlagReachesPastTheFileAndTheFirstStepIsReported) {
  const std::string json =
      (std::filesystem::temp_directory_path() / ("kvtrim_bench_ctx_" + std::to_string(getpid()) + ".json")).string();
  const std::string base = Cli() + " bench -m " + test::ModelPath("stories260K.gguf") + " --gen 4 --reps 1 -t 1";
  auto r = test::RunCommand(base + " -d 600,700 -c 700 --json " + json + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("depth 700 clipped to 695 (context 700, gen 4)"), std::string::npos) << r.out;
  const auto rows = nlohmann::json::parse(test::ReadFile(json));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["depth"], 600);
  EXPECT_EQ(rows[1]["depth"], 695);
  for (const auto& row : rows) EXPECT_GE(row["first_decode_ms"].get<double>(), 0.0);
  auto past = test::RunCommand(base + " -d 600 2>&1");  // without -c: clipped to the file's 512
  EXPECT_EQ(past.code, 0) << past.out;
  EXPECT_NE(past.out.find("depth 600 clipped to 507 (context 512, gen 4)"), std::string::npos) << past.out;
  std::filesystem::remove(json);
}

TEST(CliRun, ReportsCompressedBytes) {
  auto r = test::RunCommand(Cli() + " run -m " + test::ModelPath("stories260K.gguf") +
                            " -n 100 --temp 0 --kv window --kv-ratio 0.1 2>&1 >/dev/null");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("kv: window ratio 0.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("evicted"), std::string::npos);
}

TEST(CliRun, FullCacheReportsExactlyFull) {
  // Like with like: --kv full uses exactly the full cache's bytes, whatever the allocation slack.
  for (const char* p : {"Hi", "It was a dark and stormy night."}) {
    auto r = test::RunCommand(Cli() + " run -m " + test::ModelPath("stories260K.gguf") + " -p '" + p +
                              "' -n 7 --temp 0 --kv full --kv-quant f32 2>&1 >/dev/null");
    EXPECT_EQ(r.code, 0);
    EXPECT_NE(r.out.find("100.0% of a full f32 cache"), std::string::npos) << r.out;
    // run's default KV type is f16 (llama.cpp's): an entry of head dim 8 is
    // 2 x 16 + 8 bytes against f32's 2 x 32 + 8, so 40 / 72 of the full cache.
    auto d = test::RunCommand(Cli() + " run -m " + test::ModelPath("stories260K.gguf") + " -p '" + p +
                              "' -n 7 --temp 0 --kv full 2>&1 >/dev/null");
    EXPECT_EQ(d.code, 0);
    EXPECT_NE(d.out.find("quant f16"), std::string::npos) << d.out;
    EXPECT_NE(d.out.find("100.0% of a full f16 cache"), std::string::npos) << d.out;
    EXPECT_NE(d.out.find("55.6% of a full f32 cache"), std::string::npos) << d.out;
  }
}

TEST(CliRun, GeneratesExactlyNTokens) {
  // -n counts generated tokens (llama.cpp): 7 tokens after the prompt, with EOS ignored.
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  for (const char* model : {"stories260K.gguf", "needle-v1-3.7M-f32.gguf"})
    for (int n : {1, 7, 32}) {
      auto r = test::RunCommand(Cli() + " run -m " + test::ModelPath(model) + " -p 'Once upon a time' -n " +
                                std::to_string(n) + " --temp 0 --ignore-eos 2>&1 >/dev/null");
      EXPECT_EQ(r.code, 0);
      // decode steps = n - 1: the last token is printed, never fed back.
      EXPECT_NE(r.out.find("decode: " + std::to_string(n - 1) + " tokens"), std::string::npos) << model << r.out;
    }
  for (int n : {1, 7, 32}) {
    auto s = Session::Create(*e, {});
    ASSERT_TRUE(s.ok());
    int count = 0;
    auto st = Generate(*s.value(), e->impl().tokenizer().Encode("Once upon a time", true), n, {0.f, 1.f, 0, true},
                       [&](int) { ++count; });
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(count, n);
    EXPECT_EQ(st->generated, n);
    EXPECT_EQ(s.value()->position(), static_cast<int64_t>(e->impl().tokenizer().Encode("Once upon a time", true).size()) + n - 1);
  }
}

TEST(CliRun, SamplingIsSeededAndDeterministic) {
  std::string cmd = Cli() + " run -m " + test::ModelPath("stories260K.gguf") + " -n 40 --temp 1 --top-p 0.9 2>/dev/null";
  auto a = test::RunCommand(cmd + " --seed 7");
  auto b = test::RunCommand(cmd + " --seed 7");
  auto c = test::RunCommand(cmd + " --seed 8");
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)
TEST(Session, TokenIdsOutsideTheVocabularyAreRefused) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  auto s = Session::Create(*e, {});
  ASSERT_TRUE(s.ok());
  const int V = e->impl().config().vocab;
  Status a = s.value()->Prefill({1, -1});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("token id -1 at position 1"), std::string::npos) << a.error().message;
  EXPECT_FALSE(s.value()->Decode(V).ok());
  EXPECT_FALSE(s.value()->ForwardAll({V + 5}).ok());
  EXPECT_EQ(s.value()->position(), 0) << "nothing was appended";
  EXPECT_TRUE(s.value()->Prefill({1, V - 1}).ok());
  EXPECT_EQ(e->impl().tokenizer().start(), e->impl().tokenizer().bos());
}
}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
