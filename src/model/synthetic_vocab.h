// A synthetic SentencePiece ("llama") vocabulary of any size, for models
// whose weights are noise (model/shape_models.h): both kvtrim's tokenizer and
// llama.cpp's accept it, and any text tokenizes (byte fallback).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kvtrim/status.h"

namespace kvtrim::model {

struct SyntheticVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // io::TokenType values
  static constexpr int kUnk = 0, kBos = 1, kEos = 2;
};

// Exactly n tokens, in order: <unk>, <s>, </s>; the 256 byte tokens
// <0x00>..<0xFF>; the single pieces "▁" and printable ASCII; then pieces of
// length 2, 3, ... made of "▁" or a lowercase letter followed by lowercase
// letters, in lexicographic order, until n is reached (every piece's
// prefixes come first, so merges can reach it). Scores fall with the id, so
// shorter pieces merge first. n must be at least the fixed part (354).
Expected<SyntheticVocab> MakeSyntheticVocab(int n);
inline constexpr int kSyntheticVocabMin = 3 + 256 + 1 + 94;

}  // namespace kvtrim::model
