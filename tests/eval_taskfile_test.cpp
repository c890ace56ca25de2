// External task files: the RULER and LongBench readers on the shared RULER
// file and on hand-made lines (malformed ones name their line), the two
// scorers on hand-computed cases, prompts that are truncated in the middle.
#include <gtest/gtest.h>

#include <fstream>

#include "eval/task_file.h"
#include "io/gguf.h"
#include "io/tokenizer.h"
#include "test_util.h"

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(TaskFile, ReadsTheSharedRulerFile) {
  auto tf = ReadTaskFile(test::SharedPath("data/ruler/niah_multikey_3_4096.jsonl"));
  ASSERT_TRUE(tf.ok()) << tf.error().message;
  EXPECT_EQ(tf->name, "niah_multikey_3_4096");
  ASSERT_EQ(tf->samples.size(), 500u);
  for (const ExternalSample& s : tf->samples) {
    EXPECT_EQ(s.format, TaskFileFormat::kRuler);
    ASSERT_EQ(s.answers.size(), 1u);
    EXPECT_EQ(s.answers[0].size(), 36u);  // a uuid
    EXPECT_EQ(s.question.rfind("What is the special magic uuid for ", 0), 0u) << s.line;
    EXPECT_EQ(s.question.substr(s.question.size() - 3), " is");
    EXPECT_EQ(s.context.rfind("A special magic uuid is hidden", 0), 0u);
    EXPECT_EQ(s.context.find('\n' + s.question), std::string::npos);
  }
  EXPECT_EQ(tf->samples[0].answers[0], "1ee34dc4-3b04-4a8b-805b-fdc94e7ed827");
  EXPECT_EQ(tf->samples[499].line, 500);
}

TEST(TaskFile, ReadsLongBenchAndRulerLines) {
  auto path = WriteTemp("mixed.jsonl",
                        "{\"context\": \"Paris is the capital of France.\", \"input\": \"What is the capital?\", "
                        "\"answers\": [\"Paris\", \"paris, France\"], \"length\": 7}\n"
                        "\n"
                        "{\"index\": 3, \"input\": \"Some text.\\nMore text.\\nQuestion here is\", \"outputs\": [\"a\", "
                        "\"b\"]}\n");
  auto tf = ReadTaskFile(path);
  ASSERT_TRUE(tf.ok()) << tf.error().message;
  ASSERT_EQ(tf->samples.size(), 2u);
  EXPECT_EQ(tf->samples[0].format, TaskFileFormat::kLongBench);
  EXPECT_EQ(tf->samples[0].context, "Paris is the capital of France.");
  EXPECT_EQ(tf->samples[0].question, "What is the capital?");
  EXPECT_EQ(tf->samples[0].answers.size(), 2u);
  EXPECT_EQ(tf->samples[1].format, TaskFileFormat::kRuler);
  EXPECT_EQ(tf->samples[1].line, 3);
  EXPECT_EQ(tf->samples[1].context, "Some text.\nMore text.");
  EXPECT_EQ(tf->samples[1].question, "Question here is");
}

TEST(TaskFile, MalformedLinesAreNamed) {
  const std::string good = "{\"input\": \"c\\nq\", \"outputs\": [\"x\"]}\n";
  struct Case { std::string line, needle; };
  const std::vector<Case> cases = {
      {"{\"input\": \"c\\nq\", \"outputs\": [\"x\"]", "not valid JSON"},
      {"[1, 2]", "not a JSON object"},
      {"{\"input\": \"c\\nq\"}", "neither a RULER sample"},
      {"{\"input\": 5, \"outputs\": [\"x\"]}", "string 'input'"},
      {"{\"input\": \"c\\nq\", \"outputs\": []}", "'outputs' is empty"},
      {"{\"input\": \"c\\nq\", \"outputs\": [3]}", "non-string answer"},
      {"{\"input\": \"no newline\", \"outputs\": [\"x\"]}", "no line break"},
      {"{\"context\": \"c\", \"answers\": [\"x\"]}", "needs string 'context' and 'input'"},
  };
  for (const Case& c : cases) {
    auto tf = ReadTaskFile(WriteTemp("bad.jsonl", good + good + c.line + "\n" + good));
    ASSERT_FALSE(tf.ok()) << c.line;
    EXPECT_NE(tf.error().message.find("bad.jsonl: line 3: "), std::string::npos) << tf.error().message;
    EXPECT_NE(tf.error().message.find(c.needle), std::string::npos) << tf.error().message;
  }
  EXPECT_FALSE(ReadTaskFile("/nonexistent.jsonl").ok());
  EXPECT_NE(ReadTaskFile(WriteTemp("empty.jsonl", "\n\n")).error().message.find("no samples"), std::string::npos);
}

