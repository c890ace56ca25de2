// Scoring of greedy answers: exact match of every expected value.
#pragma once
#include <string>
#include <vector>

#include "kvtrim/eval_tasks.h"

namespace kvtrim::eval {

// Maximal runs of ASCII digits in order of appearance.
std::vector<std::string> ExtractNumbers(const std::string& text);
// Single-answer tasks (niah, multikey, passkey): the first number in the
// output equals the value. Multi-answer tasks: every expected value appears
// as a whole number in the output. A partial number is wrong.
bool ScoreAnswer(TaskKind kind, const std::string& output, const std::vector<std::string>& expected);

}  // namespace kvtrim::eval
