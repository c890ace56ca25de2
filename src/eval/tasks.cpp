// Needle tasks (METHODS.md section 7): seeded keys, values, filler and depths.
#include "eval/tasks.h"

#include "engine/engine_impl.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/splitmix.h"

namespace kvtrim::eval {
namespace {

// splitmix64's step as a hash (io/splitmix.h): fully specified, identical on every platform.
uint64_t SplitMix(uint64_t x) { return io::Mix64(x); }

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return state_ = SplitMix(state_); }
  // Uniform in [lo, hi] (modulo reduction; the bias is below 2^-40 here).
  int64_t Int(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1)); }
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t state_;
};

constexpr std::array<const char*, 50> kAdjectives = {
    "quiet", "blue",  "red",    "green",  "silver", "golden", "bright", "dark",  "calm",   "swift",
    "gentle", "bold", "brave",  "clever", "cold",   "warm",   "early",  "late",  "empty",  "fierce",
    "fresh", "grand", "happy",  "heavy",  "hidden", "hollow", "humble", "idle",  "jolly",  "kind",
    "lazy",  "lively", "lonely", "lucky", "mellow", "misty",  "narrow", "noble", "old",    "pale",
    "proud", "rapid", "rough",  "shy",    "silent", "sleepy", "small",  "stormy", "sunny", "wild"};
constexpr std::array<const char*, 50> kNouns = {
    "river",  "lamp",   "forest", "mountain", "harbor", "meadow", "castle", "garden", "bridge", "candle",
    "valley", "island", "lantern", "mirror",  "orchard", "pebble", "rabbit", "saddle", "shadow", "spoon",
    "stone",  "storm",  "tower",  "village",  "window", "wagon",  "anchor", "basket", "cloud",  "comet",
    "desert", "dragon", "falcon", "feather",  "fox",    "glacier", "hammer", "kettle", "ladder", "maple",
    "needle", "ocean",  "owl",    "piano",    "planet", "quill",  "robin",  "sparrow", "thunder", "whale"};

// Offset of the first byte that is not part of valid UTF-8, or npos.
size_t InvalidUtf8Offset(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return i;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (b & 0x3Fu);
    }
    const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string::npos;
}

// Text that follows earlier text after a space. With a dummy-prefix tokenizer
// Encode(text) already starts with the space marker ("▁One"), exactly as the
// text tokenizes inside a document; Encode(" " + text) would give "▁▁".
std::vector<int> EncodeAfterSpace(const io::Tokenizer& tok, const std::string& text) {
  return tok.Encode(tok.add_space_prefix() ? text : " " + text, false);
}

bool EndsSentence(const io::Tokenizer& tok, int id) {
  const std::string p = tok.Piece(-1, id);
  return !p.empty() && (p.back() == '.' || p.back() == '!' || p.back() == '?' || p.back() == '\n');
}

// "a", "a and b", "a, b and c".
std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

std::vector<std::string> DrawKeys(Rng& rng, int count) {
  std::vector<std::string> keys;
  while (static_cast<int>(keys.size()) < count) {
    std::string k = std::string(kAdjectives[rng.Int(0, kAdjectives.size() - 1)]) + "-" + kNouns[rng.Int(0, kNouns.size() - 1)];
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(std::move(k));
  }
  return keys;
}

std::vector<std::string> DrawValues(Rng& rng, int count, int64_t lo, int64_t hi) {
  std::vector<std::string> values;
  while (static_cast<int>(values.size()) < count) {
    std::string v = std::to_string(rng.Int(lo, hi));
    if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(std::move(v));
  }
  return values;
}

// The texts of one sample, before tokenization.
struct Plan {
  std::vector<std::string> needles;
  std::string question;
  std::vector<std::string> expected;
  std::vector<int> asked;  // the needles whose values the question asks for
};

std::string NeedleText(const std::string& key, const std::string& value) {
  return "One of the special magic numbers for " + key + " is: " + value + ".";
}

std::string QuestionOne(const std::string& key) {
  return "What is the special magic number for " + key + " mentioned in the provided text? The special magic number for " +
         key + " mentioned in the provided text is";
}

// Several values asked: of one key (multivalue) or of a list of keys (multiquery).
std::string QuestionAll(const std::string& keys) {
  return "What are all the special magic numbers for " + keys +
         " mentioned in the provided text? The special magic numbers for " + keys + " mentioned in the provided text are";
}

