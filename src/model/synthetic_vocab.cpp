#include "model/synthetic_vocab.h"

#include <cstdio>

namespace kvtrim::model {
namespace {

constexpr const char* kSpace = "\xE2\x96\x81";  // "▁", SentencePiece's space marker
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;

void Push(SyntheticVocab* v, std::string text, int32_t type) {
  v->scores.push_back(type == kNormal ? -static_cast<float>(v->tokens.size()) : 0.f);
  v->tokens.push_back(std::move(text));
  v->types.push_back(type);
}

// Pieces of `len` characters: "▁" or a letter, then len - 1 letters (the
// first character counts 27 ways, 26 for the rest), until v holds n tokens.
void PushPiecesOfLength(SyntheticVocab* v, int len, size_t n) {
  uint64_t count = 27;
  for (int i = 1; i < len; ++i) count *= 26;
  for (uint64_t k = 0; k < count && v->tokens.size() < n; ++k) {
    std::string tail(static_cast<size_t>(len - 1), 'a');
    uint64_t r = k;
    for (int i = len - 2; i >= 0; --i, r /= 26) tail[static_cast<size_t>(i)] = static_cast<char>('a' + r % 26);
    const std::string head = r == 0 ? std::string(kSpace) : std::string(1, static_cast<char>('a' + r - 1));
    Push(v, head + tail, kNormal);
  }
}

}  // namespace

Expected<SyntheticVocab> MakeSyntheticVocab(int n) {
  if (n < kSyntheticVocabMin || n > (1 << 21)) {
    return MakeError("synthetic vocabulary size " + std::to_string(n) + " is out of range [" +
                     std::to_string(kSyntheticVocabMin) + ", 2097152]");
  }
  SyntheticVocab v;
  const size_t target = static_cast<size_t>(n);
  v.tokens.reserve(target);
  Push(&v, "<unk>", kUnknown);
  Push(&v, "<s>", kControl);
  Push(&v, "</s>", kControl);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    Push(&v, buf, kByte);
  }
  Push(&v, kSpace, kNormal);
  for (char c = 0x21; c <= 0x7E; ++c) Push(&v, std::string(1, c), kNormal);
  for (int len = 2; v.tokens.size() < target; ++len) PushPiecesOfLength(&v, len, target);
  return v;
}

}  // namespace kvtrim::model
