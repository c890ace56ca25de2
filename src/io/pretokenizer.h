// Pre-tokenizers of the byte-level BPE vocabularies (tokenizer.ggml.pre):
// a sequence of regular expressions, run through PCRE2 (UTF + Unicode
// properties, JIT when available), that splits text into words before the
// BPE merges. Each regex of the sequence splits every piece the previous one
// produced: the matches and the gaps between them both become pieces
// (Hugging Face's "Split" with behaviour "isolated", as llama.cpp does).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvtrim/status.h"

namespace kvtrim::io {

class Pretokenizer {
 public:
  // The pre-tokenizer named by tokenizer.ggml.pre; an unknown name is an error
  // that names it and lists the known ones.
  static Expected<Pretokenizer> Create(const std::string& name);
  // A pre-tokenizer from explicit patterns (tests); errors name the pattern.
  static Expected<Pretokenizer> FromPatterns(const std::string& name, const std::vector<std::string>& patterns);
  // Names Create accepts.
  static std::vector<std::string> KnownNames();

  // Splits `text` into consecutive non-empty words whose concatenation is
  // `text` (invalid UTF-8 bytes never match and end up in gap pieces).
  std::vector<std::string_view> Split(std::string_view text) const;

  const std::string& name() const { return name_; }

 private:
  struct Regex;
  std::string name_;
  std::vector<std::shared_ptr<const Regex>> regexes_;  // immutable, shared by copies
};

}  // namespace kvtrim::io
