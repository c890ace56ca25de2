// Calibration contexts for the head-budget search (kvtrim/eval_tasks.h).
#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kvtrim/engine.h"
#include "eval/tasks.h"
#include "kvtrim/eval_tasks.h"

namespace kvtrim {

Expected<std::vector<std::vector<int>>> HeadBudgetContexts(const Engine& e, const std::string& haystack, int contexts,
                                                           int tokens, int continuation, uint64_t seed) {
  auto hay = eval::Haystack::Load(haystack);
  if (!hay.ok()) return hay.error();
  const int n = tokens + continuation;
  if (tokens < 2 || n > e.context_length())
    return MakeError("calibration context of " + std::to_string(n) + " tokens does not fit the model's context of " +
                     std::to_string(e.context_length()));
  std::vector<std::vector<int>> out;
  for (int k = 0; k < contexts; ++k) {
    std::vector<int> t{e.impl().tokenizer().start()};
    std::vector<int> fill = Filler(hay.value(), e.impl().tokenizer(), n + 32, seed + static_cast<uint64_t>(k));
    t.insert(t.end(), fill.begin(), fill.end());
    if (static_cast<int>(t.size()) < n) return MakeError("the haystack is too short for the calibration contexts");
    t.resize(n);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kvtrim
