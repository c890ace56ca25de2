// Context files (Session::SaveContext / LoadContext, io/context_file.h;
// issue 32): a saved and loaded context answers a question token for token
// as the in-memory one does, for the prefill-time policies and every KV
// type; files of another model, a flipped byte, a truncated file, another
// format version are refused naming the file; the byte reader survives
// garbage behind a valid checksum.
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/engine_impl.h"
#include "io/context_file.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kvtrim/engine.h"
#include "context_round_trip.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::string TmpPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kvtrim-ctx-" + std::to_string(::getpid()) + "-" + name)).string();
}

using test::Greedy;

SessionOptions Options(const std::string& policy, const std::string& quant) {
  SessionOptions so;
  so.kv.policy = policy;
  so.kv.ratio = 0.5;
  so.kv.ratio_explicit = true;
  so.kv.quant = quant;
  return so;
}

// Every registered policy and every KV type: a saved and loaded context
// holds the same entries and logits; for the policies that compress only
// at prefill it also answers token for token. A decode-time policy's
// statistics are not saved (docs/context-file.md), so its later evictions
// may differ: for those the state at load is compared, not the answer.
TEST(ContextFile, SavedAndLoadedAnswersAsTheInMemoryContext) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  const std::string path = TmpPath("rt.kvc");
  test::ExpectEveryPolicyRoundTrips(*e, [&](const Session& a, const std::string& name) {
    Status st = a.SaveContext(path);
    if (!st.ok()) return Expected<std::unique_ptr<Session>>(MakeError(name + ": " + st.message()));
    return Session::LoadContext(*e, path, SessionOptions{});
  });
  std::remove(path.c_str());
}

// The bytes path (the server's Redis store keeps exactly these): loaded
// from memory they answer as the file does; a flipped byte is refused
// naming what was given.
TEST(ContextFile, BytesInMemoryLoadAsTheFile) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  auto a = Session::Create(*e, Options("snapkv", "q8_0"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(a.value()->Prefill(e->impl().tokenizer().Encode("Once upon a time, there was a big dog named Max.", true)).ok());
  ASSERT_TRUE(a.value()->Compress().ok());
  std::string bytes = a.value()->ContextBytes();
  auto b = Session::LoadContextBytes(*e, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "value 'k'", {});
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(Greedy(*b.value(), 12), Greedy(*a.value(), 12));
  bytes[bytes.size() / 3] ^= 4;
  auto bad = Session::LoadContextBytes(*e, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "value 'k'", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("value 'k': ", 0), 0u) << bad.error().message;
}

std::string ReadAll(const std::string& p) { return test::ReadFile(p); }
void WriteAll(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary) << b; }

TEST(ContextFile, RefusesAnotherModelAFlippedByteATruncatedFileAndAnotherVersion) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  const std::string path = TmpPath("bad.kvc");
  {
    auto a = Session::Create(*e, Options("snapkv", "f16"));
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(a.value()->Prefill(e->impl().tokenizer().Encode("Tom and Sue went to the park.", true)).ok());
    ASSERT_TRUE(a.value()->Compress().ok());
    ASSERT_TRUE(a.value()->SaveContext(path).ok());
  }
  const std::string good = ReadAll(path);
  ASSERT_TRUE(Session::LoadContext(*e, path, {}).ok());
  auto refused = [&](const std::string& bytes, const std::string& want) {
    WriteAll(path, bytes);
    auto s = Session::LoadContext(*e, path, {});
    ASSERT_FALSE(s.ok()) << want;
    EXPECT_NE(s.error().message.find(path), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find(want), std::string::npos) << s.error().message;
  };
  for (size_t at : {size_t{30}, good.size() / 2, good.size() - 20}) {
    std::string b = good;
    b[at] ^= 0x10;
    refused(b, "checksum");
  }
  refused(good.substr(0, good.size() - 100), "checksum");
  refused(good.substr(0, 20), "truncated");
  std::string v = good;
  v[8] = 2;  // format version 2
  refused(v, "version 2");
  std::string m = good;
  m[0] = 'X';
  refused(m, "magic");
  WriteAll(path, good);
  auto other = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(other);
  auto s = Session::LoadContext(*other, path, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("another model"), std::string::npos) << s.error().message;
  std::remove(path.c_str());
}

// Garbage after a valid header and checksum: every count is checked
// against the bytes left, so the reader answers with an error, never reads
// past the end.
TEST(ContextFile, ByteReaderSurvivesGarbageBehindAValidChecksum) {
  std::mt19937 rng(3);
  int refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string b(io::kContextMagic, sizeof(io::kContextMagic));
    const uint32_t version = io::kContextFormatVersion, flags = 0;
    b.append(reinterpret_cast<const char*>(&version), 4);
    b.append(reinterpret_cast<const char*>(&flags), 4);
    const uint64_t meta = 2;
    b.append(reinterpret_cast<const char*>(&meta), 8);
    b += "{}";
    const size_t n = rng() % 96;
    for (size_t i = 0; i < n; ++i) b += static_cast<char>(trial % 3 == 0 ? (rng() % 4) : rng());
    const uint64_t sum = XXH3_64bits(b.data(), b.size());
    b.append(reinterpret_cast<const char*>(&sum), 8);
    auto img = io::ParseContextBytes(reinterpret_cast<const uint8_t*>(b.data()), b.size());
    refused += !img.ok();
  }
  EXPECT_GT(refused, 1900);
}

TEST(ContextFile, CliSavesLoadsAndInspects) {
  const std::string path = TmpPath("cli.kvc");
  const std::string model = test::ModelPath("stories260K.gguf");
  auto save = test::RunCommand(std::string(KVTRIM_CLI) + " run -m " + model +
                               " -p 'Tom and Sue went to the park.' -n 0 --kv snapkv --kv-ratio 0.5 --save-context " +
                               path + " 2>/dev/null");
  ASSERT_EQ(save.code, 0);
  auto ins = test::RunCommand(std::string(KVTRIM_CLI) + " context inspect --json " + path);
  ASSERT_EQ(ins.code, 0);
  auto j = nlohmann::json::parse(ins.out);
  EXPECT_EQ(j["header"]["kv"]["kv"], "snapkv");
  EXPECT_EQ(j["head_entries"].size(), 20u);
  EXPECT_GT(j["tokens"].get<int>(), 5);
  auto ask = test::RunCommand(std::string(KVTRIM_CLI) + " run -m " + model + " --load-context " + path +
                              " -p ' They' -n 8 --temp 0 2>/dev/null");
  EXPECT_EQ(ask.code, 0);
  EXPECT_GT(ask.out.size(), 6u);
  auto wrong = test::RunCommand(std::string(KVTRIM_CLI) + " run -m " + test::ModelPath("needle-3.7M-f32.gguf") +
                                " --load-context " + path + " -p x -n 1 2>&1");
  EXPECT_EQ(wrong.code, 1);
  EXPECT_NE(wrong.out.find(path), std::string::npos) << wrong.out;
  std::remove(path.c_str());
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
