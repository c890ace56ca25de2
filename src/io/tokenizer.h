// The tokenizer built from GGUF metadata, one facade for both kinds:
// - tokenizer.ggml.model = "llama": SentencePiece-style BPE: pieces, scores,
//   token types, <0xXX> byte fallback, the "▁" space marker with an optional
//   dummy prefix (this file);
// - tokenizer.ggml.model = "gpt2": byte-level BPE (io/bpe.h) after the
//   pre-tokenizer named by tokenizer.ggml.pre (io/pretokenizer.h).
// Control, unknown and user-defined tokens are matched in the text before
// either (docs/tokenizers.md).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/bpe.h"
#include "io/gguf.h"
#include "io/pretokenizer.h"
#include "kvtrim/status.h"

namespace kvtrim::io {

enum class TokenType : int { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

class Tokenizer {
 public:
  static Expected<Tokenizer> FromGguf(const GgufFile& f);

  enum class Model { kSentencePiece, kByteLevelBpe };

  // Text to ids. BOS is prepended when add_bos is true and the model asks for
  // one (tokenizer.ggml.add_bos_token, default: yes for SentencePiece and
  // Llama 3, no for other byte-level BPE) and has a BOS id. With
  // parse_special, the texts of control tokens (<|im_start|>, ...) found in
  // `text` become those tokens; otherwise they are tokenized as plain text.
  // User-defined (added, non-special) tokens are always matched, as in
  // Hugging Face tokenizers and llama.cpp.
  std::vector<int> Encode(const std::string& text, bool add_bos, bool parse_special = false) const;
  // The bytes of token `id` as it follows `prev` (the dummy-prefix space
  // after BOS is dropped; control tokens print nothing).
  std::string Piece(int prev, int id) const;
  // Exact inverse of Encode (without the BOS).
  std::string Decode(const std::vector<int>& ids) const;

  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  int bos() const { return bos_; }
  // The token a sequence starts with where kvtrim builds one itself (eval
  // contexts, bench, the profile probe): BOS, else EOS (byte-level
  // vocabularies without a BOS, as GPT-2's <|endoftext|> serves both), else 0.
  int start() const { return bos_ >= 0 ? bos_ : eos_ >= 0 ? eos_ : 0; }
  int eos() const { return eos_; }
  int eot() const { return eot_; }  // tokenizer.ggml.eot_token_id, -1 when absent
  Model model() const { return model_; }
  const std::string& pre() const { return pre_name_; }  // pre-tokenizer name ("" for SentencePiece)
  // One line for `inspect` / `tokenize`: model, size, special ids.
  std::string Describe() const;
  bool add_bos() const { return add_bos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // The stored text of a token ("" for an id outside the vocabulary, e.g. an absent bos() of -1).
  const std::string& piece_text(int id) const;
  TokenType type(int id) const { return id >= 0 && id < vocab_size() ? types_[id] : TokenType::kUnused; }
  int n_byte_tokens() const;

 private:
  struct Fragment {
    size_t start, len;
    int id;  // >= 0: a special token; -1: text to tokenize
  };
  Status LoadCommon(const GgufFile& f);
  Status LoadBpe(const GgufFile& f);
  void IndexSentencePiece();
  std::vector<Fragment> Partition(std::string_view text, bool parse_special) const;
  void EncodeSentencePiece(std::string_view text, bool prefix, std::vector<int>* out) const;
  int Lookup(const std::string& s) const;  // mergeable piece id or -1
  Model model_ = Model::kSentencePiece;
  std::string pre_name_;
  std::shared_ptr<const BpeModel> bpe_;  // byte-level BPE only
  std::optional<Pretokenizer> pretok_;
  // Matchable token texts, longest first: (id, control/unknown: only with parse_special).
  std::vector<std::pair<int, bool>> specials_;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string, int> index_;  // normal and user-defined pieces
  int byte_ids_[256];
  // The space marker of the pieces: "▁" (SentencePiece) or a plain " " (some
  // converters, e.g. llama2.c's tok512 in GGUF, write spaces as they are).
  std::string space_ = "\xE2\x96\x81";
  int bos_ = 1, eos_ = 2, unk_ = 0, eot_ = -1;
  bool add_bos_ = true, add_space_prefix_ = true;
};

}  // namespace kvtrim::io
