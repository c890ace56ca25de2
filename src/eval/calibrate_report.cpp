// Renderings of a calibration: the fit file (JSON), a summary, gnuplot plots.
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kvtrim/eval_calibrate.h"

#include "eval/gnuplot.h"

namespace kvtrim::eval {
namespace {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

std::string Terminal() {
  auto t = PickPngTerminal();
  return (t.ok() ? t.value() : std::string("png")) + " size 900,600";
}

// The r* each context gets from its method's fit at tau.
std::vector<double> RStars(const CalibrateResult& r, const CalibFit& fit, double tau) {
  std::vector<double> out;
  for (const CalibContext& c : r.contexts)
    out.push_back(RetentionForQuality(tau, fit.alpha * c.nll_c + fit.beta));
  return out;
}

std::vector<double> Taus(const CalibrateResult& r) {
  std::vector<double> t;
  for (const auto& c : r.checks)
    if (std::find(t.begin(), t.end(), c.tau) == t.end()) t.push_back(c.tau);
  return t;
}

}  // namespace

Status WriteCalibration(const CalibrateResult& r, const CalibrateOptions& o, const std::string& model,
                        const std::string& path) {
  nlohmann::json j;
  j["format"] = "kvtrim-calibration-1";
  j["model"] = model;
  j["penalty"] = o.penalty;
  j["curve"] = "f(r) = (exp(r k - k) - exp(-k)) / (1 - exp(-k)), k = alpha * NLL(c) + beta";
  j["ratios"] = o.ratios;
  j["haystacks"] = o.haystacks;
  j["holdout"] = o.holdout;
  for (const auto& [m, f] : r.fits) {
    int n = 0;
    for (const auto& p : r.points) n += p.method == m && !p.held_out;
    j["methods"][m] = {{"alpha", f.alpha},       {"beta", f.beta},          {"rmse", f.rmse},
                       {"weighted_loss", f.weighted_loss}, {"over_share", f.over_share}, {"n", n},
                       {"iterations", f.iterations}, {"residuals", f.residuals}};
  }
  j["elapsed_s"] = r.elapsed_s;
  // Points and checks one per line (the header indented).
  std::string points, checks;
  for (const auto& p : r.points)
    points += std::string(points.empty() ? "" : ",\n") + "  " +
              nlohmann::json{{"method", p.method}, {"task", p.task}, {"context", p.context}, {"held_out", p.held_out},
                             {"r", p.r}, {"nll_c", p.nll_c}, {"y", p.y}}.dump();
  for (const auto& c : r.checks)
    checks += std::string(checks.empty() ? "" : ",\n") + "  " +
              nlohmann::json{{"method", c.method}, {"task", c.task}, {"context", c.context}, {"tau", c.tau},
                             {"nll_c", c.nll_c}, {"r_star", c.r_star}, {"y", c.y}, {"met", c.met}}.dump();
  std::string head = j.dump(1);
  head.pop_back();  // the closing brace
  std::ofstream f(path);
  if (!f) return MakeError("cannot write '" + path + "'");
  f << head << ",\n \"points\": [\n" << points << "\n ],\n \"held_out_checks\": [\n" << checks << "\n ]\n}\n";
  return f.good() ? Status{} : Status{MakeError("write to '" + path + "' failed")};
}

std::string FormatCalibration(const CalibrateResult& r) {
  std::ostringstream os;
  int held = 0;
  for (const auto& c : r.contexts) held += c.held_out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%zu contexts (%d held out of the fit), %.1f s\n", r.contexts.size(), held, r.elapsed_s);
  os << buf;
  for (const auto& [m, f] : r.fits) {
    std::snprintf(buf, sizeof buf, "%-12s alpha %8.4f beta %8.4f  rmse %.4f  over-predicted %.0f%% (penalty %g)\n",
                  m.c_str(), f.alpha, f.beta, f.rmse, 100 * f.over_share, f.penalty);
    os << buf;
    for (double tau : Taus(r)) {
      int n = 0, met = 0;
      std::vector<double> rs;
      for (const auto& c : r.checks)
        if (c.method == m && c.tau == tau) ++n, met += c.met, rs.push_back(c.r_star);
      const std::vector<double> all = RStars(r, f, tau);
      double mean = 0;
      for (double x : rs) mean += x;
      mean = rs.empty() ? NAN : mean / static_cast<double>(rs.size());
      std::snprintf(buf, sizeof buf,
                    "  tau %.2f: held-out met %d/%d (%.0f%%), r* mean %.3f; r* over all contexts: "
                    "min %.3f q1 %.3f median %.3f q3 %.3f max %.3f\n",
                    tau, met, n, n ? 100.0 * met / n : NAN, mean, Quantile(all, 0), Quantile(all, 0.25),
                    Quantile(all, 0.5), Quantile(all, 0.75), Quantile(all, 1));
      os << buf;
    }
  }
  return os.str();
}

Expected<std::vector<std::string>> WriteCalibrationPlots(const CalibrateResult& r, const std::string& dir) {
  std::vector<std::string> files;
  {  // predicted vs measured: one block per (method, fit/held-out)
    std::ofstream d(dir + "/calib_points.dat");
    std::ofstream gp(dir + "/plot_calibration.gp");
    gp << "set terminal " << Terminal() << "\nset output 'calibration.png'\nset key outside right\n"
       << "set xlabel 'predicted quality f(r; alpha NLL(c) + beta)'\nset ylabel 'measured y = NLL(full) / NLL(compressed)'\n"
       << "set title 'Calibration: predicted against measured quality'\nplot x with lines dt 2 lc rgb 'black' title 'y = x'";
    int block = 0;
    for (const auto& [m, f] : r.fits)
      for (int held = 0; held < 2; ++held) {
        d << "# " << m << (held ? " held-out" : " fit") << "\n";
        for (const auto& p : r.points)
          if (p.method == m && p.held_out == static_cast<bool>(held))
            d << QualityCurve(p.r, f.alpha * p.nll_c + f.beta) << " " << p.y << "\n";
        d << "\n\n";
        gp << ", 'calib_points.dat' index " << block++ << " with points pt " << (held ? 6 : 7) << " title '" << m
           << (held ? " (held out)" : " (fit)") << "'";
      }
    gp << "\n";
  }
  {  // CDF of r* over every context, per method and tau
    std::ofstream d(dir + "/rstar.dat");
    std::ofstream gp(dir + "/plot_rstar.gp");
    gp << "set terminal " << Terminal() << "\nset output 'rstar.png'\nset key outside right\n"
       << "set xlabel 'chosen retention ratio r*'\nset ylabel 'share of contexts'\nset xrange [0:1]\n"
       << "set title 'Distribution of r* over the contexts'\nplot ";
    int block = 0;
    for (const auto& [m, f] : r.fits)
      for (double tau : Taus(r)) {
        std::vector<double> rs = RStars(r, f, tau);
        std::sort(rs.begin(), rs.end());
        d << "# " << m << " tau " << tau << "\n";
        for (size_t i = 0; i < rs.size(); ++i) d << rs[i] << " " << (i + 1.0) / rs.size() << "\n";
        d << "\n\n";
        gp << (block ? ", " : "") << "'rstar.dat' index " << block << " with steps lw 2 title '" << m << " tau " << tau
           << "'";
        ++block;
      }
    gp << "\n";
  }
  for (const char* s : {"plot_calibration.gp", "plot_rstar.gp"}) {
    KVTRIM_RETURN_IF_ERROR(RunGnuplot(dir, s));
    files.push_back(dir + "/" + s);
  }
  files.push_back(dir + "/calibration.png");
  files.push_back(dir + "/rstar.png");
  return files;
}

}  // namespace kvtrim::eval
