// Resource limits on untrusted GGUF files (docs/reliability.md): headers
// declaring absurd counts or sizes are refused before anything is allocated,
// and the message names the limit.
#include <gtest/gtest.h>

#include "io/gguf_writer.h"
#include "io/gguf.h"
#include "model/config.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using io::GgufWriter;

std::string Header(uint64_t n_tensors, uint64_t n_kv, const std::string& rest = std::string(64, '\0')) {
  return "GGUF" + GgufWriter::U32(3) + GgufWriter::Pod<uint64_t>(n_tensors) + GgufWriter::Pod<uint64_t>(n_kv) + rest;
}

void ExpectRefused(const std::string& bytes, const std::string& limit_name) {
  auto f = io::GgufFile::FromBytes(bytes);
  ASSERT_FALSE(f.ok()) << "expected the limit " << limit_name;
  EXPECT_NE(f.error().message.find(limit_name), std::string::npos) << f.error().message;
}

TEST(Limits, TensorAndMetadataCounts) {
  ExpectRefused(Header(io::kGgufMaxTensors + 1, 0), "kGgufMaxTensors");
  ExpectRefused(Header(~uint64_t{0}, 0), "kGgufMaxTensors");
  ExpectRefused(Header(0, io::kGgufMaxKv + 1), "kGgufMaxKv");
  // At the limit the count is accepted by this check (then the file is too short).
  auto f = io::GgufFile::FromBytes(Header(0, io::kGgufMaxKv));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().message.find("kGgufMaxKv"), std::string::npos) << f.error().message;
}

TEST(Limits, StringAndNameLengths) {
  // A key of 2^16 + 1 bytes and a string value of 2^24 + 1 bytes, both in
  // the file (a length running past the end is refused as such first).
  ExpectRefused(Header(0, 1, GgufWriter::Str(std::string(io::kGgufMaxNameBytes + 1, 'k')) + std::string(64, '\0')),
                "kGgufMaxNameBytes");
  ExpectRefused(Header(0, 1, GgufWriter::Str("k") + GgufWriter::U32(8) +
                                 GgufWriter::Str(std::string(io::kGgufMaxStringBytes + 1, 's'))),
                "kGgufMaxStringBytes");
  // At the limit a string is read.
  auto f = io::GgufFile::FromBytes(Header(0, 1, GgufWriter::Str("k") + GgufWriter::U32(8) +
                                                   GgufWriter::Str(std::string(io::kGgufMaxNameBytes + 1, 's'))));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f.value()->GetString("k").value().size(), io::kGgufMaxNameBytes + 1);
  // A tensor name over the name limit.
  ExpectRefused(Header(1, 0, GgufWriter::Str(std::string(io::kGgufMaxNameBytes + 1, 't')) + std::string(64, '\0')),
                "kGgufMaxNameBytes");
}

TEST(Limits, ArrayLength) {
  const std::string arr = GgufWriter::Str("a") + GgufWriter::U32(9) + GgufWriter::U32(0 /*u8*/);
  ExpectRefused(Header(0, 1, arr + GgufWriter::Pod<uint64_t>(io::kGgufMaxArrayElems + 1) + "xyz"),
                "kGgufMaxArrayElems");
  // Nested: the outer array's elements count against the same budget.
  const std::string nested = GgufWriter::Str("a") + GgufWriter::U32(9) + GgufWriter::U32(9) +
                             GgufWriter::Pod<uint64_t>(2) + GgufWriter::U32(0) + GgufWriter::Pod<uint64_t>(1) + "q" +
                             GgufWriter::U32(0) + GgufWriter::Pod<uint64_t>(io::kGgufMaxArrayElems - 2) + "z";
  ExpectRefused(Header(0, 1, nested), "kGgufMaxArrayElems");
}

TEST(Limits, TensorBytesOverflowIsRefused) {
  // 2^31 x 2^31 F32: 2^62 elements, 2^64 bytes, which wrapped to 0 before the limit.
  GgufWriter w;
  w.AddTensor("t", {uint64_t{1} << 31, uint64_t{1} << 31}, GgmlType::F32, std::string(32, '\0'));
  ExpectRefused(w.Bytes(), "kGgufMaxTensorBytes");
  // Just over 1 TiB of Q8_0 blocks (34 bytes per 32 elements).
  GgufWriter q;
  q.AddTensor("t", {32, (uint64_t{1} << 40) / 34 + 1}, GgmlType::Q8_0, std::string(34, '\0'));
  ExpectRefused(q.Bytes(), "kGgufMaxTensorBytes");
}

// A llama header with one token_embd of [2, vocab] F16 (4 bytes per token).
std::string TinyLlama(uint64_t vocab, uint32_t ctx) {
  GgufWriter w;
  w.AddRaw("general.architecture", 8, GgufWriter::Str("llama"));
  w.AddRaw("llama.embedding_length", 4, GgufWriter::U32(2));
  w.AddRaw("llama.block_count", 4, GgufWriter::U32(1));
  w.AddRaw("llama.feed_forward_length", 4, GgufWriter::U32(1));
  w.AddRaw("llama.attention.head_count", 4, GgufWriter::U32(1));
  w.AddRaw("llama.context_length", 4, GgufWriter::U32(ctx));
  w.AddRaw("llama.attention.layer_norm_rms_epsilon", 6, GgufWriter::Pod<float>(1e-5f));
  w.AddTensor("token_embd.weight", {2, vocab}, GgmlType::F16, std::string(4 * vocab, '\0'));
  return w.Bytes();
}

TEST(Limits, VocabularyAndContextInTheConfig) {
  auto ok = io::GgufFile::FromBytes(TinyLlama(16, 64));
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  auto c = model::ReadConfig(*ok.value());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.value().vocab, 16);
  EXPECT_EQ(c.value().ctx, 64);

  auto big = io::GgufFile::FromBytes(TinyLlama(io::kGgufMaxVocab + 1, 64));  // 8 MiB of F16
  ASSERT_TRUE(big.ok()) << big.error().message;
  auto cb = model::ReadConfig(*big.value());
  ASSERT_FALSE(cb.ok());
  EXPECT_NE(cb.error().message.find("kGgufMaxVocab"), std::string::npos) << cb.error().message;

  auto long_ctx = io::GgufFile::FromBytes(TinyLlama(16, (1u << 24) + 1));
  ASSERT_TRUE(long_ctx.ok());
  auto cc = model::ReadConfig(*long_ctx.value());
  ASSERT_FALSE(cc.ok());
  EXPECT_NE(cc.error().message.find("context_length"), std::string::npos) << cc.error().message;
  EXPECT_NE(cc.error().message.find("16777216"), std::string::npos) << cc.error().message;
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
