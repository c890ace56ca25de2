// User-facing text speaks of the tool, not of its making: README.md,
// docs/*.md (docs/results/ holds the history and dated measurements) and
// every command's --help carry no work-log label (an issue, round or
// session number, a seed document's number, a date, a machine path).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// The labels; a hit inside a path under results/ (a link to a measurement
// file named after its issue) is allowed.
const std::regex& Labels() {
  static const std::regex r(
      R"(\bround[- ]?[0-9]|\bissues?[ -]?#?[0-9]|\bsessions?[ -]?[0-9]|\bseed[ -]?0[0-9][0-9]|/work/|other engineers|\b20[0-9][0-9]-[01][0-9]-[0-3][0-9]\b)",
      std::regex::icase);
  return r;
}

// "line N: text" for each label in `text` outside a results/ path.
std::vector<std::string> Hits(const std::string& text) {
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), Labels()); it != std::sregex_iterator(); ++it) {
    const size_t at = static_cast<size_t>(it->position());
    const size_t word = text.find_last_of(" \t\n(`[", at);  // the start of the path or word the hit is in
    const std::string token = text.substr(word == std::string::npos ? 0 : word + 1, at - (word + 1) + it->length());
    if (token.find("results/") != std::string::npos) continue;
    const size_t line = static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n')) + 1;
    const size_t bol = text.rfind('\n', at), eol = text.find('\n', at);
    out.push_back("line " + std::to_string(line) + ": " +
                  text.substr(bol == std::string::npos ? 0 : bol + 1, eol - (bol == std::string::npos ? 0 : bol + 1)));
  }
  return out;
}

TEST(DocsWorklog, TheLabelCheckFindsWhatItMust) {
  // The check itself, on text that carries each label (and some that do not).
  for (const char* bad : {"as in round 4", "the round-2 behaviour", "(issue 31)", "issue #12", "session 11's run",
                          "seed 001", "see /work/llama.cpp", "five other engineers", "measured 2026-11-22"})
    EXPECT_EQ(Hits(bad).size(), 1u) << bad;
  for (const char* ok : {"rounds of merges", "--seed 1", "see docs/results/issue31-table.md",
                         "[table](results/issue31-table.md)", "work/ directory", "an issue with the budget"})
    EXPECT_TRUE(Hits(ok).empty()) << ok;
}

TEST(DocsWorklog, UserDocsCarryNoWorkLogLabel) {
  const std::filesystem::path src = KVTRIM_SOURCE_DIR;
  std::vector<std::filesystem::path> files = {src / "README.md"};
  for (const auto& f : std::filesystem::directory_iterator(src / "docs"))
    if (f.path().extension() == ".md") files.push_back(f.path());
  EXPECT_GT(files.size(), 10u);
  for (const auto& f : files)
    for (const std::string& h : Hits(test::ReadFile(f.string()))) ADD_FAILURE() << f.filename().string() << " " << h;
}

TEST(DocsWorklog, HelpTextsCarryNoWorkLogLabel) {
  const std::string cli = KVTRIM_CLI;
  std::vector<std::string> cmds = {"--help", "policies", "policies --options"};
  const std::string top = test::RunCommand(cli + " --help 2>&1").out;
  for (const char* sub : {"run", "inspect", "bench", "policies", "eval", "eval-merge", "profile", "calibrate",
                          "tokenize", "serve", "serve-bench", "make-model", "context"}) {
    EXPECT_NE(top.find(sub), std::string::npos) << sub;
    cmds.push_back(std::string(sub) + " --help");
  }
  for (const std::string& c : cmds) {
    test::CmdResult r = test::RunCommand(cli + " " + c + " 2>&1");
    EXPECT_GT(r.out.size(), 100u) << c;
    // Where this build and checkout are (the usage line, default paths) is not a label.
    for (const std::string& where : {cli, std::string(KVTRIM_SOURCE_DIR)})
      for (size_t at; (at = r.out.find(where)) != std::string::npos;) r.out.replace(at, where.size(), "PATH");
    for (const std::string& h : Hits(r.out)) ADD_FAILURE() << "kvtrim " << c << " " << h;
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
