// A GGUF file read without loading its weights: its description (`kvtrim
// inspect`) and text tokenized with its tokenizer alone (`kvtrim tokenize`:
// vocabulary-only files work too).
#pragma once
#include <string>
#include <vector>

#include "kvtrim/status.h"

namespace kvtrim {

// The file (size, GGUF version, counts), the architecture and its
// hyperparameters, the tokenizer, every metadata key (with `metadata`) and
// the tensor table, as the text `kvtrim inspect` prints.
Expected<std::string> DescribeModelFile(const std::string& path, bool metadata);

struct Tokenized {
  std::vector<int> ids;
  // Each token as it prints in context; control tokens by their text.
  std::vector<std::string> pieces;
  std::string tokenizer;   // the tokenizer's description
  // Times: opening the GGUF file and building the tokenizer (wall, ms; and
  // CPU for both), encoding (wall seconds, CPU ms).
  double open_ms = 0, build_ms = 0, load_cpu_ms = 0;
  double encode_s = 0, encode_cpu_ms = 0;
};
// `bos`: prepend BOS where the model asks for one; `special`: match
// control-token texts (<|im_start|>, ...) in the text.
Expected<Tokenized> TokenizeFile(const std::string& path, const std::string& text, bool bos, bool special);

}  // namespace kvtrim
