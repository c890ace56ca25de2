// The needle tasks with a tokenizer of the library's own (the public API,
// kvtrim/eval_tasks.h, takes an Engine).
#pragma once
#include <cstdint>
#include <vector>

#include "io/tokenizer.h"
#include "kvtrim/eval_tasks.h"

namespace kvtrim::eval {

// About n tokens of filler from the haystack, starting at a seeded offset
// (snapped to a line start); deterministic for a given (seed, n). No BOS.
std::vector<int> Filler(const Haystack& hay, const io::Tokenizer& tok, int n, uint64_t seed);

Expected<ConversationSample> MakeConversationSample(const io::Tokenizer& tok, const Haystack& hay, const TaskOptions& o,
                                                    int index, int n_samples);

Expected<TaskSample> MakeSample(const io::Tokenizer& tok, const Haystack& hay, TaskKind kind, const TaskOptions& o,
                                int index, int n_samples);

}  // namespace kvtrim::eval
