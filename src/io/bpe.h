// Byte-level BPE (tokenizer.ggml.model = "gpt2"): GPT-2's byte-to-unicode
// mapping and merges by rank from tokenizer.ggml.merges. One word (a piece
// of the pre-tokenizer) is merged at a time: a linked list of symbols and a
// priority queue of adjacent pairs (lowest rank first, then leftmost), the
// pairs looked up in a hash map keyed on the two token ids.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/gguf.h"
#include "kvtrim/status.h"

namespace kvtrim::io {

// GPT-2's bijection between bytes and printable code points: the bytes
// '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to themselves, the other 68 to
// U+0100.. in byte order. Returned as UTF-8.
const std::string& ByteToUnicode(unsigned char b);
// Inverse on one code point; -1 when the code point is no byte's image.
int UnicodeToByte(uint32_t cp);

class BpeModel {
 public:
  // `tokens` are the vocabulary texts (byte-level encoded), `merges` the
  // tokenizer.ggml.merges strings "left right" in rank order. A merge that is
  // not two tokens separated by a space is an error naming the key.
  static Expected<BpeModel> Build(const std::vector<std::string>& tokens, const GgufArray& merges,
                                  bool ignore_merges);

  // Appends the ids of one pre-tokenized word (raw bytes) to `out`.
  void EncodeWord(std::string_view word, std::vector<int>* out) const;
  // The bytes a byte-level token text stands for (each code point mapped
  // back to its byte; a code point outside the mapping is kept as UTF-8).
  static std::string DecodeText(std::string_view text);
  // Id of a token text, or -1.
  int Lookup(std::string_view text) const;
  size_t n_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int rank;
    int result;  // id of the merged text; -1 when that text is not a token
  };
  static uint64_t Key(int a, int b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }
  void EmitUnknown(std::string_view raw, std::vector<int>* out) const;

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int, Hash, std::equal_to<>> index_;  // every token's text
  std::unordered_map<uint64_t, Merge> merges_;                        // (left id, right id) -> rank, result
  int byte_token_[256];                                               // id of each byte's character, or -1
  bool ignore_merges_ = false;  // a word that is a token as a whole is that token (Llama 3)
};

}  // namespace kvtrim::io
