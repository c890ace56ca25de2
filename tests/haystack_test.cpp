// The held-out haystack (data/haystacks/devils-dictionary.txt) is none of
// the default model's training sources (../shared/models/MODELS.md: needle
// v0/v1 were trained on Frankenstein, the King James Bible, the Paul Graham
// essays and LongBench multi_news, ../shared/data/README.md): no 64-character
// window sampled along it occurs in any of them (whitespace collapsed),
// while the same check finds windows of Frankenstein (the check can fail).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

namespace fs = std::filesystem;

// Runs of whitespace as one space, so line breaks and indentation do not hide a copy.
std::string Collapse(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  bool space = false;
  for (char c : s) {
    const bool ws = c == ' ' || c == '\n' || c == '\r' || c == '\t';
    if (ws && space) continue;
    out += ws ? ' ' : c;
    space = ws;
  }
  return out;
}

std::vector<std::string> TrainingTexts() {
  std::vector<std::string> files = {test::SharedPath("data/frankenstein.txt"), test::SharedPath("data/kjv.txt"),
                                    test::SharedPath("data/training/multi_news_160.jsonl")};
  for (const auto& e : fs::directory_iterator(test::SharedPath("data/training/essays")))
    files.push_back(e.path().string());
  std::vector<std::string> out;
  for (const std::string& f : files) out.push_back(Collapse(test::ReadFile(f)));
  return out;
}

// Windows of `len` characters every `step` characters (from a letter on).
int WindowsFound(const std::string& text, const std::vector<std::string>& sources, size_t step, size_t len) {
  int found = 0;
  for (size_t at = 0; at + len <= text.size(); at += step) {
    const std::string w = text.substr(at, len);
    for (const std::string& s : sources)
      if (s.find(w) != std::string::npos) {
        ++found;
        break;
      }
  }
  return found;
}

TEST(Haystack, TheHeldOutTextIsNoneOfTheTrainingSources) {
  const std::string held = Collapse(test::ReadFile(std::string(KVTRIM_SOURCE_DIR) + "/data/haystacks/devils-dictionary.txt"));
  ASSERT_GT(held.size(), 300000u);
  const std::vector<std::string> sources = TrainingTexts();
  ASSERT_GE(sources.size(), 40u);  // frankenstein, kjv, multi_news and the 39 essays
  EXPECT_EQ(WindowsFound(held, sources, 997, 64), 0);
  // The control: windows of a training text are found.
  const std::string frank = Collapse(test::ReadFile(test::SharedPath("data/frankenstein.txt")));
  EXPECT_GT(WindowsFound(frank.substr(0, 100000), sources, 997, 64), 90);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
