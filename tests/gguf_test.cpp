// The GGUF reader on real files and on corrupted copies of them: every
// corruption gives a clear error naming the problem, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "io/gguf.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "model/weights.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::string Needle() { return test::ReadFile(test::ModelPath("needle-3.7M-f32.gguf")); }

// Parse + config + weights + tokenizer, as loading a model does.
Status LoadAll(std::string bytes) {
  auto f = io::GgufFile::FromBytes(std::move(bytes));
  if (!f.ok()) return f.error();
  auto c = model::ReadConfig(*f.value());
  if (!c.ok()) return c.error();
  auto w = model::LoadWeights(*f.value(), c.value());
  if (!w.ok()) return w.error();
  auto t = io::Tokenizer::FromGguf(*f.value());
  if (!t.ok()) return t.error();
  return {};
}

void ExpectError(const std::string& bytes, const std::string& needle) {
  Status st = LoadAll(bytes);
  ASSERT_FALSE(st.ok()) << "expected an error containing: " << needle;
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

// Offset of the u32 type id of tensor `name` in the header.
size_t TensorTypeOffset(const std::string& bytes, const std::string& name) {
  size_t p = bytes.find(name);
  p += name.size();
  uint32_t nd;
  std::memcpy(&nd, &bytes[p], 4);
  return p + 4 + 8 * nd;
}

TEST(Gguf, ReadsRealFiles) {
  auto f = io::GgufFile::Open(test::ModelPath("needle-3.7M-f32.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f.value()->version(), 3u);
  EXPECT_EQ(f.value()->alignment(), 32u);
  EXPECT_EQ(f.value()->tensors().size(), 38u);
  EXPECT_EQ(f.value()->GetInt("llama.block_count").value(), 4);
  EXPECT_EQ(f.value()->GetString("general.architecture").value(), "llama");
  auto toks = f.value()->GetArray("tokenizer.ggml.tokens", io::GgufValueType::STRING);
  ASSERT_TRUE(toks.ok());
  EXPECT_EQ(toks.value()->size(), 2048u);
  for (const char* m : {"needle-3.7M-q8_0.gguf", "needle-3.7M-q4_0.gguf", "qwen2-tiny-random.gguf", "stories260K.gguf"})
    EXPECT_TRUE(LoadAll(test::ReadFile(test::ModelPath(m))).ok()) << m;
  auto q8 = io::GgufFile::Open(test::ModelPath("needle-3.7M-q8_0.gguf"));
  EXPECT_EQ(q8.value()->FindTensor("blk.0.attn_q.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(q8.value()->FindTensor("blk.0.attn_q.weight")->n_bytes, 256u * 256 / 32 * 34);
}

TEST(Gguf, TypedGettersNameTheProblem) {
  auto f = io::GgufFile::Open(test::ModelPath("needle-3.7M-f32.gguf"));
  EXPECT_NE(f.value()->GetInt("nope").error().message.find("missing key 'nope'"), std::string::npos);
  EXPECT_NE(f.value()->GetInt("general.architecture").error().message.find("expected an integer"), std::string::npos);
  EXPECT_NE(f.value()->GetArray("tokenizer.ggml.tokens", io::GgufValueType::F32).error().message.find("array of string"),
            std::string::npos);
}

TEST(Gguf, TruncatedCopiesFailCleanly) {
  const std::string full = Needle();
  // Every prefix of the header and a spread of prefixes inside the data.
  size_t header_end = full.find("blk.3.ffn_up.weight") + 64;
  for (size_t n = 0; n < header_end; n += (n < 4096 ? 1 : 97)) {
    Status st = LoadAll(full.substr(0, n));
    ASSERT_FALSE(st.ok()) << "prefix " << n;
    ASSERT_FALSE(st.message().empty());
  }
  for (size_t n = header_end; n < full.size(); n += full.size() / 50) {
    Status st = LoadAll(full.substr(0, n));
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("past end of file"), std::string::npos) << st.message();
  }
  ExpectError(full.substr(0, full.size() - 1), "runs past end of file");
}

TEST(Gguf, CorruptedHeaderFields) {
  const std::string full = Needle();
  std::string s = full;
  s[0] = 'X';
  ExpectError(s, "bad magic");
  s = full;
  s[4] = 7;
  ExpectError(s, "unsupported GGUF version 7");
  s = full;
  s[16] = '\xff', s[17] = '\xff', s[22] = '\x7f';  // metadata count absurd
  ExpectError(s, "metadata count");
  s = full;
  s[8] = '\xff', s[12] = '\x01';  // tensor count absurd
  ExpectError(s, "tensor count");
  // The type id of the first metadata value (general.architecture) made invalid.
  s = full;
  size_t k = s.find("general.architecture") + std::strlen("general.architecture");
  s[k] = 13;
  ExpectError(s, "bad type id 13 for key 'general.architecture'");
  // A string length running past the end.
  s = full;
  s[k + 4 + 7] = '\x7f';
  ExpectError(s, "runs past end of file");
}

TEST(Gguf, CorruptedTensorInfos) {
  const std::string full = Needle();
  std::string s = full;
  size_t t = TensorTypeOffset(s, "blk.0.attn_q.weight");
  s[t] = 99;
  ExpectError(s, "tensor 'blk.0.attn_q.weight' has unsupported type type#99 (id 99");
  s = full;
  s[t] = 20;  // IQ4_NL: a real ggml type we do not read; the message names it and the tensor
  ExpectError(s, "tensor 'blk.0.attn_q.weight' has unsupported type IQ4_NL (id 20");
  s = full;
  s[t + 4] = 3;  // offset no longer aligned
  ExpectError(s, "is not aligned");
  s = full;
  s[t + 4 + 7] = 1;  // offset far past the end
  ExpectError(s, "runs past end of file");
  // Swap the dims of attn_k ([256, 128] -> [128, 256]): same bytes, wrong shape.
  s = full;
  size_t p = s.find("blk.0.attn_k.weight") + std::strlen("blk.0.attn_k.weight") + 4;
  uint64_t a, b;
  std::memcpy(&a, &s[p], 8);
  std::memcpy(&b, &s[p + 8], 8);
  std::memcpy(&s[p], &b, 8);
  std::memcpy(&s[p + 8], &a, 8);
  ExpectError(s, "shape mismatch for tensor 'blk.0.attn_k.weight'");
  // Five dimensions.
  s = full;
  s[s.find("blk.0.attn_k.weight") + std::strlen("blk.0.attn_k.weight")] = 5;
  ExpectError(s, "dimensions");
}

TEST(Gguf, MissingKeysTensorsAndUnknownArchitecture) {
  const std::string full = Needle();
  std::string s = full;
  s.replace(s.find("llama.block_count"), 17, "llama.block_cXunt");
  ExpectError(s, "missing key 'llama.block_count'");
  s = full;
  size_t a = s.find("\"llama\"") != std::string::npos ? s.find("\"llama\"") : s.find("llama", s.find("general.architecture") + 20);
  s.replace(a, 5, "mamba");
  ExpectError(s, "unsupported architecture 'mamba'");
  s = full;
  s.replace(s.find("blk.2.ffn_down.weight"), 21, "blk.2.ffn_dXwn.weight");
  ExpectError(s, "missing tensor 'blk.2.ffn_down.weight'");
  s = full;
  s.replace(s.find("tokenizer.ggml.tokens"), 21, "tokenizer.ggml.tXkens");
  ExpectError(s, "missing key 'tokenizer.ggml.tokens'");
}

TEST(Gguf, RandomByteFlipsNeverCrash) {
  const std::string full = test::ReadFile(test::ModelPath("stories260K.gguf"));
  size_t header_end = full.find("blk.4.ffn_up.weight") + 64;
  std::mt19937 rng(1234);
  int errors = 0;
  const int iters = 1500;
  for (int it = 0; it < iters; ++it) {
    std::string s = full;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) s[rng() % header_end] = static_cast<char>(rng());
    Status st = LoadAll(s);
    errors += !st.ok();
    if (!st.ok()) { ASSERT_FALSE(st.message().empty()); }
  }
  // Flips inside token strings or scores load fine; flips in structure must not.
  EXPECT_GT(errors, iters / 20);
  EXPECT_LT(errors, iters);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
