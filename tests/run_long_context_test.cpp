// `kvtrim run` past the model's trained context: the default model (trained
// at 1,024 tokens) read at 4,096 with llama.cpp's YaRN flags answers a 4k
// needle prompt as the eval does on the same sample, token for token as the
// library's own greedy generation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/engine_impl.h"
#include "eval/scoring.h"
#include "eval/tasks.h"
#include "io/tokenizer.h"
#include "kvtrim/engine.h"
#include "kvtrim/eval_sweep.h"
#include "kvtrim/eval_tasks.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

constexpr int kCtx = 4096;
const char* kYarn = " --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 1024";

// Greedy tokens after `prompt` (BOS included) with the full cache stored as `quant`.
std::vector<int> Greedy(const Engine& e, const std::vector<int>& prompt, const std::string& quant, int n) {
  SessionOptions so;
  so.ctx = kCtx;
  so.kv.quant = quant;
  auto s = Session::Create(e, so);
  EXPECT_TRUE(s.ok()) << s.error().message;
  std::vector<int> out;
  SamplingOptions g;
  g.temp = 0;
  auto st = Generate(*s.value(), prompt, n, g, [&](int id) { out.push_back(id); });
  EXPECT_TRUE(st.ok()) << st.error().message;
  return out;
}

TEST(RunLongContext, YarnAt4kAnswersTheNeedleAsTheEval) {
  const std::string model = std::string(KVTRIM_SOURCE_DIR) + "/models/needle-v1-3.7M-f32.gguf";
  const std::string haystack = test::SharedPath("data/frankenstein.txt");
  if (!std::filesystem::exists(haystack)) GTEST_SKIP() << "no haystack";
  RopeOverrides rope;
  rope.scaling = "yarn", rope.scale = 4, rope.yarn_orig_ctx = 1024;
  auto e = Engine::Load({model, 2, rope, kCtx});
  ASSERT_TRUE(e.ok()) << e.error().message;
  const io::Tokenizer& tok = e.value()->impl().tokenizer();
  auto hay = eval::Haystack::Load(haystack);
  ASSERT_TRUE(hay.ok());
  eval::TaskOptions to;
  to.context_tokens = kCtx - eval::kAnswerRoom;
  auto sample = eval::MakeSample(tok, hay.value(), eval::TaskKind::kNiah, to, 1, 4);
  ASSERT_TRUE(sample.ok()) << sample.error().message;
  std::vector<int> tokens = sample->context;
  tokens.insert(tokens.end(), sample->question.begin(), sample->question.end());
  // The prompt as a user has it: text, which `run` tokenizes again (BOS added).
  const std::string text = tok.Decode(tokens);
  ASSERT_EQ(tok.Encode(text, true), tokens) << "the sample's text does not tokenize back to its tokens";
  ASSERT_GT(tokens.size(), 3000u);  // past the trained context
  // The eval's answer (full cache in f32, greedy up to a newline) is right.
  const std::vector<int> ref32 = Greedy(*e.value(), tokens, "f32", sample->max_answer_tokens);
  std::string answer;
  int prev = tokens.back();
  for (int id : ref32) {
    const std::string piece = tok.Piece(prev, id);
    if (piece.find('\n') != std::string::npos) break;
    answer += piece;
    prev = id;
  }
  ASSERT_TRUE(eval::ScoreAnswer(eval::TaskKind::kNiah, answer, sample->expected))
      << "answer '" << answer << "', expected " << sample->expected[0];
  // `kvtrim run -c 4096` with the YaRN flags, greedy, its default f16 cache.
  const std::string file = (std::filesystem::temp_directory_path() / "kvtrim-needle-4k.txt").string();
  std::ofstream(file, std::ios::binary) << text;
  const int n = sample->max_answer_tokens;
  for (const char* quant : {"f16", "f32"}) {
    const test::CmdResult r = test::RunCommand(std::string(KVTRIM_CLI) + " run -m " + model + " -f " + file +
                                               " -c 4096" + kYarn + " --temp 0 -n " + std::to_string(n) +
                                               " --kv-quant " + quant + " -t 2 2>/dev/null");
    ASSERT_EQ(r.code, 0) << quant;
    // Its stdout: the prompt, then exactly the library's greedy tokens.
    std::string expect;
    prev = -1;
    for (int id : tokens) expect += tok.Piece(prev, id), prev = id;
    for (int id : Greedy(*e.value(), tokens, quant, n)) expect += tok.Piece(prev, id), prev = id;
    EXPECT_EQ(r.out, expect + "\n") << quant;
    EXPECT_NE(r.out.find(text + answer), std::string::npos) << quant << ": the eval's answer '" << answer << "'";
  }
  // Without -c past the trained context the same prompt is refused.
  const test::CmdResult refused = test::RunCommand(std::string(KVTRIM_CLI) + " run -m " + model + " -f " + file +
                                                   " --temp 0 -n 4 2>&1");
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.out.find("exceeds the context length 1024"), std::string::npos) << refused.out;
  std::filesystem::remove(file);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
