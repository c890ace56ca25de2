// The KV option table (kv/option_table.h): the CLI's KV flags, the
// `kvtrim policies --options` list and docs/flags-kv.md all come from it.
#include "kvtrim/option_table.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_util.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(OptionTable, TheDocsListIsTheGeneratedOne) {
  const std::string md = KvOptionsMarkdown();
  EXPECT_EQ(ReadFile(std::string(KVTRIM_SOURCE_DIR) + "/docs/flags-kv.md"), md)
      << "regenerate: kvtrim policies --options > docs/flags-kv.md";
  const test::CmdResult r = test::RunCommand(std::string(KVTRIM_CLI) + " policies --options");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, md);
  // Defaults are KvOptions' own.
  EXPECT_NE(md.find("| `--kv-ratio` | 1 |"), std::string::npos);
  // ... or the commands' own where they differ, as each command's --help shows them.
  EXPECT_NE(md.find("| `--kv-quant` | f16 (run, bench, serve); f32 (eval, calibrate, the library) |"),
            std::string::npos);
  for (const char* cmd : {"run", "bench", "serve"})
    EXPECT_NE(test::RunCommand(std::string(KVTRIM_CLI) + " " + cmd + " --help 2>&1").out.find("--kv-quant TEXT=f16"),
              std::string::npos)
        << cmd;
  const std::string eval = test::RunCommand(std::string(KVTRIM_CLI) + " eval --help 2>&1").out;
  EXPECT_NE(eval.find("--kv-quant TEXT=f32"), std::string::npos);
  EXPECT_NE(eval.find("--kv-quant-at TEXT:{write,kept}=kept"), std::string::npos);
  EXPECT_NE(md.find("| `--min-head-share` | 0.2 | [0, 1] |"), std::string::npos);
}

TEST(OptionTable, EveryOptionIsAFlagWhereItsScopeSays) {
  const std::string run = test::RunCommand(std::string(KVTRIM_CLI) + " run --help 2>&1").out;
  const std::string eval = test::RunCommand(std::string(KVTRIM_CLI) + " eval --help 2>&1").out;
  const std::string serve = test::RunCommand(std::string(KVTRIM_CLI) + " serve --help 2>&1").out;
  for (const KvOptionSpec& s : KvOptionTable()) {
    const std::string flag = "--" + s.name + (s.is_flag ? "" : " ");
    EXPECT_NE(run.find(flag), std::string::npos) << s.name;  // run takes every scope
    EXPECT_EQ(eval.find(flag) != std::string::npos, s.scope != KvOptionSpec::Scope::kPolicy) << s.name;
    EXPECT_EQ(serve.find(flag) != std::string::npos, s.scope != KvOptionSpec::Scope::kQuality) << s.name;
  }
}

TEST(OptionTable, TheFlagsReachTheSession) {
  // Every table option given on the command line lands in the session's
  // options: the run's report names the policy, quantization and budget.
  const test::CmdResult r = test::RunCommand(std::string(KVTRIM_CLI) + " run -m " +
                                             test::ModelPath("stories260K.gguf") +
                                             " -p x -n 3 --temp 0 --kv h2o --kv-budget 5 --kv-quant q8_0 "
                                             "--head-budget adaptive --min-head-share 0.5 --check-finite 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("kv: h2o ratio 1 quant q8_0"), std::string::npos) << r.out;
  // A value outside a range the table gives is refused by the CLI.
  const test::CmdResult bad = test::RunCommand(std::string(KVTRIM_CLI) + " run -m " +
                                               test::ModelPath("stories260K.gguf") +
                                               " -p x -n 1 --kv h2o --min-head-share 1.5 2>&1");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--min-head-share"), std::string::npos) << bad.out;
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
