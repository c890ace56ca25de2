// RULER and LongBench JSONL task files: reading, prompts, scoring.
#include "eval/task_file.h"
#include "io/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kvtrim::eval {
namespace {

Error LineError(int line, const std::string& what) { return MakeError("line " + std::to_string(line) + ": " + what); }

// A list of answer strings: `field` must be a non-empty array of strings
// (a single string is accepted as a one-element list).
Expected<std::vector<std::string>> Answers(const nlohmann::json& j, const char* field, int line) {
  const nlohmann::json& a = j.at(field);
  std::vector<std::string> out;
  if (a.is_string()) out.push_back(a.get<std::string>());
  else if (a.is_array())
    for (const auto& x : a) {
      if (!x.is_string()) return LineError(line, std::string("'") + field + "' holds a non-string answer");
      out.push_back(x.get<std::string>());
    }
  else return LineError(line, std::string("'") + field + "' must be a list of strings");
  if (out.empty()) return LineError(line, std::string("'") + field + "' is empty");
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// LongBench's normalize_answer: lowercase, drop ASCII punctuation, drop the
// articles a/an/the, collapse whitespace; returns the tokens.
std::vector<std::string> NormalizedTokens(const std::string& s) {
  std::string t;
  for (char c : Lower(s))
    if (!std::ispunct(static_cast<unsigned char>(c))) t += c;
  std::vector<std::string> out;
  std::istringstream is(t);
  for (std::string w; is >> w;)
    if (w != "a" && w != "an" && w != "the") out.push_back(w);
  return out;
}

double TokenF1(const std::vector<std::string>& pred, const std::vector<std::string>& ref) {
  std::map<std::string, int> count;
  for (const auto& w : ref) ++count[w];
  int same = 0;
  for (const auto& w : pred)
    if (count[w] > 0) --count[w], ++same;
  if (same == 0) return 0.0;
  const double p = static_cast<double>(same) / pred.size(), r = static_cast<double>(same) / ref.size();
  return 2 * p * r / (p + r);
}

}  // namespace

Expected<ExternalSample> ParseTaskLine(const std::string& text, int line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return LineError(line, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object()) return LineError(line, "not a JSON object");
  auto str = [&](const char* f) { return j.contains(f) && j[f].is_string(); };
  ExternalSample s;
  s.line = line;
  if (j.contains("outputs")) {  // RULER
    if (!str("input")) return LineError(line, "RULER sample without a string 'input'");
    auto a = Answers(j, "outputs", line);
    if (!a.ok()) return a.error();
    s.format = TaskFileFormat::kRuler;
    s.answers = std::move(a.value());
    const std::string input = j["input"].get<std::string>();
    // RULER puts the question on the last line, after the context.
    size_t nl = input.find_last_of('\n');
    while (nl != std::string::npos && nl + 1 == input.size()) nl = input.find_last_of('\n', nl - 1);
    if (nl == std::string::npos) return LineError(line, "RULER 'input' has no line break before its question");
    s.context = input.substr(0, nl);
    s.question = input.substr(nl + 1);
  } else if (j.contains("answers")) {  // LongBench
    if (!str("context") || !str("input"))
      return LineError(line, "LongBench sample needs string 'context' and 'input'");
    auto a = Answers(j, "answers", line);
    if (!a.ok()) return a.error();
    s.format = TaskFileFormat::kLongBench;
    s.answers = std::move(a.value());
    s.context = j["context"].get<std::string>();
    s.question = j["input"].get<std::string>();
  } else {
    return LineError(line, "neither a RULER sample ('input', 'outputs') nor a LongBench one ('context', 'input', "
                           "'answers')");
  }
  if (s.context.empty()) return LineError(line, "empty context");
  return s;
}

Expected<TaskFile> ReadTaskFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return MakeError("cannot open task file '" + path + "'");
  TaskFile tf;
  tf.path = path;
  tf.name = std::filesystem::path(path).stem().string();
  std::string text;
  for (int line = 1; std::getline(f, text); ++line) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines are allowed
    auto s = ParseTaskLine(text, line);
    if (!s.ok()) return MakeError(path + ": " + s.error().message);
    tf.samples.push_back(std::move(s.value()));
  }
  if (tf.samples.empty()) return MakeError("task file '" + path + "' holds no samples");
  return tf;
}

double RulerStringMatch(const std::string& output, const std::vector<std::string>& refs) {
  if (refs.empty()) return 0.0;
  const std::string out = Lower(output);
  double hit = 0;
  for (const auto& r : refs) hit += out.find(Lower(r)) != std::string::npos ? 1.0 : 0.0;
  return hit / static_cast<double>(refs.size());
}

double LongBenchF1(const std::string& output, const std::vector<std::string>& refs) {
  const std::vector<std::string> pred = NormalizedTokens(output);
  double best = 0;
  for (const auto& r : refs) best = std::max(best, TokenF1(pred, NormalizedTokens(r)));
  return best;
}

double ScoreExternal(TaskFileFormat f, const std::string& output, const std::vector<std::string>& refs) {
  return f == TaskFileFormat::kRuler ? RulerStringMatch(output, refs) : LongBenchF1(output, refs);
}

Expected<ExternalPrompt> BuildExternalPrompt(const io::Tokenizer& tok, const ExternalSample& s, int max_tokens,
                                             bool truncate) {
  const std::string joiner = s.format == TaskFileFormat::kRuler ? "\n" : "\n\nQuestion: ";
  const std::string tail = s.format == TaskFileFormat::kRuler ? "" : "\nAnswer:";
  ExternalPrompt p;
  p.context = tok.Encode(s.context, true);
  // The question as it tokenizes after the context (BPE may merge across the
  // joiner, so take the suffix of the whole when the context is a prefix).
  const std::vector<int> whole = tok.Encode(s.context + joiner + s.question + tail, true);
  if (whole.size() > p.context.size() && std::equal(p.context.begin(), p.context.end(), whole.begin()))
    p.question.assign(whole.begin() + static_cast<long>(p.context.size()), whole.end());
  else
    p.question = tok.Encode(joiner + s.question + tail, false);
  const std::string ref = s.answers.front();
  p.answer = tok.Encode(tok.add_space_prefix() ? ref : " " + ref, false);
  for (const auto& a : s.answers)
    p.max_answer_tokens = std::max(p.max_answer_tokens, static_cast<int>(tok.Encode(a, false).size()) + 4);
  p.max_answer_tokens = std::min(p.max_answer_tokens, 64);
  const int answer_room = std::max(static_cast<int>(p.answer.size()), p.max_answer_tokens);
  const int room = max_tokens - static_cast<int>(p.question.size()) - answer_room;
  if (static_cast<int>(p.context.size()) > room) {
    if (!truncate)
      return MakeUnreachable("sample at line " + std::to_string(s.line) + " has " +
                             std::to_string(p.context.size() + p.question.size()) + " prompt tokens (+" +
                             std::to_string(answer_room) + " for the answer), more than " + std::to_string(max_tokens));
    if (room < 16) return MakeError("line " + std::to_string(s.line) + ": the question alone nearly fills the context");
    const int head = room / 2, keep_tail = room - head;  // BOS stays in the head
    std::vector<int> cut(p.context.begin(), p.context.begin() + head);
    cut.insert(cut.end(), p.context.end() - keep_tail, p.context.end());
    p.context = std::move(cut);
    p.truncated = true;
  }
  return p;
}

}  // namespace kvtrim::eval
