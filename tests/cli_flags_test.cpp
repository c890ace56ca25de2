// The CLI as a llama.cpp user types it: llama.cpp's spellings reach kvtrim's
// own options, its GPU and batching flags are named as ignored and change no
// output byte (never misread as another flag: -ngl 99 is not -n gl), an
// unknown flag names the nearest known one; the warnings for flags that
// would do nothing, and the refusals of values a flag cannot take.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

const std::string& Model() {
  static const std::string m = test::ModelPath("stories260K.gguf");
  return m;
}

// `kvtrim ARGS`: stdout alone, and stderr alone.
// (Built by append: GCC 12 reports a false -Warray-bounds on `string + "..."`.)
test::CmdResult Cli(const std::string& args, const char* redirect) {
  std::string cmd = KVTRIM_CLI;
  cmd.append(" ").append(args).append(redirect);
  return test::RunCommand(cmd);
}
test::CmdResult Out(const std::string& args) { return Cli(args, " 2>/dev/null"); }
test::CmdResult Err(const std::string& args) { return Cli(args, " 2>&1 >/dev/null"); }

// The `kv:` line of a run's stderr.
std::string KvLine(const std::string& err) {
  const size_t at = err.find("\nkv: ");
  if (at == std::string::npos) return {};
  return err.substr(at + 1, err.find('\n', at + 1) - at - 1);
}

class CliFlags : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(Model())) GTEST_SKIP() << "no " << Model();
  }
  const std::string run = "run -m " + Model() + " -p 'Once upon a time' --temp 0 -t 1 ";
};

TEST_F(CliFlags, LlamaCppSpellingsReachTheSameOptions) {
  const std::string base = Out(run + "-n 24").out;
  ASSERT_FALSE(base.empty());
  EXPECT_EQ(Out(run + "--n-predict 24").out, base);
  const std::string no_t = "run -m " + Model() + " -p 'Once upon a time' --temp 0 -n 24 ";
  EXPECT_EQ(Out(no_t + "--threads 1").out, base);
  EXPECT_EQ(Out(no_t + "-t 1").out, base);
  EXPECT_EQ(Out(run + "-n 24 --ctx-size 256").out, base);
  // -c / --ctx-size set the same context: both refuse 300 tokens in 256.
  for (const char* c : {"-c 256", "--ctx-size 256", "--ctx 256"})
    EXPECT_NE(Err(run + "-n 300 " + c).out.find("exceeds the context length 256"), std::string::npos) << c;
  // -ctk/-ctv and --cache-type-k/-v set the KV type as --kv-quant does.
  const std::string q8 = KvLine(Err(run + "-n 8 --kv-quant q8_0").out);
  EXPECT_NE(q8.find("quant q8_0"), std::string::npos) << q8;
  EXPECT_EQ(KvLine(Err(run + "-n 8 -ctk q8_0 -ctv q8_0").out), q8);
  EXPECT_EQ(KvLine(Err(run + "-n 8 --cache-type-k q8_0 --cache-type-v q8_0").out), q8);
  EXPECT_EQ(Out(run + "-n 24 -ctk q8_0 -ctv q8_0").out, Out(run + "-n 24 --kv-quant q8_0").out);
  // K and V in one type: different ones are refused, saying so.
  const test::CmdResult kv = test::RunCommand(std::string(KVTRIM_CLI) + " " + run + "-n 8 -ctk q8_0 -ctv f16 2>&1");
  EXPECT_NE(kv.code, 0);
  EXPECT_NE(kv.out.find("K and V are stored in one type here"), std::string::npos) << kv.out;
  EXPECT_NE(test::RunCommand(std::string(KVTRIM_CLI) + " " + run + "-n 8 -ctk q8_0 2>&1").code, 0);  // V: f16
  EXPECT_NE(test::RunCommand(std::string(KVTRIM_CLI) + " " + run + "-n 8 -ctk q5_1 -ctv q5_1 2>&1").code, 0);
}

