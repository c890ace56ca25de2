// Exact-match scoring of greedy answers against the expected values.
#include "eval/scoring.h"

#include <algorithm>

namespace kvtrim::eval {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool SingleAnswer(TaskKind kind) {
  return kind == TaskKind::kNiah || kind == TaskKind::kMultiKey || kind == TaskKind::kPasskey ||
         kind == TaskKind::kMultiTurn;
}

}  // namespace

std::vector<std::string> ExtractNumbers(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    if (!IsDigit(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && IsDigit(text[j])) ++j;
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

bool ScoreAnswer(TaskKind kind, const std::string& output, const std::vector<std::string>& expected) {
  if (expected.empty()) return false;
  const std::vector<std::string> nums = ExtractNumbers(output);
  if (SingleAnswer(kind)) return !nums.empty() && nums.front() == expected.front();
  return std::all_of(expected.begin(), expected.end(),
                     [&](const std::string& v) { return std::find(nums.begin(), nums.end(), v) != nums.end(); });
}

}  // namespace kvtrim::eval
