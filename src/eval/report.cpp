// Renderings of an eval sweep: stdout table, JSON, CSV, gnuplot plots.
#include "kvtrim/eval_report.h"
#include "kvtrim/eval_paired.h"

#include "eval/gnuplot.h"
#include "eval/method_style.h"
#include "kvtrim/clock.h"
#include "kv/compressor.h"

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace kvtrim::eval {
namespace {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

bool Bad(double v) { return !std::isfinite(v); }

std::string Printf(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, a);
  return buf;
}

// "mean ± se" with fmt per number; NaN prints as "-".
std::string PlusMinus(const char* fmt, double mean, double se, double scale = 1.0) {
  if (Bad(mean)) return "-";
  return Printf(fmt, mean * scale) + " \u00b1 " + (Bad(se) ? "-" : Printf(fmt, se * scale));
}

std::string HumanBytes(double b) {
  if (Bad(b)) return "-";
  if (b < 1024.0) return Printf("%.0f B", b);
  if (b < 1024.0 * 1024.0) return Printf("%.1f KiB", b / 1024.0);
  return Printf("%.1f MiB", b / (1024.0 * 1024.0));
}

// Shortest text that parses back to the same double; NaN/inf as empty.
std::string Exact(double v) {
  if (Bad(v)) return "";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

OJson JsonNum(double v) { return Bad(v) ? OJson(nullptr) : OJson(v); }

// Method order: "full" first, then by name.
bool MethodLess(const std::string& a, const std::string& b) {
  if (a == b) return false;
  if (a == "full") return true;
  if (b == "full") return false;
  return a < b;
}

// Cells grouped by task (first-appearance order), each group sorted by
// method then ratio descending.
std::vector<std::vector<const Cell*>> GroupedCells(const Report& r) {
  std::vector<std::string> tasks;
  for (const Cell& c : r.cells)
    if (std::find(tasks.begin(), tasks.end(), c.task) == tasks.end()) tasks.push_back(c.task);
  std::vector<std::vector<const Cell*>> groups;
  for (const std::string& t : tasks) {
    std::vector<const Cell*> g;
    for (const Cell& c : r.cells)
      if (c.task == t) g.push_back(&c);
    std::stable_sort(g.begin(), g.end(), [](const Cell* a, const Cell* b) {
      if (a->method != b->method) return MethodLess(a->method, b->method);
      return a->ratio > b->ratio;
    });
    groups.push_back(std::move(g));
  }
  return groups;
}

size_t DisplayWidth(const std::string& s) {  // UTF-8 code points
  size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
  return n;
}

// The note, then the policy counters per sample ("merges 2142 fallbacks 0").
std::string NoteText(const Cell& c) {
  std::string t = c.note;
  if (!Bad(c.chosen_ratio)) {
    t += (t.empty() ? "" : "; ") + Printf("r* %.3f", c.chosen_ratio) + Printf(" (%.3f", c.chosen_min) +
         Printf("-%.3f)", c.chosen_max) + Printf(", quality %.3f", c.quality) + ", below target in " +
         std::to_string(c.below_target) + " of " + std::to_string(c.n);
  }
  for (const auto& [name, v] : c.counters) t += (t.empty() ? "" : "; ") + name + " " + Printf("%.0f", v);
  return t;
}

std::vector<std::string> TableRow(const Cell& c) {
  std::string acc = (c.task.rfind("fidelity", 0) == 0 && Bad(c.accuracy))
                        ? ""
                        : PlusMinus("%.1f", c.accuracy, c.accuracy_se, 100.0);
  std::string pct = (c.kv_bytes_full > 0 && !Bad(c.kv_bytes))
                        ? Printf("%.1f%%", 100.0 * c.kv_bytes / c.kv_bytes_full)
                        : "-";
  const std::string ret = Bad(c.retention) ? (acc.empty() ? "" : "-")
                                            : Printf("%.3f", c.retention) + Printf(" [%.3f, ", c.retention_lo) +
                                                  Printf("%.3f]", c.retention_hi);
  return {c.task, c.method, Bad(c.ratio) ? "-" : Printf("%g", c.ratio), std::to_string(c.n), acc, ret,
          PlusMinus("%.4f", c.kl, c.kl_se), PlusMinus("%.3f", c.nll_ratio, c.nll_ratio_se),
          HumanBytes(c.kv_bytes), pct,
          Bad(c.compress_ms) ? "-" : Printf("%.2f", c.compress_ms) + (c.compress_below_res ? " (<res)" : ""),
          NoteText(c)};
}

std::string JoinRow(const std::vector<std::string>& row, const std::vector<size_t>& w) {
  std::string line;
  for (size_t i = 0; i < row.size(); ++i) {
    std::string pad(w[i] - DisplayWidth(row[i]), ' ');
    if (i > 0) line += "  ";
    line += (i < 2 || i + 1 == row.size()) ? row[i] + pad : pad + row[i];  // text left, numbers right
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "\n";
}

}  // namespace

std::string KvStorage(const std::string& quant, const std::string& quant_at, const std::string& rotate) {
  KvOptions o;  // the rule the cache follows (kv::RotatesKv), not a copy of it
  o.rotate = rotate;
  const Expected<GgmlType> t = kv::ParseKvQuant(quant == "none" ? "f32" : quant);
  const Expected<bool> r = t.ok() ? kv::RotatesKv(o, t.value()) : Expected<bool>(false);
  const bool rotated = r.ok() && r.value();
  if ((quant == "f32" || quant == "none") && !rotated)
    return "f32 (the reference: entries computed, compressed and kept in f32)";
  const std::string type = quant == "none" ? "f32" : quant;
  const std::string rot = rotated ? ", rotated (--kv-rotate)" : "";
  if (quant_at == "kept") return type + rot + " (computed and compressed in f32, then what is kept is quantized)";
  return type + rot + " (stored from the first token on)";
}

namespace {

std::string MetaBlock(const ReportMeta& m) {
  std::ostringstream os;
  os << "model:          " << m.model << "\n"
     << "haystack:       " << m.haystack << "\n"
     << "mode:           " << m.mode << "\n"
     << "context tokens: " << m.context_tokens << "\n"
     << "samples:        " << m.samples << "\n"
     << "seed:           " << m.seed << "\n"
     << "threads:        " << m.threads << "\n"
     << "elapsed:        " << Printf("%.1f", m.elapsed_s) << " s\n";
  if (m.clock_step_ns > 0)
    os << "clock step:     " << FormatStep(m.clock_step_ns) << " (\"(<res)\": a cell's times sum to fewer than "
       << kMinClockSteps << " steps, below the clock's resolution)\n";
  if (!m.kv_storage.empty()) os << "kv storage:     " << m.kv_storage << "\n";
  if (m.quality_target > 0)
    os << "quality target: " << m.quality_target << " (ratio column = the target; r* chosen per context)\n";
  if (!m.shard.empty()) os << "shard:          " << m.shard << " (" << m.units.size() << " of " << m.units_total << " units)\n";
  for (const auto& n : m.task_file_notes) os << "task file:      " << n << "\n";
  for (const auto& n : m.notes) os << "note:           " << n << "\n";
  if (!m.command.empty()) os << "command:        " << m.command << "\n";
  return os.str();
}

const std::vector<std::string>& CsvColumns() {
  static const std::vector<std::string> cols = {
      "task",      "method",           "ratio",    "n",             "accuracy",
      "stderr",    "kl",               "kl_stderr", "nll_ratio",    "nll_ratio_stderr",
      "kv_bytes",  "kv_bytes_full",    "compress_ms", "note", "retention", "retention_lo", "retention_hi",
      "retention_n"};
  return cols;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += (ch == '"') ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return MakeError("cannot open '" + path + "' for writing: " + std::strerror(errno));
  f << text;
  f.close();
  if (!f) return MakeError("failed writing '" + path + "'");
  return Status::Ok();
}

// ---- plots ----

struct Point {
  double x, y, se;
  int n;
  double lo = NAN, hi = NAN;  // an asymmetric interval (PlotSpec::interval)
};
struct Series {
  std::string method;
  std::vector<Point> pts;  // ratio ascending
};
struct PlotSpec {
  std::string name;     // png stem: "accuracy_niah", "kl", "nll_ratio", "summary"
  std::string dat;      // "<metric>_<task>.dat"
  std::string title, ylabel, yrange;
  std::string xlabel = "retention ratio";
  std::string xcolumn = "ratio";  // the .dat's first column
  double scale = 1.0;   // y multiplier in the script (accuracy -> percent)
  std::vector<Series> series;  // "full" (if any) first
  bool has_ref = false;
  double ref_y = 0;     // "full" at ratio 1
  bool ref_point = false;  // the summary: "full" drawn as a point at its bytes, not a line
  std::vector<std::pair<std::string, double>> xtics;  // empty: one tic per x, labelled "%g"
  bool interval = false;  // points carry [lo, hi] (retention's Wilson interval), not +- se
};

std::string SafeName(const std::string& s) {
  std::string out = s;
  for (char& ch : out)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
  return out;
}

// A title whose lines are joined with gnuplot's "\n" (string concatenation).
std::string GpTitle(const std::string& s) {
  std::string out;
  size_t start = 0;
  for (size_t nl; (nl = s.find('\n', start)) != std::string::npos; start = nl + 1)
    out += GnuplotQuote(s.substr(start, nl - start)) + ".\"\\n\".";
  return out + GnuplotQuote(s.substr(start));
}

// Gathers one metric of one task into per-method series; the reference
// value is the "full" cell nearest ratio 1.
void Collect(const Report& r, const std::string& task, double Cell::*mean, double Cell::*se,
             PlotSpec& spec) {
  std::map<std::string, Series, bool (*)(const std::string&, const std::string&)> by(MethodLess);
  double best = INFINITY;
  for (const Cell& c : r.cells) {
    if (c.task != task || Bad(c.*mean) || Bad(c.ratio) || c.ratio <= 0) continue;
    by[c.method].method = c.method;
    by[c.method].pts.push_back({c.ratio, c.*mean, Bad(c.*se) ? 0.0 : c.*se, c.n});
    if (c.method == "full" && std::fabs(c.ratio - 1.0) < best) {
      best = std::fabs(c.ratio - 1.0);
      spec.has_ref = true;
      spec.ref_y = c.*mean;
    }
  }
  for (auto& [m, s] : by) {
    std::sort(s.pts.begin(), s.pts.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
    spec.series.push_back(std::move(s));
  }
}

std::string DatText(const PlotSpec& p) {
  std::ostringstream os;
  std::string title = p.title;
  for (size_t nl = 0; (nl = title.find('\n', nl)) != std::string::npos; nl += 3) title.replace(nl, 1, "\n# ");
  os << "# " << title << "\n# columns: " << p.xcolumn << (p.interval ? " value low high n" : " mean stderr n")
     << "; one block per method (gnuplot index), blocks separated by two blank lines\n";
  for (size_t i = 0; i < p.series.size(); ++i) {
    if (i > 0) os << "\n\n";
    os << "# index " << i << ": method " << p.series[i].method << "\n";
    for (const Point& pt : p.series[i].pts) {
      os << Exact(pt.x) << " " << Exact(pt.y) << " ";
      if (p.interval) os << Exact(pt.lo) << " " << Exact(pt.hi) << " ";
      else os << Exact(pt.se) << " ";
      os << pt.n << "\n";
    }
  }
  return os.str();
}

// Plot order (the key's order): by value at the smallest x, highest first
// (ties: the next x), so the key reads top to bottom as the curves stand at
// the left edge; lines with no point at the smallest x come last.
std::vector<const Series*> KeyOrder(const PlotSpec& p) {
  std::vector<const Series*> order;
  for (const Series& s : p.series)
    if (s.method != "full" && !s.pts.empty()) order.push_back(&s);
  double x0 = INFINITY;
  for (const Series* s : order) x0 = std::min(x0, s->pts.front().x);
  std::stable_sort(order.begin(), order.end(), [x0](const Series* a, const Series* b) {
    const bool a0 = a->pts.front().x == x0, b0 = b->pts.front().x == x0;  // lines that start later go last
    if (a0 != b0) return a0;
    for (size_t i = 0; i < a->pts.size() && i < b->pts.size(); ++i)  // ties: the next x decides
      if (a->pts[i].y != b->pts[i].y) return a->pts[i].y > b->pts[i].y;
    return false;
  });
  return order;
}

// A small horizontal shift per method (x multiplied by this), in the order
// of the report's methods, so that equal points sit side by side.
std::map<std::string, double> XShifts(const PlotSpec& p) {
  std::vector<std::string> names;
  for (const Series& s : p.series)
    if (s.method != "full") names.push_back(s.method);
  std::map<std::string, double> out;
  const double step = names.size() > 1 ? std::min(0.05, 0.3 / static_cast<double>(names.size() - 1)) : 0.0;
  for (size_t k = 0; k < names.size(); ++k)
    out[names[k]] = std::exp2((static_cast<double>(k) - 0.5 * static_cast<double>(names.size() - 1)) * step);
  return out;
}

// A double-quoted gnuplot string, so that a newline in the label stays one.
std::string GpLabel(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) out += ch == '\n' ? std::string("\\n") : (ch == '"' || ch == '\\') ? std::string("\\") + ch : std::string(1, ch);
  return out + "\"";
}

std::string GpHeader(const PlotSpec& p, const std::string& terminal) {
  std::set<double> xs;
  for (const Series& s : p.series)
    for (const Point& pt : s.pts) xs.insert(pt.x);
  std::vector<std::pair<std::string, double>> tics = p.xtics;
  if (tics.empty())
    for (double x : xs) tics.emplace_back(Printf("%g", x), x);
  std::ostringstream os;
  os << "# Re-render: cd into this directory and run: gnuplot plot_" << p.name << ".gp\n"
     << "set terminal " << terminal << " size 1000,640 noenhanced\n"
     << "set output " << GnuplotQuote(p.name + ".png") << "\n"
     << "set title " << GpTitle(p.title) << "\n"
     << "set xlabel " << GnuplotQuote(p.xlabel) << "\nset ylabel " << GnuplotQuote(p.ylabel) << "\n"
     << "set logscale x 2\nset grid\nset key outside right top spacing 1.1 samplen 3\n"
     << "set xrange [" << Exact(*xs.begin() / 1.25) << ":" << Exact(*xs.rbegin() * 1.25) << "]\n";
  if (!p.xtics.empty()) os << "set xlabel offset 0,-1\nset bmargin 5\n";  // two-line tics
  if (p.yrange.empty()) os << "set offsets 0, 0, graph 0.05, graph 0.05\n";
  else os << "set yrange " << p.yrange << "\n";
  os << "set xtics (";
  for (size_t i = 0; i < tics.size(); ++i)
    os << (i ? ", " : "") << GpLabel(tics[i].first) << " " << Exact(tics[i].second);
  os << ")\nS = " << Exact(p.scale) << "\n";
  return os.str();
}

// One line per method in its own style (method_style.h), in key order.
std::string GpScript(const PlotSpec& p, const std::string& terminal) {
  std::vector<std::string> methods;
  for (const Series& s : p.series) methods.push_back(s.method);
  const auto styles = MethodStyles(methods);
  const auto shifts = XShifts(p);
  std::ostringstream os;
  os << GpHeader(p, terminal);
  if (p.ref_point && p.has_ref)
    for (const Series& s : p.series)
      if (s.method == "full" && !s.pts.empty())
        os << "set arrow from " << Exact(s.pts.back().x) << ", graph 0 to " << Exact(s.pts.back().x)
           << ", graph 1 nohead dt 2 lw 1 lc rgb 'black'\n";
  os << "plot ";
  std::string sep;
  // The reference first: first in the key, and drawn under the methods' lines.
  for (size_t i = 0; p.has_ref && p.ref_point && i < p.series.size(); ++i)
    if (p.series[i].method == "full") {
      os << GnuplotQuote(p.dat) << " index " << i << " using 1:($2*S) with points pt 3 ps 3 lw 2"
         << " lc rgb 'black' title 'full cache'";
      sep = ", \\\n     ";
      break;
    }
  if (p.has_ref && !p.ref_point) {
    os << Exact(p.ref_y) << "*S with lines dt 2 lw 2 lc rgb 'black' title 'full (ratio 1)'";
    sep = ", \\\n     ";
  }
  for (const Series* s : KeyOrder(p)) {
    const size_t i = static_cast<size_t>(s - p.series.data());
    const MethodStyle& st = styles.at(s->method);
    os << sep << GnuplotQuote(p.dat) << " index " << i << " using ($1*" << Exact(shifts.at(s->method))
       << (p.interval ? "):($2*S):($3*S):($4*S) with yerrorlines " : "):($2*S):($3*S) with yerrorlines ")
       << GnuplotStyle(st) << " ps " << (st.width > 2 ? "1.4" : "1.2")
       << " title " << GnuplotQuote(s->method);
    sep = ", \\\n     ";
  }
  os << "\n";
  return os.str();
}

std::string Subtitle(const ReportMeta& m) {
  const std::string model = m.model.substr(m.model.find_last_of('/') + 1);  // basename (npos + 1 = 0)
  return model + ", " + std::to_string(m.context_tokens) + " tokens, " + m.mode;
}

PlotSpec MakeSpec(std::string name, std::string dat, std::string title, std::string ylabel,
                  std::string yrange, double scale) {
  PlotSpec p;
  p.name = std::move(name);
  p.dat = std::move(dat);
  p.title = std::move(title);
  p.ylabel = std::move(ylabel);
  p.yrange = std::move(yrange);
  p.scale = scale;
  return p;
}

// The needle tasks: every task with an accuracy, in cell order.
std::vector<std::string> AccuracyTasks(const Report& r) {
  std::vector<std::string> tasks;
  for (const Cell& c : r.cells)
    if (c.task.rfind("fidelity", 0) != 0 && !Bad(c.accuracy) &&
        std::find(tasks.begin(), tasks.end(), c.task) == tasks.end())
      tasks.push_back(c.task);
  return tasks;
}

// Accuracy (mean over the needle tasks) against the KV bytes each method
// really holds (mean over those tasks' cells), one point per (method, ratio)
// measured on every task; "full" is the reference point.
PlotSpec SummarySpec(const Report& r) {
  const std::vector<std::string> tasks = AccuracyTasks(r);
  struct Sum { double acc = 0, se2 = 0, bytes = 0, full = 0; int tasks = 0, n = std::numeric_limits<int>::max(); };
  std::map<std::pair<std::string, double>, Sum> sums;
  for (const Cell& c : r.cells) {
    if (std::find(tasks.begin(), tasks.end(), c.task) == tasks.end() || Bad(c.accuracy) || Bad(c.kv_bytes) ||
        c.kv_bytes <= 0 || Bad(c.ratio))
      continue;
    Sum& s = sums[{c.method, c.ratio}];
    s.acc += c.accuracy, s.se2 += Bad(c.accuracy_se) ? 0 : c.accuracy_se * c.accuracy_se;
    s.bytes += c.kv_bytes, s.full = std::max(s.full, c.kv_bytes_full), s.n = std::min(s.n, c.n), ++s.tasks;
  }
  double full = 0;
  for (const auto& [key, s] : sums) full = std::max(full, s.full);
  const bool mib = full >= 1024.0 * 1024.0;
  const double unit = mib ? 1024.0 * 1024.0 : 1024.0;
  std::string list;
  for (const std::string& t : tasks) list += (list.empty() ? "" : ", ") + t;
  PlotSpec p = MakeSpec("summary", "summary.dat",
                        "accuracy vs KV cache held (mean over " + std::to_string(tasks.size()) + " needle tasks: " +
                            list + ")\n" + Subtitle(r.meta),
                        "accuracy (%), mean over the needle tasks", "[-2:102]", 100.0);
  p.xlabel = std::string("KV cache held (") + (mib ? "MiB" : "KiB") + ", log scale; tics: full x ratio)";
  p.xcolumn = mib ? "MiB_held" : "KiB_held";
  p.ref_point = true;
  std::map<std::string, Series, bool (*)(const std::string&, const std::string&)> by(MethodLess);
  for (const auto& [key, s] : sums) {
    if (s.tasks != static_cast<int>(tasks.size())) continue;  // some task not measured: no fair mean
    by[key.first].method = key.first;
    by[key.first].pts.push_back({s.bytes / s.tasks / unit, s.acc / s.tasks, std::sqrt(s.se2) / s.tasks, s.n});
    if (key.first == "full") p.has_ref = true, p.ref_y = s.acc / s.tasks;
  }
  for (auto& [m, s] : by) {
    std::sort(s.pts.begin(), s.pts.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
    p.series.push_back(std::move(s));
  }
  std::vector<double> ratios = {1.0};
  for (const auto& [key, s] : sums) ratios.push_back(key.second);
  std::sort(ratios.begin(), ratios.end());
  ratios.erase(std::unique(ratios.begin(), ratios.end()), ratios.end());
  for (double q : ratios)
    if (full > 0 && q > 0) p.xtics.emplace_back(Printf("%.3g", full * q / unit) + "\n" + (q == 1.0 ? std::string("full") : Printf("(%g)", q)), full * q / unit);
  return p;
}

// Retention against the ratio for one needle task, each point with its
// Wilson 95% interval; the full cache's 1 as the reference line.
PlotSpec RetentionSpec(const Report& r, const std::string& task) {
  PlotSpec p = MakeSpec("retention_" + SafeName(task), "retention_" + SafeName(task) + ".dat",
                        "retention (the share of the full cache's right answers kept), 95% Wilson intervals: " +
                            task + "\n" + Subtitle(r.meta),
                        "retention (%)", "[-2:102]", 100.0);
  p.interval = true;
  std::map<std::string, Series, bool (*)(const std::string&, const std::string&)> by(MethodLess);
  for (const Cell& c : r.cells) {
    if (c.task != task || Bad(c.retention) || Bad(c.ratio) || c.ratio <= 0) continue;
    if (c.method == "full") {
      p.has_ref = true, p.ref_y = c.retention;
      continue;
    }
    by[c.method].method = c.method;
    by[c.method].pts.push_back({c.ratio, c.retention, 0.0, c.retention_n, c.retention_lo, c.retention_hi});
  }
  for (auto& [m, s] : by) {
    std::sort(s.pts.begin(), s.pts.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
    p.series.push_back(std::move(s));
  }
  return p;
}

std::vector<PlotSpec> PlotSpecs(const Report& r) {
  std::vector<PlotSpec> specs;
  for (const auto& group : GroupedCells(r)) {
    const std::string& task = group.front()->task;
    if (task.rfind("fidelity", 0) == 0) continue;
    PlotSpec p = MakeSpec("accuracy_" + SafeName(task), "accuracy_" + SafeName(task) + ".dat",
                          "accuracy vs retention ratio: " + task + "\n" + Subtitle(r.meta),
                          "accuracy (%)", "[-2:102]", 100.0);
    Collect(r, task, &Cell::accuracy, &Cell::accuracy_se, p);
    specs.push_back(std::move(p));
    specs.push_back(RetentionSpec(r, task));
  }
  for (const std::string task : {"fidelity", "fidelity-decode"}) {
    const bool dec = task == "fidelity-decode";
    const std::string suffix = dec ? "_decode" : "", what = dec ? " (continuation decoded under the budget)" : "";
    PlotSpec kl = MakeSpec("kl" + suffix, "kl_" + task + ".dat",
                           "mean KL(full || compressed) per token" + what + "\n" + Subtitle(r.meta), "KL (nats)", "", 1.0);
    Collect(r, task, &Cell::kl, &Cell::kl_se, kl);
    specs.push_back(std::move(kl));
    PlotSpec nll = MakeSpec("nll_ratio" + suffix, "nll_ratio_" + task + ".dat",
                            "NLL(compressed) / NLL(full)" + what + "\n" + Subtitle(r.meta), "NLL ratio", "", 1.0);
    Collect(r, task, &Cell::nll_ratio, &Cell::nll_ratio_se, nll);
    specs.push_back(std::move(nll));
  }
  specs.push_back(SummarySpec(r));
  std::erase_if(specs, [](const PlotSpec& p) { return p.series.empty(); });
  return specs;
}

}  // namespace

// What the retention intervals need: the samples the full cache must
// answer for a Wilson interval 0.10 wide (printed when a cell has retention).
std::string RetentionLine(const Report& r) {
  const bool any = std::any_of(r.cells.begin(), r.cells.end(), [](const Cell& c) { return !Bad(c.retention); });
  if (!any) return "";
  return "retention:      Wilson 95% intervals over the samples the full cache answers; 0.10 wide needs " +
         std::to_string(SamplesForWidth(0.95, 0.10)) + " of them at retention 0.95, " +
         std::to_string(SamplesForWidth(0.85, 0.10)) + " at 0.85 (kvtrim eval-compare: paired tests)\n";
}

std::string FormatTable(const Report& r) {
  std::vector<std::vector<std::string>> rows = {{"task", "method", "ratio", "n", "accuracy % \u00b1 se",
                                                 "retention [95% CI]", "KL \u00b1 se", "NLL ratio \u00b1 se", "KV held",
                                                 "% of full", "compress ms", "note"}};
  std::vector<size_t> group_start;
  for (const auto& group : GroupedCells(r)) {
    group_start.push_back(rows.size());
    for (const Cell* c : group) rows.push_back(TableRow(*c));
  }
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], DisplayWidth(row[i]));
  size_t total = 2 * (w.size() - 1);
  for (size_t x : w) total += x;
  std::string out = MetaBlock(r.meta) + RetentionLine(r) + "\n" + JoinRow(rows[0], w) + std::string(total, '-') + "\n";
  for (size_t i = 1; i < rows.size(); ++i) {
    if (i != 1 && std::find(group_start.begin(), group_start.end(), i) != group_start.end())
      out += "\n";
    out += JoinRow(rows[i], w);
  }
  return out;
}

Status WriteJson(const Report& r, const std::string& path) {
  const ReportMeta& m = r.meta;
  OJson meta = {{"model", m.model},       {"haystack", m.haystack},
                {"mode", m.mode},         {"context_tokens", m.context_tokens},
                {"samples", m.samples},   {"seed", m.seed},
                {"threads", m.threads},   {"elapsed_s", JsonNum(m.elapsed_s)},
                {"command", m.command},   {"tasks", m.tasks},
                {"methods", m.methods},   {"ratios", m.ratios},
                {"shard", m.shard},       {"units_total", m.units_total},
                {"units", m.units},       {"fingerprint", m.fingerprint},
                {"max_context", m.max_context}, {"task_file_notes", m.task_file_notes},
                {"quality_target", m.quality_target}, {"clock_step_ns", m.clock_step_ns},
                {"kv_storage", m.kv_storage}, {"notes", m.notes}};
  OJson rows = OJson::array();
  for (const auto& group : GroupedCells(r)) {
    for (const Cell* c : group) {
      rows.push_back({{"task", c->task}, {"method", c->method}, {"ratio", JsonNum(c->ratio)},
                      {"n", c->n}, {"accuracy", JsonNum(c->accuracy)}, {"stderr", JsonNum(c->accuracy_se)},
                      {"kl", JsonNum(c->kl)}, {"kl_stderr", JsonNum(c->kl_se)},
                      {"nll_ratio", JsonNum(c->nll_ratio)}, {"nll_ratio_stderr", JsonNum(c->nll_ratio_se)},
                      {"kv_bytes", JsonNum(c->kv_bytes)}, {"kv_bytes_full", JsonNum(c->kv_bytes_full)},
                      {"kv_bytes_peak", JsonNum(c->kv_bytes_peak)},
                      {"compress_ms", JsonNum(c->compress_ms)},
                      {"compress_below_clock_resolution", c->compress_below_res}, {"note", c->note}});
      OJson counters = OJson::object();
      for (const auto& [name, v] : c->counters) counters[name] = JsonNum(v);
      rows.back()["counters"] = counters;
      if (!c->head_entries.empty()) rows.back()["head_entries"] = c->head_entries;
      if (!Bad(c->retention)) {
        rows.back()["retention"] = c->retention;
        rows.back()["retention_ci95"] = {c->retention_lo, c->retention_hi};
        rows.back()["retention_n"] = c->retention_n;
      }
      if (!c->needle_kept.empty()) {
        rows.back()["needle_kept"] = c->needle_kept_mean;
        rows.back()["needle_kept_heads"] = c->needle_kept;
      }
      if (!Bad(c->chosen_ratio)) {
        rows.back()["chosen_ratio"] = c->chosen_ratio;
        rows.back()["chosen_ratio_min"] = c->chosen_min;
        rows.back()["chosen_ratio_max"] = c->chosen_max;
        rows.back()["quality"] = JsonNum(c->quality);
        rows.back()["quality_stderr"] = JsonNum(c->quality_se);
        rows.back()["below_target"] = c->below_target;
      }
    }
  }
  OJson doc = {{"meta", meta}, {"rows", rows}};
  return WriteText(path, doc.dump(2) + "\n");
}

Status WriteCsv(const Report& r, const std::string& path) {
  std::string text;
  for (const std::string& col : CsvColumns()) text += (text.empty() ? "" : ",") + col;
  text += "\n";
  for (const auto& group : GroupedCells(r)) {
    for (const Cell* c : group) {
      std::vector<std::string> f = {CsvField(c->task), CsvField(c->method), Exact(c->ratio),
                                    std::to_string(c->n), Exact(c->accuracy), Exact(c->accuracy_se),
                                    Exact(c->kl), Exact(c->kl_se), Exact(c->nll_ratio),
                                    Exact(c->nll_ratio_se), Exact(c->kv_bytes),
                                    Exact(c->kv_bytes_full), Exact(c->compress_ms), CsvField(c->note),
                                    Exact(c->retention), Exact(c->retention_lo), Exact(c->retention_hi),
                                    std::to_string(c->retention_n)};
      for (size_t i = 0; i < f.size(); ++i) text += (i ? "," : "") + f[i];
      text += "\n";
    }
  }
  return WriteText(path, text);
}

Expected<std::vector<std::string>> WritePlots(const Report& r, const std::string& dir) {
  auto terminal = PickPngTerminal();
  if (!terminal) return terminal.error();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return MakeError("cannot create plot directory '" + dir + "': " + ec.message());
  std::vector<std::string> written;
  for (const PlotSpec& p : PlotSpecs(r)) {
    std::string gp = "plot_" + p.name + ".gp";
    KVTRIM_RETURN_IF_ERROR(WriteText(dir + "/" + p.dat, DatText(p)));
    KVTRIM_RETURN_IF_ERROR(WriteText(dir + "/" + gp, GpScript(p, *terminal)));
    KVTRIM_RETURN_IF_ERROR(RunGnuplot(dir, gp));
    std::string png = dir + "/" + p.name + ".png";
    auto size = fs::file_size(png, ec);
    if (ec || size == 0)
      return MakeError("gnuplot produced no image at '" + png + "'");
    for (const std::string& f : {p.dat, gp, p.name + ".png"}) written.push_back(dir + "/" + f);
  }
  return written;
}

}  // namespace kvtrim::eval
