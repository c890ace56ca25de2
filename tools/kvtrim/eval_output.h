// Writing an eval report folder (table, JSON, CSV, samples, plots): shared by
// `kvtrim eval` and `kvtrim eval-merge`, so a merged report looks exactly
// like a single run's.
#pragma once
#include <string>
#include <vector>

#include "kvtrim/eval_report.h"

namespace kvtrim::cli {

struct ReportPaths {
  std::string out, json, csv;  // json/csv empty: inside `out`
  bool plots = true;
};

// Prints the table and writes table.txt, report.json, report.csv,
// samples.jsonl and the plots (skipped with a warning if gnuplot fails).
Expected<std::vector<std::string>> WriteReportFolder(const eval::Report& r, const ReportPaths& p);

// The command line as typed, shell-quoted where needed ("kvtrim" for argv[0]).
std::string QuotedCommandLine();

}  // namespace kvtrim::cli
