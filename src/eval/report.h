// The results of an eval sweep and their renderings: a table for stdout,
// JSON, CSV, and plots of score against retention ratio through gnuplot.
#pragma once
#include <string>
#include <vector>

#include "kvtrim/status.h"

namespace kvtrim::eval {

// One (task, method, ratio) cell: means with standard errors over n samples.
struct Cell {
  std::string task;    // "niah", ..., or "fidelity" (KL/NLL on plain text)
  std::string method;  // policy name ("full" is the reference)
  double ratio = 1.0;
  int n = 0;
  double accuracy = 0, accuracy_se = 0;    // needle tasks only (NaN for fidelity)
  double kl = 0, kl_se = 0;                // mean KL(full || compressed) per position
  double nll_ratio = 1, nll_ratio_se = 0;  // NLL(compressed) / NLL(full)
  double kv_bytes = 0, kv_bytes_full = 0;  // mean bytes held after compression vs a full cache
  double compress_ms = 0;                  // mean prefill-time compression time
};

struct ReportMeta {
  std::string model, haystack, mode;  // mode: "query-agnostic" / "query-aware"
  int context_tokens = 0, samples = 0, threads = 0;
  unsigned long long seed = 0;
  double elapsed_s = 0;
  std::string command;  // the command line that produced it
};

struct Report {
  ReportMeta meta;
  std::vector<Cell> cells;
};

std::string FormatTable(const Report& r);
Status WriteJson(const Report& r, const std::string& path);
Status WriteCsv(const Report& r, const std::string& path);
// Writes <dir>/plot_<metric>.gp and renders <dir>/<metric>.png with gnuplot:
// one plot per metric (accuracy per task, kl, nll_ratio), one line per
// method, retention ratio on x. Returns the files written.
Expected<std::vector<std::string>> WritePlots(const Report& r, const std::string& dir);

}  // namespace kvtrim::eval
