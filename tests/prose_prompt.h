// A prompt of exactly n tokens (BOS first) from one plain English sentence
// repeated: a context whose statistics are ordinary prose.
#pragma once
#include <string>
#include <vector>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kvtrim/engine.h"

namespace kvtrim::test {

inline std::vector<int> ProsePrompt(const Engine& e, int n) {
  std::string text;
  while (static_cast<int>(e.impl().tokenizer().Encode(text, true).size()) < n)
    text += "The quick brown fox jumps over the lazy dog while the river runs past the old mill and the town. ";
  std::vector<int> t = e.impl().tokenizer().Encode(text, true);
  t.resize(n);
  return t;
}

}  // namespace kvtrim::test