Plan MakePlan(TaskKind kind, const TaskOptions& o, Rng& rng) {
  Plan p;
  if (kind == TaskKind::kPasskey) {
    const std::string v = DrawValues(rng, 1, 10000, 99999)[0];
    p.needles = {"The pass key is " + v + ". Remember it. " + v + " is the pass key."};
    p.question = "What is the pass key? The pass key is";
    p.expected = {v};
    p.asked = {0};
    return p;
  }
  const int n = kind == TaskKind::kNiah ? 1 : o.needles;
  const int n_keys = kind == TaskKind::kMultiValue ? 1 : n;
  const std::vector<std::string> keys = DrawKeys(rng, n_keys);
  const std::vector<std::string> values = DrawValues(rng, n, 1000000, 9999999);
  for (int j = 0; j < n; ++j) p.needles.push_back(NeedleText(keys[std::min(j, n_keys - 1)], values[j]));
  if (kind == TaskKind::kMultiValue) {
    p.question = QuestionAll(keys[0]);
    p.expected = values;
    for (int j = 0; j < n; ++j) p.asked.push_back(j);
  } else if (kind == TaskKind::kMultiQuery) {
    std::vector<int> order(n);
    for (int j = 0; j < n; ++j) order[j] = j;
    for (int j = 0; j < o.queries; ++j) std::swap(order[j], order[rng.Int(j, n - 1)]);  // partial Fisher-Yates
    std::vector<std::string> asked;
    for (int j = 0; j < o.queries; ++j) {
      asked.push_back(keys[order[j]]);
      p.expected.push_back(values[order[j]]);
      p.asked.push_back(order[j]);
    }
    p.question = QuestionAll(JoinList(asked));
  } else {  // niah, multikey: one key asked
    const int a = static_cast<int>(rng.Int(0, n - 1));
    p.question = QuestionOne(keys[a]);
    p.expected = {values[a]};
    p.asked = {a};
  }
  return p;
}

std::string AnswerText(const std::vector<std::string>& values) { return JoinList(values) + "."; }

Status CheckOptions(TaskKind kind, const TaskOptions& o, int index, int n_samples) {
  if (n_samples < 1 || index < 0 || index >= n_samples) {
    return MakeError("sample index " + std::to_string(index) + " is outside [0, " + std::to_string(n_samples) + ")");
  }
  const bool multi = kind == TaskKind::kMultiKey || kind == TaskKind::kMultiValue || kind == TaskKind::kMultiQuery;
  if (multi && (o.needles < 1 || o.needles > 1000)) {
    return MakeError("needles = " + std::to_string(o.needles) + " must be in [1, 1000] for " + TaskName(kind));
  }
  if (kind == TaskKind::kMultiQuery && (o.queries < 1 || o.queries > o.needles)) {
    return MakeError("queries = " + std::to_string(o.queries) + " must be in [1, needles = " + std::to_string(o.needles) + "]");
  }
  return {};
}

// Target depths: spread over samples for one needle, over slots for several
// (the whole set shifted by a seeded jitter of at most half a slot).
std::vector<double> TargetDepths(size_t k, int index, int n_samples, Rng& rng) {
  if (k == 1) return {(index + 0.5) / n_samples};
  const double jitter = (rng.Unit() - 0.5) / static_cast<double>(k);
  std::vector<double> d(k);
  for (size_t j = 0; j < k; ++j) d[j] = std::clamp((j + 0.5) / static_cast<double>(k) + jitter, 0.0, 1.0);
  return d;
}

// Back to just after a sentence end within `reach` tokens, else `p` itself.
// The insertion point nearest to p (within `reach` tokens either way) that
// follows a sentence end, as RULER puts needles between sentences; p itself
// when there is none.
int SnapToSentence(const io::Tokenizer& tok, const std::vector<int>& filler, int p, int reach) {
  const int n = static_cast<int>(filler.size());
  for (int k = 0; k <= reach; ++k) {
    if (p - 1 - k >= 0 && EndsSentence(tok, filler[p - 1 - k])) return p - k;
    if (k > 0 && p - 1 + k < n && EndsSentence(tok, filler[p - 1 + k])) return p + k;
  }
  return p;
}

