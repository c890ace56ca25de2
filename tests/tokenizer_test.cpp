// Tokenizer against Python SentencePiece ids (goldens.json) and round trips.
#include <gtest/gtest.h>

#include "io/gguf.h"
#include "io/tokenizer.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

io::Tokenizer NeedleTokenizer() {
  static auto f = io::GgufFile::Open(test::ModelPath("needle-3.7M-f32.gguf"));
  EXPECT_TRUE(f.ok());
  auto t = io::Tokenizer::FromGguf(*f.value());
  EXPECT_TRUE(t.ok());
  return t.value();
}

TEST(Tokenizer, MatchesSentencePieceIds) {
  io::Tokenizer tok = NeedleTokenizer();
  const auto& cases = test::Goldens()["tokenizer"];
  ASSERT_GE(cases.size(), 8u);
  for (const auto& c : cases) {
    std::string text = c["text"];
    std::vector<int> want = c["ids"].get<std::vector<int>>();
    EXPECT_EQ(tok.Encode(text, false), want) << "text: " << text;
    std::vector<int> with_bos = tok.Encode(text, true);
    ASSERT_FALSE(with_bos.empty());
    EXPECT_EQ(with_bos[0], 1);
  }
}

TEST(Tokenizer, DecodeInvertsEncode) {
  io::Tokenizer tok = NeedleTokenizer();
  for (const auto& c : test::Goldens()["tokenizer"]) {
    std::string text = c["text"];
    EXPECT_EQ(tok.Decode(tok.Encode(text, false)), text);
    EXPECT_EQ(tok.Decode(tok.Encode(text, true)), text) << "BOS must print nothing";
  }
}

TEST(Tokenizer, ByteFallbackForUnknownCharacters) {
  io::Tokenizer tok = NeedleTokenizer();
  // "東" is not a piece: it must come out as its three UTF-8 bytes.
  std::vector<int> ids = tok.Encode("\xE6\x9D\xB1", false);
  ASSERT_GE(ids.size(), 3u);
  int bytes = 0;
  for (int id : ids) bytes += tok.type(id) == io::TokenType::kByte;
  EXPECT_EQ(bytes, 3);
  EXPECT_EQ(tok.Decode(ids), "\xE6\x9D\xB1");
}

TEST(Tokenizer, LiteralSpaceVocabularies) {
  // stories260K's GGUF writes spaces as " " rather than "▁".
  auto f = io::GgufFile::Open(test::ModelPath("stories260K.gguf"));
  ASSERT_TRUE(f.ok());
  auto t = io::Tokenizer::FromGguf(*f.value());
  ASSERT_TRUE(t.ok());
  std::vector<int> ids = t->Encode("Tom and Sue went to the", true);
  EXPECT_EQ(ids.size(), 11u);  // 200 positions = 11 prompt + 189 steps in the llama2.c golden
  EXPECT_EQ(t->Decode(ids), "Tom and Sue went to the");
  for (int id : ids) EXPECT_NE(t->type(id), io::TokenType::kByte);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
