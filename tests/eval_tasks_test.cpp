// Needle task generators (exact templates, layout, determinism) and scoring.
// GCC 12 at -O1 (the sanitizer builds) reports a false -Wmaybe-uninitialized
// inside libstdc++'s std::regex (std::function moved in _NFA); silenced here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "eval/scoring.h"
#include "eval/tasks.h"
#include "kvtrim/eval_tasks.h"
#include "io/gguf.h"
#include "io/tokenizer.h"
#include "test_util.h"

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

const io::Tokenizer& Tok() {
  static const io::Tokenizer tok = [] {
    auto f = io::GgufFile::Open(test::ModelPath("needle-3.7M-f32.gguf"));
    EXPECT_TRUE(f.ok());
    auto t = io::Tokenizer::FromGguf(*f.value());
    EXPECT_TRUE(t.ok());
    return t.value();
  }();
  return tok;
}

const Haystack& Hay(const std::string& name) {
  static std::map<std::string, Haystack> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  auto h = Haystack::Load(test::SharedPath("data/" + name + ".txt"));
  EXPECT_TRUE(h.ok()) << (h.ok() ? "" : h.error().message);
  return cache.emplace(name, h.ok() ? h.value() : Haystack::FromText("x")).first->second;
}

TaskSample Make(TaskKind kind, int ctx, uint64_t seed, int index, int n = 8, const std::string& hay = "frankenstein") {
  TaskOptions o;
  o.context_tokens = ctx;
  o.seed = seed;
  auto s = MakeSample(Tok(), Hay(hay), kind, o, index, n);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return s.ok() ? s.value() : TaskSample{};
}

std::vector<int> Slice(const std::vector<int>& v, int start, int len) {
  return std::vector<int>(v.begin() + start, v.begin() + start + len);
}

std::string QuestionOne(const std::string& k) {
  return "What is the special magic number for " + k + " mentioned in the provided text? The special magic number for " +
         k + " mentioned in the provided text is";
}
std::string QuestionAll(const std::string& k) {
  return "What are all the special magic numbers for " + k +
         " mentioned in the provided text? The special magic numbers for " + k + " mentioned in the provided text are";
}
std::string JoinList(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
  return s;
}

