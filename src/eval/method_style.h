// How a method is drawn in the report plots: a (colour, marker, dash) triple
// and a line width, stable per method name across plots, reports and runs.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace kvtrim::eval {

struct MethodStyle {
  std::string color;  // "#rrggbb"
  int point = 7;      // gnuplot point type
  int dash = 1;       // gnuplot dash type
  double width = 1.5; // line width: bold for the seeds' and the field's strongest, thin for baselines
  bool operator==(const MethodStyle&) const = default;
};

// The style of a known method (a fixed table), or nullptr.
const MethodStyle* KnownMethodStyle(const std::string& method);
// Styles of one report's methods: the fixed table for known methods, and for
// other names a hash of the name, moved on to the next free triple where it
// would repeat another method's (known methods' triples are never reused).
std::map<std::string, MethodStyle> MethodStyles(const std::vector<std::string>& methods);
// Gnuplot line options: "lc rgb '#...' pt N dt N lw W".
std::string GnuplotStyle(const MethodStyle& s);

}  // namespace kvtrim::eval
