// Paired KL over the fidelity tasks (eval_paired.h: ComparePairedKl): two
// methods' per-sample KL against the full cache on the same contexts.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kvtrim/eval_paired.h"

namespace kvtrim::eval {

namespace {

using SampleKey = std::pair<std::string, int>;  // task, sample
using Cells = std::map<std::pair<std::string, double>, std::map<SampleKey, double>>;  // (task, ratio) -> KL by sample

// The KL of every measured fidelity sample (no answer to score) of a method.
Cells CollectKl(const Report& r, const std::string& method) {
  Cells out;
  for (const SampleRecord& s : r.samples)
    if (s.method == method && s.note.empty() && std::isnan(s.accuracy) && std::isfinite(s.kl))
      out[{s.task, s.ratio}][{s.task, s.sample}] = s.kl;
  return out;
}

PairedKl KlRow(const std::string& task, double ratio, const std::map<SampleKey, double>& ma,
               const std::map<SampleKey, double>& mb) {
  PairedKl row;
  row.task = task, row.ratio = ratio;
  double sa = 0, sb = 0, sd = 0;
  std::vector<double> diffs;
  for (const auto& [key, x] : ma) {
    auto y = mb.find(key);
    if (y == mb.end()) continue;
    const double d = x - y->second;
    ++row.n, sa += x, sb += y->second, sd += d;
    diffs.push_back(d);
    row.a_lower += d < 0, row.b_lower += d > 0;
  }
  if (row.n == 0) return row;
  row.kl_a = sa / row.n, row.kl_b = sb / row.n, row.diff = sd / row.n;
  if (row.n >= 2) {
    double ss = 0;  // two passes: no cancellation when the differences are nearly equal
    for (double d : diffs) ss += (d - row.diff) * (d - row.diff);
    const double var = ss / (row.n - 1);
    const double half = kZ95 * std::sqrt(var / row.n);
    row.ci = {row.diff - half, row.diff + half};
  }
  row.p = McNemarExactP(row.a_lower, row.b_lower);
  return row;
}

}  // namespace

Expected<std::vector<PairedKl>> ComparePairedKl(const Report& a, const std::string& method_a, const Report& b,
                                                const std::string& method_b) {
  KVTRIM_RETURN_IF_ERROR(SameContexts(a.meta, b.meta));
  const Cells ca = CollectKl(a, method_a), cb = CollectKl(b, method_b);
  std::vector<PairedKl> rows;
  for (const auto& [cell, ma] : ca) {
    // The full cache (ratio 1) pairs with every ratio of the other side.
    if (method_b == "full") {
      if (auto y = cb.find({cell.first, 1.0}); y != cb.end())
        if (PairedKl r = KlRow(cell.first, cell.second, ma, y->second); r.n > 0) rows.push_back(r);
    } else if (method_a == "full") {
      for (const auto& [cell_b, mb] : cb)
        if (cell_b.first == cell.first)
          if (PairedKl r = KlRow(cell.first, cell_b.second, ma, mb); r.n > 0) rows.push_back(r);
    } else if (auto y = cb.find(cell); y != cb.end()) {
      if (PairedKl r = KlRow(cell.first, cell.second, ma, y->second); r.n > 0) rows.push_back(r);
    }
  }
  std::sort(rows.begin(), rows.end(), [](const PairedKl& x, const PairedKl& y) {
    return std::make_tuple(x.task, -x.ratio) < std::make_tuple(y.task, -y.ratio);
  });
  return rows;
}

std::string FormatPairedKl(const std::vector<PairedKl>& rows, const std::string& name_a, const std::string& name_b) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "KL against the full cache, paired (A: %s, B: %s):\n", name_a.c_str(), name_b.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-16s %6s %4s %9s %9s  %-32s %7s %7s %8s\n", "task", "ratio", "n", "KL A", "KL B",
                "A - B [95% CI]", "A lower", "B lower", "sign p");
  out += line;
  for (const PairedKl& r : rows) {
    char ci[96];
    std::snprintf(ci, sizeof ci, "%+.4f [%+.4f, %+.4f]", r.diff, r.ci.lo, r.ci.hi);
    std::snprintf(line, sizeof line, "%-16s %6g %4d %9.4f %9.4f  %-32s %7d %7d %8.4f\n", r.task.c_str(), r.ratio, r.n,
                  r.kl_a, r.kl_b, ci, r.a_lower, r.b_lower, r.p);
    out += line;
  }
  return out;
}

}  // namespace kvtrim::eval
