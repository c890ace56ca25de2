// Paired statistics (include/kvtrim/eval_paired.h): Wilson intervals,
// retention against the full cache, McNemar's exact test, and the paired
// comparison of two eval runs' samples. Written here: a few closed forms on
// counts, which no Debian library offers apart from a whole statistics
// package.
#include "kvtrim/eval_paired.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

namespace kvtrim::eval {

Interval WilsonInterval(int k, int n, double z) {
  if (n <= 0 || k < 0 || k > n) return {0.0, 1.0};
  const double nn = n, p = k / nn, z2 = z * z;
  const double center = (p + z2 / (2 * nn)) / (1 + z2 / nn);
  const double half = z / (1 + z2 / nn) * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

int SamplesForWidth(double p, double width, double z) {
  if (!(width > 0 && width <= 1) || !(p >= 0 && p <= 1)) return -1;
  for (int n = 1; n <= 1 << 20; ++n) {
    const Interval ci = WilsonInterval(static_cast<int>(std::lround(p * n)), n, z);
    if (ci.hi - ci.lo <= width) return n;
  }
  return -1;
}

Expected<Retention> RetentionOf(const std::vector<bool>& full, const std::vector<bool>& method) {
  if (full.size() != method.size())
    return MakeError("retention: " + std::to_string(full.size()) + " full-cache samples against " +
                     std::to_string(method.size()) + " of the method");
  Retention r;
  for (size_t i = 0; i < full.size(); ++i)
    if (full[i]) ++r.full_right, r.kept += method[i] ? 1 : 0;
  if (r.full_right > 0) r.value = static_cast<double>(r.kept) / r.full_right;
  r.ci = WilsonInterval(r.kept, r.full_right);
  return r;
}

double McNemarExactP(int a_only, int b_only) {
  const int n = a_only + b_only, k = std::min(a_only, b_only);
  if (n <= 0) return 1.0;
  // 2 P(X <= k), X ~ Binomial(n, 1/2), summed in log space (n may be large).
  double tail = 0;
  for (int i = 0; i <= k; ++i)
    tail += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) - n * std::log(2.0));
  return std::min(1.0, 2 * tail);
}

Expected<McNemar> McNemarOf(const std::vector<bool>& a, const std::vector<bool>& b) {
  if (a.size() != b.size())
    return MakeError("McNemar: " + std::to_string(a.size()) + " samples against " + std::to_string(b.size()));
  McNemar m;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] && b[i]) ++m.both;
    else if (a[i]) ++m.a_only;
    else if (b[i]) ++m.b_only;
    else ++m.neither;
  }
  m.p = McNemarExactP(m.a_only, m.b_only);
  return m;
}

