#include "eval_output.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"

namespace kvtrim::cli {

Expected<std::vector<std::string>> WriteReportFolder(const eval::Report& r, const ReportPaths& p) {
  std::error_code ec;
  std::filesystem::create_directories(p.out, ec);
  if (ec) return MakeError("cannot create '" + p.out + "': " + ec.message());
  const std::string table = eval::FormatTable(r);
  std::fputs(table.c_str(), stdout);
  std::ofstream(p.out + "/table.txt") << table;
  std::vector<std::string> files = {p.out + "/table.txt"};
  for (auto [path, writer] : {std::pair{p.json.empty() ? p.out + "/report.json" : p.json, &eval::WriteJson},
                              std::pair{p.csv.empty() ? p.out + "/report.csv" : p.csv, &eval::WriteCsv},
                              std::pair{p.out + "/samples.jsonl", &eval::WriteSamples}}) {
    Status st = writer(r, path);
    if (!st.ok()) return st.error();
    files.push_back(path);
  }
  if (p.plots) {
    auto plots = eval::WritePlots(r, p.out);
    if (!plots.ok()) std::fprintf(stderr, "kvtrim: plots skipped: %s\n", plots.error().message.c_str());
    else files.insert(files.end(), plots->begin(), plots->end());
  }
  return files;
}

std::string QuotedCommandLine() {
  std::string cmd = "kvtrim";
  const std::vector<std::string>& argv = Argv();
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                   "-_./,=:+@%") == std::string::npos;
    if (plain) {
      cmd += " " + a;
      continue;
    }
    std::string q = "'";
    for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    cmd += " " + q + "'";
  }
  return cmd;
}

}  // namespace kvtrim::cli