// context = BOS + filler with the needles inserted at the given depths. A
// needle moves to the nearest sentence start at most 64 tokens away and less
// than half a depth slot (`slots` per context), so depths keep their order.
void Assemble(const io::Tokenizer& tok, const std::vector<int>& filler, const std::vector<std::vector<int>>& needles,
              const std::vector<double>& targets, int slots, TaskSample& s) {
  const int n_fill = static_cast<int>(filler.size());
  const int reach = std::min(64, (n_fill - 1) / (2 * slots) - 1);
  s.context = {tok.start()};
  int prev = 0;
  for (size_t j = 0; j < needles.size(); ++j) {
    int p = static_cast<int>(targets[j] * n_fill + 0.5);
    p = std::max(prev, SnapToSentence(tok, filler, std::clamp(p, 0, n_fill), reach));
    s.context.insert(s.context.end(), filler.begin() + prev, filler.begin() + p);
    s.depths.push_back(n_fill > 0 ? static_cast<double>(p) / n_fill : 0.0);
    s.needle_starts.push_back(static_cast<int>(s.context.size()));
    s.needle_lengths.push_back(static_cast<int>(needles[j].size()));
    s.context.insert(s.context.end(), needles[j].begin(), needles[j].end());
    prev = p;
  }
  s.context.insert(s.context.end(), filler.begin() + prev, filler.end());
}

}  // namespace

const char* TaskName(TaskKind k) {
  switch (k) {
    case TaskKind::kNiah: return "niah";
    case TaskKind::kMultiKey: return "niah-multikey";
    case TaskKind::kMultiValue: return "niah-multivalue";
    case TaskKind::kMultiQuery: return "niah-multiquery";
    case TaskKind::kPasskey: return "passkey";
    case TaskKind::kMultiTurn: return "niah-multiturn";
  }
  return "unknown";
}

const std::vector<TaskKind>& AllTasks() {
  static const std::vector<TaskKind> kAll = {TaskKind::kNiah, TaskKind::kMultiKey, TaskKind::kMultiValue,
                                             TaskKind::kMultiQuery, TaskKind::kPasskey};
  return kAll;
}

Expected<TaskKind> ParseTask(const std::string& name) {
  std::string valid;
  std::vector<TaskKind> all = AllTasks();
  all.push_back(TaskKind::kMultiTurn);
  for (TaskKind k : all) {
    if (name == TaskName(k)) return k;
    valid += (valid.empty() ? "" : ", ") + std::string(TaskName(k));
  }
  return MakeError("unknown task '" + name + "' (valid: " + valid + ")");
}

Expected<Haystack> Haystack::Load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return MakeError("cannot open haystack file '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return MakeError("cannot read haystack file '" + path + "'");
  std::string text = ss.str();
  if (text.empty()) return MakeError("haystack file '" + path + "' is empty");
  const size_t bad = InvalidUtf8Offset(text);
  if (bad != std::string::npos) {
    return MakeError("haystack file '" + path + "' is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  }
  return FromText(std::move(text), std::filesystem::path(path).stem().string());
}

Haystack Haystack::FromText(std::string text, std::string name) {
  Haystack h;
  h.text_ = std::move(text);
  h.name_ = std::move(name);
  return h;
}

std::vector<int> Filler(const Haystack& hay, const io::Tokenizer& tok, int n, uint64_t seed) {
  const std::string& text_ = hay.text();
  if (n <= 0 || text_.empty()) return {};
  const size_t size = text_.size();
  size_t start = SplitMix(seed) % size;
  if (start > 0 && text_[start - 1] != '\n') {
    const size_t nl = text_.find('\n', start);
    start = nl == std::string::npos || nl + 1 >= size ? 0 : nl + 1;
  }
  while (start < size && text_[start] == '\n') ++start;  // skip blank lines
  if (start >= size) start = 0;
  const std::string wrap = text_.back() == '\n' ? "" : "\n";
  for (size_t bytes = std::max<size_t>(static_cast<size_t>(n) * 8, 64);; bytes *= 2) {
    std::string window = text_.substr(start, bytes);
    while (window.size() < bytes) window += wrap + text_.substr(0, bytes - window.size());
    while (!window.empty() && (static_cast<unsigned char>(window.back()) & 0xC0) == 0x80) window.pop_back();
    std::vector<int> ids = tok.Encode(window, false);
    if (ids.size() >= static_cast<size_t>(n) + 16) {  // margin: the cut end may tokenize differently
      ids.resize(n);
      return ids;
    }
  }
}

Expected<TaskSample> MakeSample(const io::Tokenizer& tok, const Haystack& hay, TaskKind kind, const TaskOptions& o,
                                int index, int n_samples) {
  if (kind == TaskKind::kMultiTurn)
    return MakeError("niah-multiturn is a conversation, not one context (MakeConversationSample)");
  KVTRIM_RETURN_IF_ERROR(CheckOptions(kind, o, index, n_samples));
  Rng rng(SplitMix(SplitMix(SplitMix(o.seed) ^ (static_cast<uint64_t>(kind) + 1)) ^ static_cast<uint64_t>(index)));
  const Plan plan = MakePlan(kind, o, rng);
  TaskSample s;
  s.kind = kind;
  s.index = index;
  s.expected = plan.expected;
  s.asked_needles = plan.asked;
  s.question = EncodeAfterSpace(tok, plan.question);
  s.answer = EncodeAfterSpace(tok, AnswerText(plan.expected));
  s.max_answer_tokens = plan.expected.size() == 1 ? 12 : 10 * static_cast<int>(plan.expected.size()) + 4;
  std::vector<std::vector<int>> needles;
  int fixed = 1 + static_cast<int>(s.question.size());
  for (const std::string& t : plan.needles) {
    needles.push_back(EncodeAfterSpace(tok, t));
    fixed += static_cast<int>(needles.back().size());
  }
  const int n_fill = o.context_tokens - fixed;
  if (n_fill < 16) {
    return MakeError("context_tokens = " + std::to_string(o.context_tokens) + " is too small for " + TaskName(kind) +
                     ": BOS, needles and question take " + std::to_string(fixed) + " tokens, plus 16 of filler");
  }
  const std::vector<int> filler = Filler(hay, tok, n_fill, rng.Next());
  if (static_cast<int>(filler.size()) != n_fill) return MakeError("haystack '" + hay.name() + "' is empty");
  const int slots = needles.size() == 1 ? n_samples : static_cast<int>(needles.size());
  Assemble(tok, filler, needles, TargetDepths(needles.size(), index, n_samples, rng), slots, s);
  s.context.shrink_to_fit();
  return s;
}

Expected<TaskSample> MakeSample(const Engine& engine, const Haystack& hay, TaskKind kind, const TaskOptions& o,
                                int index, int n_samples) {
  return MakeSample(engine.impl().tokenizer(), hay, kind, o, index, n_samples);
}

}  // namespace kvtrim::eval

namespace kvtrim::eval {

Expected<ConversationSample> MakeConversationSample(const io::Tokenizer& tok, const Haystack& hay, const TaskOptions& o,
                                                    int index, int n_samples) {
  KVTRIM_RETURN_IF_ERROR(CheckOptions(TaskKind::kNiah, o, index, n_samples));
  if (o.turns < 2 || o.turns > 1000) return MakeError("turns = " + std::to_string(o.turns) + " must be in [2, 1000]");
  Rng rng(SplitMix(SplitMix(SplitMix(o.seed) ^ (static_cast<uint64_t>(TaskKind::kMultiTurn) + 1)) ^
                   static_cast<uint64_t>(index)));
  const std::string key = DrawKeys(rng, 1)[0];
  const std::string value = DrawValues(rng, 1, 1000000, 9999999)[0];
  ConversationSample c;
  c.index = index;
  // The question alone: the answer is the assistant's (after the whole of
  // QuestionOne in the user's message the default model answers no number).
  c.question = "What is the special magic number for " + key + " mentioned in the provided text?";
  c.expected = {value};
  // Per turn: a user message of filler, a 12-token answer, about 8 tokens of template.
  const int per_turn = o.context_tokens / o.turns;
  const int reply = 12, user = per_turn - reply - 8;
  if (user < 16)
    return MakeError("context_tokens = " + std::to_string(o.context_tokens) + " is too small for " +
                     std::to_string(o.turns) + " turns: each needs at least 36 tokens");
  for (int t = 1; t < o.turns; ++t) {
    std::string u = tok.Decode(Filler(hay, tok, user, rng.Next()));
    std::string a = tok.Decode(Filler(hay, tok, reply, rng.Next()));
    if (u.empty() || a.empty()) return MakeError("haystack '" + hay.name() + "' is empty");
    if (t == 1) {  // the needle, after the sentence end nearest its depth
      size_t at = static_cast<size_t>((index + 0.5) / n_samples * static_cast<double>(u.size()));
      const size_t dot = u.find(". ", at);
      at = dot == std::string::npos ? u.size() : dot + 2;
      u.insert(at, NeedleText(key, value) + (at < u.size() ? " " : ""));
    }
    c.exchanges.emplace_back(std::move(u), std::move(a));
  }
  return c;
}

Expected<ConversationSample> MakeConversationSample(const Engine& engine, const Haystack& hay, const TaskOptions& o,
                                                    int index, int n_samples) {
  return MakeConversationSample(engine.impl().tokenizer(), hay, o, index, n_samples);
}

}  // namespace kvtrim::eval
