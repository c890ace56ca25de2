// The eval report renderings on a hand-built Report: JSON and CSV round-trip
// the numbers (NaN as null / empty), the table shows every cell, and the
// gnuplot plots come out as PNG files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kvtrim/eval_report.h"

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Cell MakeCell(const std::string& task, const std::string& method, double ratio, double acc, double kl,
              double nll) {
  Cell c;
  c.task = task;
  c.method = method;
  c.ratio = ratio;
  c.n = 20;
  c.accuracy = acc;
  c.accuracy_se = std::isnan(acc) ? kNaN : 0.1;
  c.kl = kl;
  c.kl_se = kl / 10;
  c.nll_ratio = nll;
  c.nll_ratio_se = 0.01;
  c.kv_bytes_full = 4.0 * 1024 * 1024;
  c.kv_bytes = c.kv_bytes_full * ratio;
  c.compress_ms = 1.5 * (1 - ratio);
  return c;
}

// Cells deliberately out of order: the renderings sort them.
Report MakeReport() {
  Report r;
  r.meta.model = "stories260K.gguf", r.meta.haystack = "essays", r.meta.mode = "query-agnostic";
  r.meta.context_tokens = 2048, r.meta.samples = 20, r.meta.threads = 2, r.meta.seed = 1234;
  r.meta.elapsed_s = 12.5, r.meta.command = "kvtrim eval --x";
  r.cells = {MakeCell("niah", "window", 0.25, 0.25, 0.9, 1.8), MakeCell("niah", "h2o", 0.5, 0.75, 0.2, 1.1),
             MakeCell("niah", "full", 1.0, 0.95, 0.0, 1.0),    MakeCell("niah", "window", 0.5, 0.5, 0.4, 1.3),
             MakeCell("niah", "h2o", 0.25, 0.6, 0.5, 1.4),     MakeCell("fidelity", "full", 1.0, kNaN, 0.0, 1.0),
             MakeCell("fidelity", "window", 0.5, kNaN, 0.3, 1.2), MakeCell("fidelity", "window", 0.25, kNaN, 0.7, 1.6),
             MakeCell("fidelity", "h2o", 0.5, kNaN, 0.1, 1.05), MakeCell("fidelity", "h2o", 0.25, kNaN, 0.35, 1.25)};
  return r;
}

std::string UniqueTempDir() {
  auto t = std::chrono::steady_clock::now().time_since_epoch().count();
  fs::path p = fs::temp_directory_path() / ("kvtrim_report_test_" + std::to_string(getpid()) + "_" + std::to_string(t));
  fs::create_directories(p);
  return p.string();
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char ch : s) {
    if (ch == sep) out.emplace_back();
    else out.back() += ch;
  }
  return out;
}

TEST(EvalReport, JsonHasRequiredKeysNumbersAndNullForNaN) {
  std::string dir = UniqueTempDir();
  std::string path = dir + "/report.json";
  ASSERT_TRUE(WriteJson(MakeReport(), path).ok());
  auto j = nlohmann::json::parse(Slurp(path));
  EXPECT_EQ(j["meta"]["model"], "stories260K.gguf");
  EXPECT_EQ(j["meta"]["context_tokens"], 2048);
  EXPECT_EQ(j["meta"]["seed"], 1234u);
  EXPECT_DOUBLE_EQ(j["meta"]["elapsed_s"].get<double>(), 12.5);
  ASSERT_EQ(j["rows"].size(), 10u);
  for (const auto& row : j["rows"])
    for (const char* key : {"task", "method", "ratio", "accuracy", "stderr", "n", "kl", "nll_ratio", "kv_bytes",
                            "kv_bytes_full"})
      EXPECT_TRUE(row.contains(key)) << key;
  // Sorted: niah first (first seen), full first, then h2o, window; ratio descending.
  const auto& r0 = j["rows"][0];
  EXPECT_EQ(r0["method"], "full");
  EXPECT_DOUBLE_EQ(r0["accuracy"].get<double>(), 0.95);
  const auto& r3 = j["rows"][3];
  EXPECT_EQ(r3["task"], "niah");
  EXPECT_EQ(r3["method"], "window");
  EXPECT_DOUBLE_EQ(r3["ratio"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r3["accuracy"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r3["stderr"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(r3["kl"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(r3["nll_ratio"].get<double>(), 1.3);
  EXPECT_DOUBLE_EQ(r3["kv_bytes"].get<double>(), 2.0 * 1024 * 1024);
  EXPECT_EQ(r3["n"], 20);
  const auto& f = j["rows"][5];
  EXPECT_EQ(f["task"], "fidelity");
  EXPECT_TRUE(f["accuracy"].is_null());
  EXPECT_TRUE(f["stderr"].is_null());
  fs::remove_all(dir);
}

TEST(EvalReport, CsvHasHeaderAndOneLinePerCellRoundTrip) {
  std::string dir = UniqueTempDir();
  std::string path = dir + "/report.csv";
  ASSERT_TRUE(WriteCsv(MakeReport(), path).ok());
  std::string text = Slurp(path);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  auto lines = Split(text.substr(0, text.size() - 1), '\n');
  ASSERT_EQ(lines.size(), 11u);
  EXPECT_EQ(lines[0],
            "task,method,ratio,n,accuracy,stderr,kl,kl_stderr,nll_ratio,nll_ratio_stderr,kv_bytes,kv_bytes_full,"
            "compress_ms,note,retention,retention_lo,retention_hi,retention_n");
  auto w = Split(lines[4], ',');  // niah window 0.5
  ASSERT_EQ(w.size(), 18u);
  EXPECT_EQ(w[0], "niah");
  EXPECT_EQ(w[1], "window");
  EXPECT_DOUBLE_EQ(std::stod(w[2]), 0.5);
  EXPECT_EQ(w[3], "20");
  EXPECT_DOUBLE_EQ(std::stod(w[4]), 0.5);
  EXPECT_DOUBLE_EQ(std::stod(w[6]), 0.4);
  EXPECT_DOUBLE_EQ(std::stod(w[7]), 0.04);
  EXPECT_DOUBLE_EQ(std::stod(w[8]), 1.3);
  EXPECT_DOUBLE_EQ(std::stod(w[10]), 2.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(std::stod(w[12]), 0.75);
  auto fid = Split(lines[6], ',');  // fidelity full: NaN accuracy -> empty
  EXPECT_EQ(fid[0], "fidelity");
  EXPECT_EQ(fid[4], "");
  EXPECT_EQ(fid[5], "");
  fs::remove_all(dir);
}

TEST(EvalReport, CsvQuotesCommasAndQuotes) {
  Report r;
  r.cells = {MakeCell("niah", "a,b \"q\"", 0.5, 0.5, 0.1, 1.0)};
  std::string dir = UniqueTempDir();
  ASSERT_TRUE(WriteCsv(r, dir + "/q.csv").ok());
  std::string text = Slurp(dir + "/q.csv");
  EXPECT_NE(text.find("\nniah,\"a,b \"\"q\"\"\",0.5,20,"), std::string::npos) << text;
  fs::remove_all(dir);
}

TEST(EvalReport, TableShowsMethodsAccuracyAndMeta) {
  std::string t = FormatTable(MakeReport());
  for (const char* s : {"stories260K.gguf", "essays", "query-agnostic", "2048", "1234", "full", "window", "h2o",
                        "fidelity", "50.0 \u00b1 10.0", "95.0", "0.4000", "1.300", "2.0 MiB", "50.0%"})
    EXPECT_NE(t.find(s), std::string::npos) << s << "\n" << t;
  EXPECT_EQ(t.find("nan"), std::string::npos) << t;
  EXPECT_EQ(t.back(), '\n');
  EXPECT_NE(t.substr(t.size() - 2), "\n\n");
  // Within niah: full, then h2o 0.5, h2o 0.25, window 0.5, window 0.25.
  size_t niah = t.find("\nniah");
  size_t full = t.find("full", niah), h2o = t.find("h2o", niah), window = t.find("window", niah);
  EXPECT_LT(full, h2o);
  EXPECT_LT(h2o, window);
  EXPECT_LT(t.find("75.0"), t.find("60.0"));  // h2o ratio 0.5 before 0.25
  // A NaN KL prints as "-" (so do retentions without samples behind them,
  // as these hand-made cells are: one more "-" is the KL's).
  auto dashes = [](const std::string& text) {
    int n = 0;
    for (size_t at = text.find("  -  "); at != std::string::npos; at = text.find("  -  ", at + 1)) ++n;
    return n;
  };
  Report r = MakeReport();
  r.cells[0].kl = kNaN;
  EXPECT_EQ(dashes(FormatTable(r)), dashes(t) + 1) << FormatTable(r);
}

TEST(EvalReport, PlotsArePngFiles) {
  std::string dir = UniqueTempDir();
  auto files = WritePlots(MakeReport(), dir + "/plots");
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    ASSERT_FALSE(files.ok());
    EXPECT_NE(files.error().message.find("gnuplot-nox"), std::string::npos);
    return;
  }
  ASSERT_TRUE(files.ok()) << files.error().message;
  int pngs = 0;
  for (const char* name : {"accuracy_niah.png", "kl.png", "nll_ratio.png"}) {
    std::string p = dir + "/plots/" + name;
    EXPECT_NE(std::find(files->begin(), files->end(), p), files->end()) << p;
    std::string bytes = Slurp(p);
    ASSERT_GT(bytes.size(), 1000u) << p;
    EXPECT_EQ(bytes.substr(0, 4), "\x89PNG") << p;
    ++pngs;
  }
  EXPECT_EQ(pngs, 3);
  EXPECT_FALSE(fs::exists(dir + "/plots/accuracy_fidelity.png"));
  for (const std::string& f : *files) EXPECT_TRUE(fs::exists(f)) << f;
  std::string dat = Slurp(dir + "/plots/accuracy_niah.dat");
  EXPECT_NE(dat.find("# index 2: method window\n0.25 0.25 0.1 20\n0.5 0.5 0.1 20\n"), std::string::npos) << dat;
  fs::remove_all(dir);
}

TEST(EvalReport, JsonToMissingDirectoryIsAnError) {
  std::string dir = UniqueTempDir();
  std::string path = dir + "/no/such/dir/report.json";
  Status st = WriteJson(MakeReport(), path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  Status st2 = WriteCsv(MakeReport(), path);
  EXPECT_FALSE(st2.ok());
  fs::remove_all(dir);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval
