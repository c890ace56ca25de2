#include "eval/method_style.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <set>
#include <tuple>

namespace kvtrim::eval {
namespace {

constexpr double kBold = 2.5, kNormal = 1.5, kLight = 1.0;

// Filled markers and solid lines for the seeds' methods and the field's
// strongest; open markers and dashes for variants; light colours and dots for
// the baselines. Families share a colour (snapkv/pyramidkv, kvslimmer/merge-mean,
// kvzip/kvzip+).
const std::map<std::string, MethodStyle>& Table() {
  static const std::map<std::string, MethodStyle> t = {
      {"kvzip", {"#d62728", 7, 1, kBold}},               // red, filled circle
      {"snapkv", {"#1f77b4", 5, 1, kBold}},              // blue, filled square
      {"expected-attention", {"#2ca02c", 9, 1, kBold}},  // green, filled triangle
      {"tova", {"#ff7f0e", 13, 1, kBold}},               // orange, filled diamond
      {"h2o", {"#9467bd", 7, 1, kBold}},                 // purple, filled circle
      {"scissorhands", {"#8c564b", 5, 1, kBold}},        // brown, filled square
      {"razor", {"#e377c2", 9, 1, kBold}},               // pink, filled triangle
      {"compactor", {"#17becf", 13, 1, kBold}},          // cyan, filled diamond
      {"am", {"#bcbd22", 11, 1, kBold}},                 // olive, filled triangle down
      {"kvslimmer", {"#1a1a6e", 11, 1, kBold}},          // navy, filled triangle down
      {"quantization", {"#000000", 15, 1, kBold}},       // black, filled pentagon
      {"pyramidkv", {"#1f77b4", 4, 2, kNormal}},         // snapkv's blue, open square, dashed
      {"kvzip+", {"#d62728", 6, 2, kNormal}},            // kvzip's red, open circle, dashed
      {"merge-mean", {"#1a1a6e", 10, 2, kNormal}},       // kvslimmer's navy, open triangle down, dashed
      {"knorm", {"#8c564b", 6, 4, kNormal}},             // brown, open circle, dash-dot
      {"keydiff", {"#e377c2", 8, 4, kNormal}},           // pink, open triangle, dash-dot
      {"window", {"#7f7f7f", 2, 3, kLight}},             // grey, x, dotted
      {"random", {"#6baed6", 1, 3, kLight}},             // light blue, +, dotted
      {"lru", {"#c49c94", 3, 3, kLight}},                // light brown, *, dotted
  };
  return t;
}

// Colours, open markers and dashes of names outside the table.
const std::vector<std::string>& HashColors() {
  static const std::vector<std::string> c = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd",
                                             "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
  return c;
}
constexpr int kHashPoints[] = {4, 6, 8, 10, 12, 14};
constexpr int kHashDashes[] = {2, 4, 5};
constexpr size_t kHashSlots = 10 * 6 * 3;

MethodStyle Slot(size_t i) {
  const size_t colors = HashColors().size();
  return {HashColors()[i % colors], kHashPoints[(i / colors) % 6], kHashDashes[(i / colors / 6) % 3], kNormal};
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

using Triple = std::tuple<std::string, int, int>;
Triple Key(const MethodStyle& s) { return {s.color, s.point, s.dash}; }

}  // namespace

const MethodStyle* KnownMethodStyle(const std::string& method) {
  auto it = Table().find(method);
  return it == Table().end() ? nullptr : &it->second;
}

std::map<std::string, MethodStyle> MethodStyles(const std::vector<std::string>& methods) {
  std::set<Triple> taken;
  for (const auto& [name, s] : Table()) taken.insert(Key(s));
  std::vector<std::string> names(methods);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::map<std::string, MethodStyle> out;
  for (const std::string& m : names) {
    if (const MethodStyle* k = KnownMethodStyle(m)) {
      out[m] = *k;
      continue;
    }
    size_t i = Fnv1a(m) % kHashSlots;
    for (size_t tries = 0; tries < kHashSlots && taken.count(Key(Slot(i))); ++tries) i = (i + 1) % kHashSlots;
    out[m] = Slot(i);  // past kHashSlots distinct names a triple repeats
    taken.insert(Key(out[m]));
  }
  return out;
}

std::string GnuplotStyle(const MethodStyle& s) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "lc rgb '%s' pt %d dt %d lw %g", s.color.c_str(), s.point, s.dash, s.width);
  return buf;
}

}  // namespace kvtrim::eval