// Checks one sample's layout and texts against the templates.
void CheckSample(const TaskSample& s, TaskKind kind, int ctx, const TaskOptions& o) {
  const io::Tokenizer& tok = Tok();
  SCOPED_TRACE(std::string(TaskName(kind)) + " ctx " + std::to_string(ctx) + " index " + std::to_string(s.index));
  ASSERT_EQ(s.context.size() + s.question.size(), static_cast<size_t>(ctx));
  ASSERT_FALSE(s.context.empty());
  EXPECT_EQ(s.context[0], tok.bos());
  const size_t n_needles = kind == TaskKind::kNiah || kind == TaskKind::kPasskey ? 1 : o.needles;
  ASSERT_EQ(s.needle_starts.size(), n_needles);
  ASSERT_EQ(s.needle_lengths.size(), n_needles);
  ASSERT_EQ(s.depths.size(), n_needles);
  const std::string context = tok.Decode(s.context);
  const std::regex needle_re(kind == TaskKind::kPasskey ? "The pass key is (\\d{5})\\. Remember it\\. (\\d{5}) is the pass key\\."
                                                        : "One of the special magic numbers for ([a-z]+-[a-z]+) is: (\\d{7})\\.");
  std::vector<std::string> keys, values;
  for (size_t j = 0; j < n_needles; ++j) {
    ASSERT_GE(s.needle_starts[j], 1);
    ASSERT_LE(s.needle_starts[j] + s.needle_lengths[j], static_cast<int>(s.context.size()));
    const std::string text = tok.Decode(Slice(s.context, s.needle_starts[j], s.needle_lengths[j]));
    std::smatch m;
    ASSERT_TRUE(std::regex_match(text, m, needle_re)) << "needle: " << text;
    keys.push_back(m[1]);
    values.push_back(m[2]);
    EXPECT_NE(context.find(" " + text), std::string::npos);
    EXPECT_GE(s.depths[j], 0.0);
    EXPECT_LE(s.depths[j], 1.0);
    if (j > 0) {
      EXPECT_GE(s.needle_starts[j], s.needle_starts[j - 1] + s.needle_lengths[j - 1]);
    }
  }
  for (const std::string& v : s.expected) EXPECT_NE(context.find(v), std::string::npos) << v;
  const std::string question = tok.Decode(s.question);
  std::vector<int> all = s.context;
  all.insert(all.end(), s.question.begin(), s.question.end());
  const std::string prompt = tok.Decode(all);
  EXPECT_EQ(prompt.substr(prompt.size() - question.size() - 1), " " + question) << "one space before the question";
  EXPECT_NE(prompt.substr(prompt.size() - question.size() - 2, 1), " ");
  std::map<std::string, std::string> value_of;
  for (size_t j = 0; j < keys.size(); ++j) value_of[keys[j]] = values[j];
  switch (kind) {
    case TaskKind::kPasskey:
      EXPECT_EQ(keys[0], values[0]);
      EXPECT_EQ(question, "What is the pass key? The pass key is");
      EXPECT_EQ(s.expected, std::vector<std::string>{values[0]});
      break;
    case TaskKind::kNiah:
    case TaskKind::kMultiKey: {
      EXPECT_EQ(value_of.size(), n_needles) << "keys must be distinct";
      ASSERT_EQ(s.expected.size(), 1u);
      bool found = false;
      for (auto& [k, v] : value_of) found |= question == QuestionOne(k) && s.expected[0] == v;
      EXPECT_TRUE(found) << question;
      break;
    }
    case TaskKind::kMultiValue:
      EXPECT_EQ(value_of.size(), 1u) << "one key";
      EXPECT_EQ(question, QuestionAll(keys[0]));
      EXPECT_EQ(s.expected, values);
      break;
    case TaskKind::kMultiTurn:
      ADD_FAILURE() << "a conversation is not one context";
      break;
    case TaskKind::kMultiQuery: {
      EXPECT_EQ(value_of.size(), n_needles) << "keys must be distinct";
      ASSERT_EQ(s.expected.size(), static_cast<size_t>(o.queries));
      std::vector<std::string> asked;
      for (const std::string& v : s.expected)
        for (auto& [k, val] : value_of)
          if (val == v) asked.push_back(k);
      EXPECT_EQ(question, QuestionAll(JoinList(asked)));
      break;
    }
  }
  std::set<std::string> distinct(values.begin(), values.end());
  EXPECT_EQ(distinct.size(), values.size()) << "values must be distinct";
  EXPECT_EQ(tok.Decode(s.answer), JoinList(s.expected) + ".");
  EXPECT_EQ(s.max_answer_tokens, s.expected.size() == 1 ? 12 : 10 * static_cast<int>(s.expected.size()) + 4);
}

TEST(EvalTasks, TaskNamesRoundTrip) {
  ASSERT_EQ(AllTasks().size(), 5u);
  for (TaskKind k : AllTasks()) {
    auto p = ParseTask(TaskName(k));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p.value(), k);
  }
  EXPECT_STREQ(TaskName(TaskKind::kMultiQuery), "niah-multiquery");
}

TEST(EvalTasks, MultiTurnSamplesAreConversations) {
  const Haystack hay = Haystack::FromText(test::ReadFile(test::SharedPath("data/frankenstein.txt")), "frankenstein");
  TaskOptions o;
  o.context_tokens = 2000;
  o.turns = 10;
  auto p = ParseTask("niah-multiturn");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value(), TaskKind::kMultiTurn);
  EXPECT_EQ(std::count(AllTasks().begin(), AllTasks().end(), TaskKind::kMultiTurn), 0);
  EXPECT_FALSE(MakeSample(Tok(), hay, TaskKind::kMultiTurn, o, 0, 4).ok());
  size_t total = 0;
  std::vector<size_t> needle_at;
  for (int i = 0; i < 4; ++i) {
    auto c = MakeConversationSample(Tok(), hay, o, i, 4);
    ASSERT_TRUE(c.ok()) << c.error().message;
    ASSERT_EQ(c->exchanges.size(), 9u);
    ASSERT_EQ(c->expected.size(), 1u);
    const std::string& first = c->exchanges[0].first;
    const size_t at = first.find("One of the special magic numbers for ");
    ASSERT_NE(at, std::string::npos) << "the needle is in the first user message";
    needle_at.push_back(at * 100 / first.size());
    EXPECT_NE(first.find(" is: " + c->expected[0] + "."), std::string::npos);
    for (size_t t = 1; t < c->exchanges.size(); ++t)
      EXPECT_EQ(c->exchanges[t].first.find(c->expected[0]), std::string::npos) << "one statement only";
    const std::string key = first.substr(at + 37, first.find(' ', at + 37) - at - 37);
    EXPECT_EQ(c->question, "What is the special magic number for " + key + " mentioned in the provided text?");
    // Deterministic.
    auto again = MakeConversationSample(Tok(), hay, o, i, 4);
    EXPECT_EQ(again->exchanges, c->exchanges);
    for (const auto& [u, a] : c->exchanges) total += Tok().Encode(u, false).size() + Tok().Encode(a, false).size();
  }
  // Sized to the context: ~200 tokens a turn of which ~8 are the template's.
  EXPECT_GT(total / 4, 1500u);
  EXPECT_LT(total / 4, 2000u);
  EXPECT_TRUE(std::is_sorted(needle_at.begin(), needle_at.end())) << "depths spread over samples";
  EXPECT_LT(needle_at.front(), needle_at.back());
  o.turns = 1;
  EXPECT_FALSE(MakeConversationSample(Tok(), hay, o, 0, 4).ok());
  o.turns = 100;
  EXPECT_FALSE(MakeConversationSample(Tok(), hay, o, 0, 4).ok());  // 20 tokens a turn
}

TEST(EvalTasks, UnknownTaskNameIsAnError) {
  auto p = ParseTask("niah-multi");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("niah-multi'"), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find("niah-multivalue"), std::string::npos) << "lists the valid names";
  EXPECT_NE(p.error().message.find("passkey"), std::string::npos);
}

TEST(EvalTasks, HaystackErrors) {
  auto missing = Haystack::Load(test::SharedPath("data/no-such-file.txt"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no-such-file.txt"), std::string::npos);
  const std::string bad_path = ::testing::TempDir() + "kvtrim_bad_utf8.txt";
  std::ofstream(bad_path, std::ios::binary) << "caf\xC3\xA9 ok\n\xC3\x28 bad";
  auto bad = Haystack::Load(bad_path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("UTF-8"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("offset 9"), std::string::npos) << bad.error().message;
  std::ofstream(bad_path, std::ios::binary) << "\xED\xA0\x80";  // a surrogate
  EXPECT_FALSE(Haystack::Load(bad_path).ok());
  std::ofstream(bad_path, std::ios::binary | std::ios::trunc).flush();
  auto empty = Haystack::Load(bad_path);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("empty"), std::string::npos);
  std::ofstream(bad_path, std::ios::binary) << "caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x98\x80\n";
  EXPECT_TRUE(Haystack::Load(bad_path).ok());
  auto good = Haystack::Load(test::SharedPath("data/kjv.txt"));
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->name(), "kjv");
}

TEST(EvalTasks, FillerIsDeterministicAndRepeatsShortText) {
  const Haystack& h = Hay("frankenstein");
  std::vector<int> a = Filler(h, Tok(), 300, 7);
  EXPECT_EQ(a.size(), 300u);
  EXPECT_EQ(a, Filler(h, Tok(), 300, 7));
  EXPECT_NE(a, Filler(h, Tok(), 300, 8));
  Haystack tiny = Haystack::FromText("Short line.\nAnother one.\n");
  std::vector<int> t = Filler(tiny, Tok(), 200, 3);
  EXPECT_EQ(t.size(), 200u);
  EXPECT_NE(Tok().Decode(t).find("Another one.\nShort line."), std::string::npos);
  EXPECT_TRUE(Filler(Haystack::FromText(""), Tok(), 10, 1).empty());
}

TEST(EvalTasks, GeneratorsAreDeterministic) {
  for (TaskKind k : AllTasks()) {
    TaskSample a = Make(k, 512, 1, 3), b = Make(k, 512, 1, 3);
    EXPECT_EQ(a.context, b.context) << TaskName(k);
    EXPECT_EQ(a.question, b.question);
    EXPECT_EQ(Tok().Decode(a.context) + Tok().Decode(a.question), Tok().Decode(b.context) + Tok().Decode(b.question));
    EXPECT_EQ(a.expected, b.expected);
    EXPECT_NE(a.context, Make(k, 512, 2, 3).context) << "a different seed differs";
    EXPECT_NE(a.expected, Make(k, 512, 2, 3).expected);
    EXPECT_NE(a.context, Make(k, 512, 1, 4).context) << "a different index differs";
  }
  EXPECT_NE(Make(TaskKind::kNiah, 512, 1, 0).expected, Make(TaskKind::kMultiKey, 512, 1, 0).expected);
}

TEST(EvalTasks, SamplesAreWellFormed) {
  TaskOptions o;
  for (TaskKind k : AllTasks())
    for (int ctx : {256, 512, 992})
      for (int i = 0; i < 8; ++i) CheckSample(Make(k, ctx, 1, i), k, ctx, o);
  for (TaskKind k : AllTasks()) CheckSample(Make(k, 512, 5, 2, 8, "kjv"), k, 512, o);
}

TEST(EvalTasks, NeedleCountsFollowOptions) {
  TaskOptions o;
  o.context_tokens = 700;
  o.needles = 3;
  o.queries = 3;
  for (TaskKind k : {TaskKind::kMultiKey, TaskKind::kMultiValue, TaskKind::kMultiQuery}) {
    auto s = MakeSample(Tok(), Hay("kjv"), k, o, 0, 1);
    ASSERT_TRUE(s.ok());
    CheckSample(s.value(), k, 700, o);
  }
  o.queries = 4;
  EXPECT_FALSE(MakeSample(Tok(), Hay("kjv"), TaskKind::kMultiQuery, o, 0, 1).ok());
}

TEST(EvalTasks, NiahDepthsIncreaseWithIndex) {
  for (int ctx : {256, 992}) {
    double prev = -1;
    for (int i = 0; i < 8; ++i) {
      TaskSample s = Make(TaskKind::kNiah, ctx, 1, i);
      ASSERT_EQ(s.depths.size(), 1u);
      EXPECT_GT(s.depths[0], prev) << "index " << i;
      EXPECT_NEAR(s.depths[0], (i + 0.5) / 8, 0.15);
      prev = s.depths[0];
    }
  }
  TaskSample m = Make(TaskKind::kMultiKey, 992, 1, 0);
  for (size_t j = 0; j < m.depths.size(); ++j) EXPECT_NEAR(m.depths[j], (j + 0.5) / m.depths.size(), 0.2);
}

TEST(EvalTasks, NeedlesSitBetweenSentences) {
  // Like RULER, needles go after a sentence end when one is near (measured at
  // the model's context: 222 of 224 over both haystacks; the first version,
  // which only looked back 24 tokens, placed about 40% there).
  int after = 0, total = 0;
  for (const char* hay : {"frankenstein", "kjv"})
    for (TaskKind k : AllTasks())
      for (int i = 0; i < 8; ++i) {
        TaskOptions o;
        o.context_tokens = 976;
        o.seed = 1;
        auto s = MakeSample(Tok(), Hay(hay), k, o, i, 8);
        ASSERT_TRUE(s.ok());
        for (int start : s->needle_starts) {
          const std::string prev = Tok().Piece(-1, s->context[start - 1]);
          const char c = prev.empty() ? 0 : prev.back();
          after += c == '.' || c == '!' || c == '?' || c == '\n';
          ++total;
        }
      }
  EXPECT_EQ(total, 224);
  EXPECT_GE(after, total * 9 / 10);
}

TEST(EvalTasks, ContextTooSmallIsAnError) {
  TaskOptions o;
  o.context_tokens = 60;
  auto s = MakeSample(Tok(), Hay("frankenstein"), TaskKind::kNiah, o, 0, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("too small"), std::string::npos) << s.error().message;
  EXPECT_FALSE(MakeSample(Tok(), Hay("frankenstein"), TaskKind::kNiah, TaskOptions{}, 8, 8).ok()) << "index out of range";
}

TEST(Scoring, ExtractNumbers) {
  EXPECT_EQ(ExtractNumbers("a 12, b3c 0045."), (std::vector<std::string>{"12", "3", "0045"}));
  EXPECT_TRUE(ExtractNumbers("no digits").empty());
}

TEST(Scoring, SingleAnswerUsesTheFirstWholeNumber) {
  const std::vector<std::string> v = {"4829173"};
  EXPECT_TRUE(ScoreAnswer(TaskKind::kNiah, " 4829173", v));
  EXPECT_TRUE(ScoreAnswer(TaskKind::kNiah, " 4829173.", v));
  EXPECT_TRUE(ScoreAnswer(TaskKind::kMultiKey, "4829173. And 11", v));
  EXPECT_FALSE(ScoreAnswer(TaskKind::kNiah, " 482917", v)) << "partial";
  EXPECT_FALSE(ScoreAnswer(TaskKind::kNiah, " 1234567 4829173", v)) << "first number rule";
  EXPECT_FALSE(ScoreAnswer(TaskKind::kNiah, " 48291734", v)) << "embedded in a longer run";
  EXPECT_FALSE(ScoreAnswer(TaskKind::kNiah, "", v));
  EXPECT_TRUE(ScoreAnswer(TaskKind::kPasskey, " 52817.", {"52817"}));
  EXPECT_FALSE(ScoreAnswer(TaskKind::kPasskey, " 5281.", {"52817"}));
}

TEST(Scoring, MultiAnswerNeedsEveryValue) {
  const std::vector<std::string> v = {"4829173", "1234567", "7654321"};
  for (TaskKind k : {TaskKind::kMultiValue, TaskKind::kMultiQuery}) {
    EXPECT_TRUE(ScoreAnswer(k, " 4829173, 1234567 and 7654321.", v));
    EXPECT_TRUE(ScoreAnswer(k, " 7654321, 4829173 and 1234567.", v)) << "any order";
    EXPECT_TRUE(ScoreAnswer(k, " 1111111, 7654321, 4829173 and 1234567.", v)) << "extra numbers allowed";
    EXPECT_FALSE(ScoreAnswer(k, " 4829173 and 1234567.", v)) << "one missing";
    EXPECT_FALSE(ScoreAnswer(k, " 4829173, 1234567 and 76543210.", v)) << "embedded";
    EXPECT_FALSE(ScoreAnswer(k, " 4829173, 123456 and 7654321.", v)) << "partial";
  }
}

TEST(Scoring, NothingExpectedIsWrong) { EXPECT_FALSE(ScoreAnswer(TaskKind::kMultiValue, "1", {})); }

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval
