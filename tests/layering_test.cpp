// The layers of src/ (docs/ARCHITECTURE.md), held from one table: a file
// includes its own layer and those below it, never one above nor a sibling
// (eval and server sit side by side); and the public headers name no
// internal namespace (kv::, io::, model::, kernels::, numerics::) nor a
// third-party type (nlohmann::), so the library can move its inside freely.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

namespace fs = std::filesystem;

// Rank of each layer; a file may include a layer of lower rank, or its own.
const std::map<std::string, int>& Layers() {
  static const std::map<std::string, int> m = {{"io", 0},     {"kernels", 1}, {"kv", 2},    {"model", 3},
                                               {"engine", 4}, {"eval", 5},    {"server", 5}};
  return m;
}

// "file: header (why)" for each include that goes up or sideways, in the
// C++ files under src/<layer> for every layer of the table.
std::vector<std::string> UpwardIncludes(const fs::path& src) {
  std::vector<std::string> out;
  const std::regex inc(R"re(^\s*#\s*include\s+"([a-z_]+)/[^"]+")re");
  for (const auto& [layer, rank] : Layers())
    for (const auto& e : fs::recursive_directory_iterator(src / layer)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cpp" && ext != ".h") continue;
      std::ifstream in(e.path());
      std::smatch m;
      for (std::string line; std::getline(in, line);) {
        if (!std::regex_search(line, m, inc)) continue;
        auto to = Layers().find(m[1].str());
        if (to == Layers().end() || to->first == layer) continue;
        if (to->second >= rank)
          out.push_back(fs::relative(e.path(), src).string() + ": " + m[0].str().substr(m[0].str().find('"')) +
                        (to->second > rank ? " (a higher layer)" : " (a sibling layer)"));
      }
    }
  return out;
}

// "header:line: text" for each line of the public headers naming an
// internal namespace or nlohmann (comments aside).
std::vector<std::string> InternalNames(const fs::path& inc) {
  std::vector<std::string> out;
  const std::regex names(R"(\b(kv|io|model|kernels|numerics|nlohmann)::|namespace\s+kvtrim::(kv|io|model|kernels)\b)");
  for (const auto& e : fs::directory_iterator(inc)) {
    if (e.path().extension() != ".h") continue;
    std::ifstream in(e.path());
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      const std::string code = line.substr(0, line.find("//"));
      if (std::regex_search(code, names)) out.push_back(e.path().filename().string() + ":" + std::to_string(n) + ": " + line);
    }
  }
  return out;
}

TEST(Layering, NoIncludeGoesUpOrSideways) {
  const fs::path src = fs::path(KVTRIM_SOURCE_DIR) / "src";
  for (const auto& [layer, rank] : Layers()) ASSERT_TRUE(fs::is_directory(src / layer)) << layer;
  EXPECT_EQ(UpwardIncludes(src), std::vector<std::string>{});
}

TEST(Layering, TheCheckFindsAnUpwardInclude) {
  // The check itself, on a tree made here: kv including engine is caught,
  // kv including io and eval including kv are not, server including eval is.
  const fs::path root = fs::temp_directory_path() / "kvtrim-layering-test";
  fs::remove_all(root);
  for (const auto& [layer, rank] : Layers()) fs::create_directories(root / layer);
  std::ofstream(root / "kv" / "a.cpp") << "#include \"engine/session.h\"\n#include \"io/gguf.h\"\n";
  std::ofstream(root / "eval" / "b.cpp") << "#include \"kv/cache.h\"\n";
  std::ofstream(root / "server" / "c.cpp") << "#include \"eval/sweep.h\"\n";
  EXPECT_EQ(UpwardIncludes(root), (std::vector<std::string>{"kv/a.cpp: \"engine/session.h\" (a higher layer)",
                                                             "server/c.cpp: \"eval/sweep.h\" (a sibling layer)"}));
  fs::remove_all(root);
}

TEST(Layering, PublicHeadersNameNoInternalNamespace) {
  const fs::path inc = fs::path(KVTRIM_SOURCE_DIR) / "include" / "kvtrim";
  EXPECT_EQ(InternalNames(inc), std::vector<std::string>{});
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
