// The report plots draw every method in its own (colour, marker, dash)
// triple, the same in every report, and the summary plots accuracy against
// the bytes each method really holds.
// GCC 12 at -O1 (the sanitizer builds) reports a false -Wmaybe-uninitialized
// inside libstdc++'s std::regex (std::function moved in _NFA); silenced here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "eval/method_style.h"
#include "kvtrim/eval_report.h"

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

namespace fs = std::filesystem;
using Triple = std::tuple<std::string, int, int>;

Cell NeedleCell(const std::string& task, const std::string& method, double ratio, double acc) {
  Cell c;
  c.task = task, c.method = method, c.ratio = ratio, c.n = 8;
  c.accuracy = acc, c.accuracy_se = 0.05;
  c.kv_bytes_full = 4.0 * 1024 * 1024;
  c.kv_bytes = c.kv_bytes_full * ratio * (method == "am" ? 0.5 : 1.0);  // am holds less than its ratio
  return c;
}

// Two needle tasks, ratios 0.5 and 0.1, every method at 0 or 100% (overlaps).
Report MakeReport(const std::vector<std::string>& methods) {
  Report r;
  r.meta.model = "m.gguf", r.meta.mode = "query-agnostic", r.meta.context_tokens = 512;
  for (const char* task : {"niah", "passkey"}) {
    r.cells.push_back(NeedleCell(task, "full", 1.0, 1.0));
    for (size_t i = 0; i < methods.size(); ++i)
      for (double ratio : {0.5, 0.1}) r.cells.push_back(NeedleCell(task, methods[i], ratio, i % 2 ? 1.0 : 0.0));
  }
  return r;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// method -> (colour, marker, dash) of every plotted line in a gnuplot script.
std::map<std::string, Triple> ScriptStyles(const std::string& script, std::set<Triple>* seen, int* repeats) {
  static const std::regex line("lc rgb '([^']+)' pt (\\d+) dt (\\d+) lw [0-9.]+ ps [0-9.]+ title '([^']+)'");
  std::map<std::string, Triple> out;
  for (auto it = std::sregex_iterator(script.begin(), script.end(), line); it != std::sregex_iterator(); ++it) {
    Triple t{(*it)[1], std::stoi((*it)[2]), std::stoi((*it)[3])};
    *repeats += !seen->insert(t).second;
    out[(*it)[4]] = t;
  }
  return out;
}

Expected<std::string> Plots(const Report& r) {
  auto t = std::chrono::steady_clock::now().time_since_epoch().count();
  fs::path dir = fs::temp_directory_path() / ("kvtrim_style_test_" + std::to_string(getpid()) + "_" + std::to_string(t));
  auto files = WritePlots(r, dir.string());
  if (!files) return files.error();
  return dir.string();
}

const std::vector<std::string> kAll = {"window", "random", "lru", "h2o", "scissorhands", "snapkv", "pyramidkv",
                                       "kvslimmer", "merge-mean", "razor", "compactor", "am", "tova", "knorm",
                                       "keydiff", "kvzip", "expected-attention", "quantization", "my-new-policy",
                                       "another"};

TEST(EvalPlotStyle, EveryMethodHasItsOwnTripleInEveryScript) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gnuplot";
  auto dir = Plots(MakeReport(kAll));
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  for (const char* gp : {"plot_accuracy_niah.gp", "plot_accuracy_passkey.gp", "plot_summary.gp"}) {
    std::set<Triple> seen;
    int repeats = 0;
    auto styles = ScriptStyles(Slurp(*dir + "/" + gp), &seen, &repeats);
    EXPECT_EQ(styles.size(), kAll.size()) << gp;
    EXPECT_EQ(repeats, 0) << gp << ": two methods share a (colour, marker, dash) triple";
  }
  fs::remove_all(*dir);
}

TEST(EvalPlotStyle, SameMethodSameTripleAcrossReports) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gnuplot";
  const std::vector<std::string> few = {"tova", "another", "lru", "zeta-policy"};
  auto a = Plots(MakeReport(kAll)), b = Plots(MakeReport(few));
  ASSERT_TRUE(a.ok() && b.ok());
  std::set<Triple> sa, sb;
  int ra = 0, rb = 0;
  auto styles_a = ScriptStyles(Slurp(*a + "/plot_accuracy_niah.gp"), &sa, &ra);
  auto styles_b = ScriptStyles(Slurp(*b + "/plot_summary.gp"), &sb, &rb);
  ASSERT_EQ(styles_b.size(), few.size());
  for (const char* m : {"tova", "another", "lru"}) EXPECT_EQ(styles_a.at(m), styles_b.at(m)) << m;
  EXPECT_EQ(rb, 0);
  fs::remove_all(*a), fs::remove_all(*b);
}

TEST(EvalPlotStyle, StrongMethodsBoldBaselinesLight) {
  auto styles = MethodStyles({"kvzip", "h2o", "window", "random", "lru", "unknown"});
  EXPECT_GT(styles.at("kvzip").width, styles.at("unknown").width);
  EXPECT_GT(styles.at("h2o").width, styles.at("unknown").width);
  for (const char* m : {"window", "random", "lru"}) EXPECT_LT(styles.at(m).width, styles.at("unknown").width) << m;
  // Hashed names never take a known method's triple, even when it is absent.
  std::set<Triple> known;
  for (const std::string& m : kAll)
    if (const MethodStyle* k = KnownMethodStyle(m)) known.insert({k->color, k->point, k->dash});
  for (int i = 0; i < 200; ++i) {
    const MethodStyle s = MethodStyles({std::to_string(i) + "-policy"}).begin()->second;
    EXPECT_EQ(known.count({s.color, s.point, s.dash}), 0u) << i;
  }
}

TEST(EvalPlotStyle, SummaryPlacesMethodsAtTheBytesTheyHold) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gnuplot";
  auto dir = Plots(MakeReport({"am", "h2o"}));
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  ASSERT_TRUE(fs::file_size(*dir + "/summary.png") > 1000);
  const std::string dat = Slurp(*dir + "/summary.dat");
  // MiB held (4 MiB full): am holds half of its ratio's bytes; mean accuracy over both tasks.
  EXPECT_NE(dat.find("# index 0: method full\n4 1 "), std::string::npos) << dat;
  EXPECT_NE(dat.find("method am\n0.2 0 "), std::string::npos) << dat;
  EXPECT_NE(dat.find("\n1 0 "), std::string::npos) << dat;  // am at ratio 0.5 -> 1 MiB
  EXPECT_NE(dat.find("method h2o\n0.4 1 "), std::string::npos) << dat;
  const std::string gp = Slurp(*dir + "/plot_summary.gp");
  EXPECT_NE(gp.find("title 'full cache'"), std::string::npos) << gp;
  fs::remove_all(*dir);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval
