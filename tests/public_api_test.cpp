// The layering the architecture promises (docs/ARCHITECTURE.md): the CLI
// parses, calls the public API (include/kvtrim/) and prints, so no file of
// tools/kvtrim includes a library-internal header; and the public headers
// include only each other (and system or Debian libraries).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

namespace fs = std::filesystem;

// Every `#include "..."` of the C++ files under dir, as "file: header".
std::vector<std::string> QuotedIncludes(const fs::path& dir, const std::regex& bad) {
  std::vector<std::string> hits;
  const std::regex inc(R"re(^\s*#\s*include\s+"([^"]+)")re");
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".h") continue;
    std::ifstream in(e.path());
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_search(line, m, inc) && std::regex_search(m[1].str(), bad))
        hits.push_back(e.path().filename().string() + ": " + m[1].str());
  }
  return hits;
}

TEST(PublicApi, TheCliIncludesNoLibraryInternals) {
  const fs::path tools = fs::path(KVTRIM_SOURCE_DIR) / "tools" / "kvtrim";
  ASSERT_TRUE(fs::is_directory(tools));
  const std::regex internal(R"(^(kv|model|io|kernels|engine|eval|server)/)");
  EXPECT_EQ(QuotedIncludes(tools, internal), std::vector<std::string>{});
}

TEST(PublicApi, PublicHeadersIncludeOnlyPublicHeaders) {
  const fs::path inc = fs::path(KVTRIM_SOURCE_DIR) / "include" / "kvtrim";
  ASSERT_TRUE(fs::is_directory(inc));
  const std::regex not_public(R"(^(?!kvtrim/))");
  EXPECT_EQ(QuotedIncludes(inc, not_public), std::vector<std::string>{});
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
