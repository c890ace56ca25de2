// SentencePiece-style BPE tokenizer built from GGUF metadata
// (tokenizer.ggml.model = "llama"): pieces, scores, token types, <0xXX> byte
// fallback, the "▁" space marker with an optional dummy prefix.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "io/gguf.h"
#include "kvtrim/status.h"

namespace kvtrim::io {

enum class TokenType : int { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

class Tokenizer {
 public:
  static Expected<Tokenizer> FromGguf(const GgufFile& f);

  // Text to ids; BOS is prepended when add_bos is true. With parse_special,
  // the texts of control/added tokens (<|im_start|>, ...) found in `text`
  // become those tokens (otherwise they are tokenized as plain text).
  std::vector<int> Encode(const std::string& text, bool add_bos, bool parse_special = false) const;
  // The bytes of token `id` as it follows `prev` (the dummy-prefix space
  // after BOS is dropped; control tokens print nothing).
  std::string Piece(int prev, int id) const;
  // Exact inverse of Encode (without the BOS).
  std::string Decode(const std::vector<int>& ids) const;

  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  int bos() const { return bos_; }
  int eos() const { return eos_; }
  bool add_bos() const { return add_bos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  const std::string& piece_text(int id) const { return pieces_[id]; }
  TokenType type(int id) const { return types_[id]; }
  int n_byte_tokens() const;

 private:
  int Lookup(const std::string& s) const;  // mergeable piece id or -1
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string, int> index_;  // normal and user-defined pieces
  int byte_ids_[256];
  // The space marker of the pieces: "▁" (SentencePiece) or a plain " " (some
  // converters, e.g. llama2.c's tok512 in GGUF, write spaces as they are).
  std::string space_ = "\xE2\x96\x81";
  int bos_ = 1, eos_ = 2, unk_ = 0;
  bool add_bos_ = true, add_space_prefix_ = true;
};

}  // namespace kvtrim::io
