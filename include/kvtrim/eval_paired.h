// Paired statistics over the samples of an eval: every method runs on the
// same contexts as the full cache, so its answers can be compared sample by
// sample. Retention: among the samples the full cache answers, the share the
// method also answers, with a Wilson 95% interval (it narrows with the
// number of samples the full cache gets right). McNemar's exact test: two
// methods (or two settings) on the same samples, from the samples only one
// of them answers.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "kvtrim/eval_report.h"
#include "kvtrim/status.h"

namespace kvtrim::eval {

inline constexpr double kZ95 = 1.959963984540054;  // the normal's 97.5% quantile

struct Interval {
  double lo = NAN, hi = NAN;
};

// Wilson score interval of k successes in n trials; [0, 1] when n = 0.
Interval WilsonInterval(int k, int n, double z = kZ95);

// The fewest trials whose Wilson interval at proportion p is at most
// `width` wide (the sample count a cell needs for a stated width); -1 when
// width is not in (0, 1] or p not in [0, 1].
int SamplesForWidth(double p, double width, double z = kZ95);

struct Retention {
  int full_right = 0;  // samples the full cache answers
  int kept = 0;        // ... of which the method answers too
  double value = NAN;  // kept / full_right; NaN when the full cache answers none
  Interval ci;         // Wilson 95% over full_right
};
// full[i], method[i]: whether each answered sample i (the same contexts).
Expected<Retention> RetentionOf(const std::vector<bool>& full, const std::vector<bool>& method);

struct McNemar {
  int both = 0, a_only = 0, b_only = 0, neither = 0;
  double p = 1;  // two-sided exact p-value (binomial on the discordant pairs, 1 when there are none)
};
// Two-sided exact McNemar p-value from the discordant counts.
double McNemarExactP(int a_only, int b_only);
Expected<McNemar> McNemarOf(const std::vector<bool>& a, const std::vector<bool>& b);

// A sample counts as answered when its accuracy is at least this (the
// needle tasks score each sample 0 or 1).
inline constexpr double kAnsweredAt = 0.5;
// Whether a sample takes part in paired statistics: measured (no note) on a
// task that scores answers (accuracy not NaN, unlike the fidelity tasks).
inline bool Scored(const SampleRecord& s) { return s.note.empty() && !std::isnan(s.accuracy); }
inline bool Answered(const SampleRecord& s) { return s.accuracy >= kAnsweredAt; }

// Whether two runs' samples are the same contexts (model file name,
// haystack, seed, context length); an error naming what differs.
Status SameContexts(const ReportMeta& a, const ReportMeta& b);

// One (task, ratio) row of a paired comparison of method A of report `a`
// with method B of report `b` (the same report twice compares two methods
// of one run); each side's retention is against its own run's full cache.
struct PairedRow {
  std::string task;
  double ratio = 1;
  int n = 0;                        // samples present on both sides
  double accuracy_a = NAN, accuracy_b = NAN;
  Retention retention_a, retention_b;
  McNemar test;
};
// Rows for every (task, ratio) both sides measured, on the samples (task,
// sample index) both hold. An error when the runs' samples do not name the
// same contexts (other model, seed or context length) or nothing pairs.
Expected<std::vector<PairedRow>> ComparePaired(const Report& a, const std::string& method_a, const Report& b,
                                               const std::string& method_b);
// The rows as a table (one line each, intervals and p-values).
std::string FormatPaired(const std::vector<PairedRow>& rows, const std::string& name_a, const std::string& name_b);

// The fidelity tasks (no answers to count, a KL per sample): the two
// methods' KL against the full cache on the same samples. The mean
// difference with its 95% interval (normal approximation: mean +- 1.96
// standard errors of the per-sample differences) and the exact two-sided
// sign test on the samples where one side's KL is the lower (ties count for
// neither), which assumes nothing about the differences' distribution.
struct PairedKl {
  std::string task;
  double ratio = 1;
  int n = 0;                      // samples present on both sides
  double kl_a = NAN, kl_b = NAN;  // mean KL
  double diff = NAN;              // mean of kl_a - kl_b over the samples
  Interval ci;                    // 95% interval of that mean (NaN for n < 2)
  int a_lower = 0, b_lower = 0;   // samples where A's (B's) KL is the lower
  double p = 1;                   // exact two-sided sign test (McNemarExactP on those counts)
};
// Rows for every (fidelity task, ratio) both sides measured, on the samples
// both hold; the same context check as ComparePaired. Empty when neither run
// has fidelity samples of the methods.
Expected<std::vector<PairedKl>> ComparePairedKl(const Report& a, const std::string& method_a, const Report& b,
                                                const std::string& method_b);
std::string FormatPairedKl(const std::vector<PairedKl>& rows, const std::string& name_a, const std::string& name_b);

}  // namespace kvtrim::eval