namespace {

using SampleKey = std::pair<std::string, int>;  // task, sample

// Per (task, ratio): answered or not, by (task, sample); the full cache's by (task, sample).
struct Answers {
  std::map<std::pair<std::string, double>, std::map<SampleKey, bool>> method;
  std::map<SampleKey, bool> full;
};

Answers Collect(const Report& r, const std::string& method) {
  Answers out;
  for (const SampleRecord& s : r.samples) {
    if (!Scored(s)) continue;
    const bool answered = Answered(s);
    if (s.method == "full") out.full[{s.task, s.sample}] = answered;
    if (s.method == method) out.method[{s.task, s.ratio}][{s.task, s.sample}] = answered;
  }
  return out;
}

std::string Base(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// One (task, ratio) row over the samples both sides hold (and both full caches).
PairedRow Row(const std::string& task, double ratio, const std::map<SampleKey, bool>& ma, const std::map<SampleKey, bool>& mb,
              const Answers& a, const Answers& b) {
  std::vector<bool> va, vb, fa, fb;
  for (const auto& [key, x] : ma) {
    auto y = mb.find(key);
    auto f = a.full.find(key);
    auto g = b.full.find(key);
    if (y == mb.end() || f == a.full.end() || g == b.full.end()) continue;
    va.push_back(x), vb.push_back(y->second), fa.push_back(f->second), fb.push_back(g->second);
  }
  PairedRow row;
  row.task = task, row.ratio = ratio, row.n = static_cast<int>(va.size());
  auto mean = [](const std::vector<bool>& v) { return v.empty() ? NAN : std::count(v.begin(), v.end(), true) / double(v.size()); };
  row.accuracy_a = mean(va), row.accuracy_b = mean(vb);
  row.retention_a = RetentionOf(fa, va).value();  // sizes agree by construction
  row.retention_b = RetentionOf(fb, vb).value();
  row.test = McNemarOf(va, vb).value();
  return row;
}

}  // namespace

Status SameContexts(const ReportMeta& a, const ReportMeta& b) {
  auto differ = [](const std::string& what, const std::string& x, const std::string& y) {
    return MakeError("the runs' samples are not the same contexts: " + what + " " + x + " against " + y);
  };
  if (Base(a.model) != Base(b.model)) return differ("model", a.model, b.model);
  if (a.haystack != b.haystack) return differ("haystack", a.haystack, b.haystack);
  if (a.seed != b.seed) return differ("seed", std::to_string(a.seed), std::to_string(b.seed));
  if (a.context_tokens != b.context_tokens)
    return differ("context", std::to_string(a.context_tokens), std::to_string(b.context_tokens));
  return {};
}

Expected<std::vector<PairedRow>> ComparePaired(const Report& a, const std::string& method_a, const Report& b,
                                               const std::string& method_b) {
  KVTRIM_RETURN_IF_ERROR(SameContexts(a.meta, b.meta));
  const Answers aa = Collect(a, method_a), bb = Collect(b, method_b);
  std::vector<PairedRow> rows;
  auto add = [&](const std::pair<std::string, double>& ca, const std::pair<std::string, double>& cb, double ratio) {
    auto x = aa.method.find(ca);
    auto y = bb.method.find(cb);
    if (x == aa.method.end() || y == bb.method.end()) return;
    PairedRow row = Row(ca.first, ratio, x->second, y->second, aa, bb);
    if (row.n > 0) rows.push_back(std::move(row));
  };
  // The full cache (ratio 1) stands for every ratio of the other side.
  if (method_a == "full" && method_b != "full") {
    for (const auto& [cb, unused] : bb.method) add({cb.first, 1.0}, cb, cb.second);
  } else {
    for (const auto& [ca, unused] : aa.method) add(ca, {ca.first, method_b == "full" ? 1.0 : ca.second}, ca.second);
  }
  if (rows.empty())
    return MakeError("nothing to pair: no (task, ratio) holds samples of '" + method_a + "' in the first run and '" +
                     method_b + "' in the second");
  std::sort(rows.begin(), rows.end(), [](const PairedRow& x, const PairedRow& y) {
    return std::make_tuple(x.task, -x.ratio) < std::make_tuple(y.task, -y.ratio);
  });
  return rows;
}

std::string FormatPaired(const std::vector<PairedRow>& rows, const std::string& name_a, const std::string& name_b) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "A: %s\nB: %s\n", name_a.c_str(), name_b.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-14s %6s %4s %7s %7s  %-24s %-24s %6s %6s %8s\n", "task", "ratio", "n", "acc A %",
                "acc B %", "retention A [95% CI]", "retention B [95% CI]", "A only", "B only", "McNemar p");
  out += line;
  auto ret = [](const Retention& r) {
    char b[64];
    if (std::isnan(r.value)) std::snprintf(b, sizeof b, "- (full answers none)");
    else std::snprintf(b, sizeof b, "%.3f [%.3f, %.3f]", r.value, r.ci.lo, r.ci.hi);
    return std::string(b);
  };
  for (const PairedRow& r : rows) {
    std::snprintf(line, sizeof line, "%-14s %6g %4d %7.1f %7.1f  %-24s %-24s %6d %6d %8.4f\n", r.task.c_str(), r.ratio,
                  r.n, 100 * r.accuracy_a, 100 * r.accuracy_b, ret(r.retention_a).c_str(), ret(r.retention_b).c_str(),
                  r.test.a_only, r.test.b_only, r.test.p);
    out += line;
  }
  std::snprintf(line, sizeof line,
                "A retention interval 0.10 wide needs %d samples the full cache answers at 0.95, %d at 0.85; 0.05 "
                "wide: %d and %d.\n",
                SamplesForWidth(0.95, 0.10), SamplesForWidth(0.85, 0.10), SamplesForWidth(0.95, 0.05),
                SamplesForWidth(0.85, 0.05));
  out += line;
  return out;
}

}  // namespace kvtrim::eval
