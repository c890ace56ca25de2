// Heatmaps of a per-(layer, head) score (the profile's echo and induction
// scores): a gnuplot script beside its data, rendered to PNG.
#pragma once
#include <string>
#include <vector>

#include "kvtrim/status.h"

namespace kvtrim::eval {

struct Heatmap {
  std::string name;     // file stem: <dir>/<name>.dat, plot_<name>.gp, <name>.png
  std::string title;
  std::string x_label = "query head", y_label = "layer";
  int rows = 0, cols = 0;            // layers x heads
  std::vector<double> values;        // [rows * cols], row-major
  std::vector<char> marked;          // [rows * cols] cells outlined (retrieval heads), or empty
};

// The gnuplot script for `h` (reads <name>.dat from its own directory).
std::string HeatmapScript(const Heatmap& h, const std::string& terminal);
// Writes the data and the script into dir and renders the PNG; returns the
// files written.
Expected<std::vector<std::string>> WriteHeatmap(const Heatmap& h, const std::string& dir);

}  // namespace kvtrim::eval