TEST_F(CliFlags, IgnoredFlagsAreNamedAndChangeNoOutputByte) {
  const std::string base = Out(run + "-n 24").out;
  const std::string all = "-ngl 99 -fa -b 2048 -ub 512 --mlock --no-mmap";
  EXPECT_EQ(Out(run + all + " -n 24").out, base);
  EXPECT_EQ(Out(run + "-n 24 " + all).out, base);
  EXPECT_EQ(Out(run + "-n 24 -fa on --n-gpu-layers 33 --flash-attn off --batch-size 64 --ubatch-size 32").out, base);
  const std::string err = Err(run + all + " -n 4").out;
  EXPECT_NE(err.find("ignored (llama.cpp flags with no meaning on this CPU engine): -ngl 99 -fa -b 2048 -ub 512 "
                     "--mlock --no-mmap"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("ignored"), err.rfind("ignored")) << err;  // one line
  // -ngl 99 never reaches -n, -fa never -f, -ctk never -c.
  EXPECT_EQ(Out(run + "-ngl 99 -n 24").out, base);
  EXPECT_EQ(Err(run + "-fa -n 4").out.find("cannot open prompt file"), std::string::npos);
  EXPECT_EQ(KvLine(Err(run + "-ctk f16 -n 4").out), KvLine(Err(run + "-n 4").out));
}

TEST_F(CliFlags, AnUnknownFlagNamesTheNearestKnownOne) {
  const test::CmdResult r = test::RunCommand(std::string(KVTRIM_CLI) + " " + run + "--ctxsize 512 2>&1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("unknown flag --ctxsize; did you mean --ctx-size?"), std::string::npos) << r.out;
  const test::CmdResult k = test::RunCommand(std::string(KVTRIM_CLI) + " " + run + "--top_k 5 2>&1");
  EXPECT_NE(k.out.find("did you mean --top-k?"), std::string::npos) << k.out;
  // A malformed number is named as such, not as a 309-digit range.
  const test::CmdResult n = test::RunCommand(std::string(KVTRIM_CLI) + " " + run + "-n gl 2>&1");
  EXPECT_NE(n.out.find("gl is not a number"), std::string::npos) << n.out;
  EXPECT_LT(n.out.size(), 200u) << n.out;
}

TEST_F(CliFlags, WarningsForFlagsThatWouldDoNothing) {
  const std::string warn = "warning:";
  // A budget without a policy: the full cache ignores it.
  EXPECT_NE(Err(run + "-n 4 --kv-ratio 0.25").out.find("--kv-ratio given without --kv"), std::string::npos);
  EXPECT_NE(Err(run + "-n 4 --kv full --kv-budget 8").out.find("--kv-budget given with --kv full"), std::string::npos);
  EXPECT_EQ(Err(run + "-n 4").out.find(warn), std::string::npos);
  // A prompt the policy protects whole: nothing evicted, said; a longer one evicts silently.
  const std::string shortp = Err(run + "-n 4 --kv snapkv --kv-ratio 0.1").out;
  EXPECT_NE(shortp.find("snapkv kept all"), std::string::npos) << shortp;
  const std::string story = (std::filesystem::temp_directory_path() / "kvtrim-cli-flags-story.txt").string();
  {
    std::ofstream f(story);
    for (int i = 0; i < 12; ++i) f << "Once upon a time there was a little girl named Lily. She liked to play. ";
  }
  const std::string long_run = "run -m " + Model() + " -f " + story + " --temp 0 -t 1 ";
  const std::string longp = Err(long_run + "-n 4 --kv snapkv --kv-ratio 0.5").out;
  EXPECT_EQ(longp.find(warn), std::string::npos) << longp;
  EXPECT_EQ(Err(long_run + "-n 4 --kv window --kv-ratio 0.1").out.find(warn), std::string::npos);
  // KV flags beside --load-context: the file's options win, said.
  const std::string file = (std::filesystem::temp_directory_path() / "kvtrim-cli-flags.kvc").string();
  ASSERT_EQ(Out(long_run + "-n 1 --kv window --kv-ratio 0.5 --save-context " + file).code, 0);
  const std::string q = "run -m " + Model() + " -p ' The end.' --temp 0 -n 4 --load-context " + file;
  EXPECT_NE(Err(q + " --kv h2o").out.find("the KV flags given are ignored"), std::string::npos);
  EXPECT_EQ(Err(q).out.find(warn), std::string::npos) << Err(q).out;
  std::filesystem::remove(file);
  std::filesystem::remove(story);
}

TEST_F(CliFlags, ValuesAFlagCannotTakeAreRefused) {
  auto refused = [&](const std::string& flags, const std::string& says) {
    const test::CmdResult r = test::RunCommand(std::string(KVTRIM_CLI) + " " + run + "-n 4 " + flags + " 2>&1");
    EXPECT_NE(r.code, 0) << flags;
    EXPECT_NE(r.out.find(says), std::string::npos) << flags << ": " << r.out;
  };
  refused("--kv snapkv --kv-ratio 0.5 --pool-kernel 4", "--pool-kernel = 4 must be odd");
  refused("--kv window --kv-ratio 0.5 --sinks 2.5", "--sinks = 2.5 must be a whole number");
  refused("--kv h2o --kv-ratio 0.5 --sink-guard 1.5", "--sink-guard = 1.5 must be a whole number");
  refused("--top-k 2.5", "--top-k");
  refused("--min-p 1.5", "1.5 is outside [0, 1]");
  EXPECT_EQ(Out(run + "-n 4 --kv snapkv --kv-ratio 0.5 --pool-kernel 3").code, 0);
  EXPECT_EQ(Out(run + "-n 4 --kv window --kv-ratio 0.5 --sinks 2").code, 0);
  EXPECT_EQ(Out(run + "-n 4 --kv h2o --kv-ratio 0.5 --heavy-ratio 0.25").code, 0);  // a real-valued flag
}

TEST_F(CliFlags, TheKvLineShowsTheSameTypesFullCacheAndF32s) {
  // stories260K: head dim 8, 8 bytes of position and log-weight an entry:
  // f16 rows 2 x 16 bytes (40 an entry), f32 2 x 32 (72).
  const std::string line = KvLine(Err(run + "-n 8").out);
  EXPECT_NE(line.find("100.0% of a full f16 cache"), std::string::npos) << line;
  EXPECT_NE(line.find("55.6% of a full f32 cache"), std::string::npos) << line;
  const std::string f32 = KvLine(Err(run + "-n 8 --kv-quant f32").out);
  EXPECT_NE(f32.find("100.0% of a full f32 cache"), std::string::npos) << f32;
  EXPECT_EQ(f32.find("55.6%"), std::string::npos) << f32;
}

// --haystack takes a file or a name; the default is the shipped held-out text.
TEST(CliHaystack, NamesAndTheDefault) {
  const std::string base = " eval --methods full --tasks niah --no-fidelity --samples 1 -t 1 --out " +
                           ::testing::TempDir() + "kvtrim-haystack-";
  auto table = [](const std::string& out) { return out.find("haystack:       ") == std::string::npos ? "" : out; };
  const test::CmdResult def = Out(base + "a");
  ASSERT_EQ(def.code, 0) << def.out;
  EXPECT_NE(table(def.out).find("haystack:       devils-dictionary"), std::string::npos) << def.out;
  const test::CmdResult named = Out(base + "b --haystack frankenstein");
  ASSERT_EQ(named.code, 0) << named.out;
  EXPECT_NE(named.out.find("haystack:       frankenstein"), std::string::npos) << named.out;
  const test::CmdResult missing = Err(base + "c --haystack no-such-text");
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.out.find("cannot open haystack file 'no-such-text'"), std::string::npos) << missing.out;
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
