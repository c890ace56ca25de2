// External task files (JSON lines) in the two formats long-context
// benchmarks publish:
//   RULER:     {"input": "...context...\nquestion", "outputs": ["ans", ...]}
//              scored by RULER's string match: the share of `outputs` found
//              (case-insensitively) in the answer;
//   LongBench: {"context": "...", "input": "question", "answers": ["ans", ...]}
//              scored by LongBench's token-level F1 (best over the answers).
// Each line is one sample; the format is recognised per line by its fields.
#pragma once
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "kvtrim/status.h"

namespace kvtrim::eval {

enum class TaskFileFormat { kRuler, kLongBench };

struct ExternalSample {
  TaskFileFormat format = TaskFileFormat::kRuler;
  int line = 0;                      // 1-based line in the file
  std::string context, question;     // question: RULER's last line of `input`; LongBench's `input`
  std::vector<std::string> answers;  // RULER `outputs` / LongBench `answers`
};

struct TaskFile {
  std::string path, name;  // name: the file's stem, used as the task name
  std::vector<ExternalSample> samples;
};

// Reads a JSONL task file. A malformed line (not JSON, missing or mistyped
// fields, no answers) is an error naming the file and line.
Expected<TaskFile> ReadTaskFile(const std::string& path);
// Parses one line (exposed for tests); `line` is only used in messages.
Expected<ExternalSample> ParseTaskLine(const std::string& text, int line);

// RULER's string_match_all: mean over references of (ref in output), case-insensitive.
double RulerStringMatch(const std::string& output, const std::vector<std::string>& refs);
// LongBench's qa_f1_score: token F1 after normalisation (lowercase, no
// punctuation, no articles a/an/the, single spaces), best over references.
double LongBenchF1(const std::string& output, const std::vector<std::string>& refs);
double ScoreExternal(TaskFileFormat f, const std::string& output, const std::vector<std::string>& refs);

// Token form of a sample that fits the model: [BOS] + context, the question
// (appended after the context; with a space or newline joiner as the format
// has it), the reference answer to teacher-force, and the tokens to generate.
struct ExternalPrompt {
  std::vector<int> context, question, answer;
  int max_answer_tokens = 16;
  bool truncated = false;
};
// `max_tokens` bounds context + question + the answer's room. Longer samples are truncated in the
// middle of the context (truncate = true: the first and last halves are kept,
// as LongBench does) or refused (an error whose code is kUnreachable).
Expected<ExternalPrompt> BuildExternalPrompt(const io::Tokenizer& tok, const ExternalSample& s, int max_tokens,
                                             bool truncate);

}  // namespace kvtrim::eval