TEST(TaskFile, RulerStringMatchIsTheShareOfOutputsFound) {
  EXPECT_EQ(RulerStringMatch("The numbers are 123 and 456.", {"123", "456"}), 1.0);
  EXPECT_EQ(RulerStringMatch("The numbers are 123.", {"123", "456"}), 0.5);
  EXPECT_EQ(RulerStringMatch("ABC-def", {"abc-DEF"}), 1.0);  // case-insensitive
  EXPECT_EQ(RulerStringMatch("nothing", {"123", "456", "789"}), 0.0);
  EXPECT_NEAR(RulerStringMatch("789 and 456", {"123", "456", "789"}), 2.0 / 3, 1e-15);
}

TEST(TaskFile, LongBenchF1ByHand) {
  // pred "The cat sat." -> [cat, sat]; ref "cat sat on a mat" -> [cat, sat, on, mat]:
  // precision 1, recall 1/2, F1 = 2/3.
  EXPECT_NEAR(LongBenchF1("The cat sat.", {"cat sat on a mat"}), 2.0 / 3, 1e-12);
  EXPECT_EQ(LongBenchF1("Paris", {"London", "paris!"}), 1.0);  // best over answers, normalised
  EXPECT_EQ(LongBenchF1("", {"x"}), 0.0);
  // pred [a b b] (articles? no: "b b x") vs ref [b x y]: common b, x = 2; P 2/3, R 2/3.
  EXPECT_NEAR(LongBenchF1("b b x", {"b x y"}), 2.0 / 3, 1e-12);
}

TEST(TaskFile, PromptsAreTruncatedInTheMiddleOrSkipped) {
  auto f = io::GgufFile::Open(test::ModelPath("needle-v1-3.7M-f32.gguf"));
  ASSERT_TRUE(f.ok());
  auto tok = io::Tokenizer::FromGguf(*f.value());
  ASSERT_TRUE(tok.ok());
  ExternalSample s;
  s.format = TaskFileFormat::kRuler;
  std::string ctx;
  for (int i = 0; i < 200; ++i) ctx += "Sentence number " + std::to_string(i) + " is here. ";
  s.context = ctx;
  s.question = "What is the special magic number for x mentioned in the provided text? It is";
  s.answers = {"1234567"};
  auto full = BuildExternalPrompt(tok.value(), s, 100000, true);
  ASSERT_TRUE(full.ok());
  EXPECT_FALSE(full->truncated);
  EXPECT_EQ(full->context, tok->Encode(ctx, true));
  auto cut = BuildExternalPrompt(tok.value(), s, 300, true);
  ASSERT_TRUE(cut.ok());
  EXPECT_TRUE(cut->truncated);
  const int answer_room = std::max<int>(cut->answer.size(), cut->max_answer_tokens);
  EXPECT_EQ(static_cast<int>(cut->context.size() + cut->question.size()) + answer_room, 300);
  // The first half and the last half of the context survive, the middle goes.
  const size_t h = cut->context.size() / 2;
  EXPECT_TRUE(std::equal(cut->context.begin(), cut->context.begin() + h, full->context.begin()));
  EXPECT_TRUE(std::equal(cut->context.end() - h, cut->context.end(), full->context.end() - h));
  EXPECT_EQ(cut->question, full->question);
  auto skip = BuildExternalPrompt(tok.value(), s, 300, false);
  ASSERT_FALSE(skip.ok());
  EXPECT_EQ(skip.error().code, ErrorCode::kUnreachable);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval
