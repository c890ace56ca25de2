// Needle tasks (METHODS.md section 7), generated reproducibly from a seed and
// a haystack text at a context length given in tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kvtrim/status.h"


namespace kvtrim {
class Engine;
}  // namespace kvtrim

namespace kvtrim::eval {

// kMultiTurn: a conversation (ConversationSample), compressed turn by turn.
enum class TaskKind { kNiah, kMultiKey, kMultiValue, kMultiQuery, kPasskey, kMultiTurn };

// "niah", "niah-multikey", "niah-multivalue", "niah-multiquery", "passkey", "niah-multiturn"
const char* TaskName(TaskKind k);
Expected<TaskKind> ParseTask(const std::string& name);  // any of them
const std::vector<TaskKind>& AllTasks();  // the single-context ones (not niah-multiturn)

// A haystack: any UTF-8 text file.
class Haystack {
 public:
  static Expected<Haystack> Load(const std::string& path);
  static Haystack FromText(std::string text, std::string name = "text");
  const std::string& name() const { return name_; }
  const std::string& text() const { return text_; }

 private:
  std::string name_, text_;
};

struct TaskOptions {
  int context_tokens = 992;  // tokens of context + question (the answer comes after)
  int needles = 4;           // multikey: needles in all (1 asked); multivalue: values; multiquery: keys
  int queries = 2;           // multiquery: keys asked
  int turns = 20;            // niah-multiturn: the question is the user's message of this turn
  // niah-multiturn: the context length its sessions are read at (0: the
  // model's); a conversation that passes it is re-based (Session::MakeRoom).
  int conversation_ctx = 0;
  uint64_t seed = 1;
};

struct TaskSample {
  TaskKind kind = TaskKind::kNiah;
  int index = 0;
  std::vector<int> context;   // BOS + haystack with the needles (compressed in query-agnostic mode)
  std::vector<int> question;  // the question, appended after the context (no BOS)
  std::vector<std::string> expected;  // values that must all appear in the answer
  std::vector<int> answer;    // reference answer tokens, teacher-forced for the answer NLL
  std::vector<double> depths;       // each needle's depth, as a fraction of the context
  std::vector<int> needle_starts;   // token index of each needle in `context`
  std::vector<int> needle_lengths;  // its length in tokens
  std::vector<int> asked_needles;   // indices of the needles the question asks about
  int max_answer_tokens = 16;       // greedy tokens to generate for the answer
};

// A multi-turn needle sample (niah-multiturn): a conversation of
// `turns` - 1 scripted exchanges (user and assistant messages of haystack
// text, the needle "One of the special magic numbers for KEY is: V." in the
// first user message at a depth spread over samples), then the question
// "What is the special magic number for KEY mentioned in the provided
// text?" as the user's message of turn `turns`; the answer must begin with V. The
// messages are sized so that the whole conversation is about
// context_tokens tokens.
struct ConversationSample {
  int index = 0;
  std::vector<std::pair<std::string, std::string>> exchanges;  // (user, assistant) of turns 1 .. turns - 1
  std::string question;
  std::vector<std::string> expected;
  int max_answer_tokens = 12;
};
Expected<ConversationSample> MakeConversationSample(const Engine& engine, const Haystack& hay, const TaskOptions& o,
                                                    int index, int n_samples);

// Sample `index` of `n_samples` (needle depths spread evenly over samples),
// tokenized with the engine's tokenizer.
Expected<TaskSample> MakeSample(const Engine& engine, const Haystack& hay, TaskKind kind, const TaskOptions& o,
                                int index, int n_samples);

}  // namespace kvtrim::eval

namespace kvtrim {

class Engine;

// Calibration contexts for MeasureHeadBudgets (kvtrim/engine.h) and the
// eval's threshold fits: BOS + seeded filler from the haystack text file,
// `tokens` of prefix and `continuation` more, the k-th with seed + k; an
// error when they do not fit the model's context or the haystack is too short.
Expected<std::vector<std::vector<int>>> HeadBudgetContexts(const Engine& engine, const std::string& haystack,
                                                           int contexts, int tokens, int continuation, uint64_t seed);

}  // namespace kvtrim
