// Paired statistics (include/kvtrim/eval_paired.h) against hand-computed
// cases: Wilson intervals (closed form at k = 0, k = n, n = 1), retention
// (all right, none right, the full cache wrong on every sample), McNemar's
// exact p from the binomial by hand, a method equal to the full cache
// (retention 1, p = 1), and the pairing of two runs' samples.
#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kvtrim/eval_paired.h"

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

TEST(PairedStats, WilsonByHand) {
  const double z2 = kZ95 * kZ95;
  // k = 0: [0, z^2 / (n + z^2)]; k = n: [n / (n + z^2), 1].
  Interval none = WilsonInterval(0, 10);
  EXPECT_DOUBLE_EQ(none.lo, 0.0);
  EXPECT_NEAR(none.hi, z2 / (10 + z2), 1e-12);
  EXPECT_NEAR(none.hi, 0.2775, 1e-4);  // the textbook value
  Interval all = WilsonInterval(10, 10);
  EXPECT_NEAR(all.lo, 10 / (10 + z2), 1e-12);
  EXPECT_DOUBLE_EQ(all.hi, 1.0);
  Interval one = WilsonInterval(1, 1);  // n = 1
  EXPECT_NEAR(one.lo, 1 / (1 + z2), 1e-12);
  EXPECT_DOUBLE_EQ(one.hi, 1.0);
  // k = 5 of 10: centred on 1/2, half-width z sqrt(n/4 + z^2/4) / (n + z^2).
  Interval half = WilsonInterval(5, 10);
  const double hw = kZ95 * std::sqrt(2.5 + z2 / 4) / (10 + z2);
  EXPECT_NEAR(half.lo, 0.5 - hw, 1e-12);
  EXPECT_NEAR(half.hi, 0.5 + hw, 1e-12);
  Interval empty = WilsonInterval(0, 0);
  EXPECT_EQ(empty.lo, 0.0);
  EXPECT_EQ(empty.hi, 1.0);
}

TEST(PairedStats, SamplesForWidthIsTheFirstNarrowEnough) {
  const int n = SamplesForWidth(0.95, 0.1);
  ASSERT_GT(n, 1);
  auto width = [](int k, int m) { Interval i = WilsonInterval(k, m); return i.hi - i.lo; };
  EXPECT_LE(width(static_cast<int>(std::lround(0.95 * n)), n), 0.1);
  EXPECT_GT(width(static_cast<int>(std::lround(0.95 * (n - 1))), n - 1), 0.1);
  EXPECT_EQ(SamplesForWidth(0.5, 0.0), -1);
  EXPECT_EQ(SamplesForWidth(1.5, 0.1), -1);
}

TEST(PairedStats, RetentionByHand) {
  // All right: 4 of 4 the full cache answers.
  auto all = RetentionOf({true, true, false, true, true}, {true, true, false, true, true});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->full_right, 4);
  EXPECT_EQ(all->kept, 4);
  EXPECT_DOUBLE_EQ(all->value, 1.0);
  EXPECT_NEAR(all->ci.lo, 4 / (4 + kZ95 * kZ95), 1e-12);
  // None right (the method's one answer is a sample the full cache misses).
  auto none = RetentionOf({true, true, false}, {false, false, true});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->full_right, 2);
  EXPECT_EQ(none->kept, 0);
  EXPECT_DOUBLE_EQ(none->value, 0.0);
  // The full cache wrong on every sample: no retention to speak of.
  auto undefined = RetentionOf({false, false}, {true, false});
  ASSERT_TRUE(undefined.ok());
  EXPECT_EQ(undefined->full_right, 0);
  EXPECT_TRUE(std::isnan(undefined->value));
  EXPECT_EQ(undefined->ci.lo, 0.0);
  EXPECT_EQ(undefined->ci.hi, 1.0);
  // n = 1.
  auto single = RetentionOf({true}, {true});
  ASSERT_TRUE(single.ok());
  EXPECT_DOUBLE_EQ(single->value, 1.0);
  EXPECT_FALSE(RetentionOf({true}, {true, false}).ok());
}

TEST(PairedStats, McNemarByHand) {
  // a only 1, b only 5: 2 (C(6,0) + C(6,1)) / 2^6 = 14/64.
  EXPECT_NEAR(McNemarExactP(1, 5), 14.0 / 64, 1e-12);
  EXPECT_NEAR(McNemarExactP(5, 1), 14.0 / 64, 1e-12);
  // 0 and 8: 2 / 2^8.
  EXPECT_NEAR(McNemarExactP(0, 8), 2.0 / 256, 1e-12);
  // Balanced: capped at 1; no discordant pair: 1.
  EXPECT_DOUBLE_EQ(McNemarExactP(3, 3), 1.0);
  EXPECT_DOUBLE_EQ(McNemarExactP(0, 0), 1.0);
  // Large n stays finite: 0 and 200 is 2^-199.
  EXPECT_NEAR(std::log2(McNemarExactP(0, 200)), -199, 1e-9);
  const std::vector<bool> a = {true, true, false, false, true, false, true};
  const std::vector<bool> b = {true, false, true, true, true, false, true};
  auto m = McNemarOf(a, b);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->both, 3);
  EXPECT_EQ(m->a_only, 1);
  EXPECT_EQ(m->b_only, 2);
  EXPECT_EQ(m->neither, 1);
  EXPECT_NEAR(m->p, 2 * (1 + 3) / 8.0, 1e-12);  // 2 (C(3,0) + C(3,1)) / 2^3, capped: 1
  EXPECT_DOUBLE_EQ(m->p, 1.0);
}

SampleRecord Rec(const std::string& task, const std::string& method, double ratio, int sample, double acc) {
  SampleRecord s;
  s.task = task, s.method = method, s.ratio = ratio, s.sample = sample, s.accuracy = acc;
  return s;
}

TEST(PairedStats, TwoRunsPairedSampleBySample) {
  Report a, b;
  a.meta.model = "/x/needle.gguf", b.meta.model = "needle.gguf";
  a.meta.seed = b.meta.seed = 1;
  const std::vector<double> full = {1, 1, 1, 0, 1, 1};
  const std::vector<double> before = {0, 1, 0, 0, 1, 0}, after = {1, 1, 1, 1, 1, 0};
  for (int i = 0; i < 6; ++i) {
    a.samples.push_back(Rec("niah", "full", 1, i, full[i]));
    b.samples.push_back(Rec("niah", "full", 1, i, full[i]));
    a.samples.push_back(Rec("niah", "kvzip", 0.1, i, before[i]));
    b.samples.push_back(Rec("niah", "kvzip", 0.1, i, after[i]));
  }
  a.samples.push_back(Rec("niah", "kvzip", 0.1, 7, 1));  // only in A: not paired
  auto rows = ComparePaired(a, "kvzip", b, "kvzip");
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 1u);
  const PairedRow& r = rows->front();
  EXPECT_EQ(r.n, 6);
  EXPECT_NEAR(r.accuracy_a, 2 / 6.0, 1e-12);
  EXPECT_NEAR(r.accuracy_b, 5 / 6.0, 1e-12);
  EXPECT_EQ(r.retention_a.full_right, 5);
  EXPECT_EQ(r.retention_a.kept, 2);
  EXPECT_EQ(r.retention_b.kept, 4);  // sample 3 is answered, but the full cache misses it
  EXPECT_EQ(r.test.a_only, 0);
  EXPECT_EQ(r.test.b_only, 3);
  EXPECT_NEAR(r.test.p, 2.0 / 8, 1e-12);
  // A method equal to the full cache: retention 1, p = 1.
  auto same = ComparePaired(b, "full", b, "full");
  ASSERT_TRUE(same.ok());
  EXPECT_DOUBLE_EQ(same->front().retention_a.value, 1.0);
  EXPECT_DOUBLE_EQ(same->front().test.p, 1.0);
  // Against the full cache of the same run: the full cache stands for every ratio.
  auto vs_full = ComparePaired(b, "full", b, "kvzip");
  ASSERT_TRUE(vs_full.ok());
  EXPECT_EQ(vs_full->front().ratio, 0.1);
  EXPECT_EQ(vs_full->front().test.a_only, 1);  // sample 5
  EXPECT_EQ(vs_full->front().test.b_only, 1);  // sample 3
  // Other contexts are refused, and so is nothing to pair.
  Report c = b;
  c.meta.seed = 2;
  EXPECT_FALSE(ComparePaired(a, "kvzip", c, "kvzip").ok());
  EXPECT_FALSE(ComparePaired(a, "snapkv", b, "kvzip").ok());
}

SampleRecord KlRec(const std::string& method, double ratio, int sample, double kl) {
  SampleRecord s = Rec("fidelity", method, ratio, sample, NAN);
  s.kl = kl;
  return s;
}

TEST(PairedStats, FidelityKlPairedByHand) {
  Report a, b;
  a.meta.seed = b.meta.seed = 1;
  // Differences A - B: -0.1, 0, -0.2, +0.3 (mean 0, sample sd sqrt(0.14 / 3)).
  const std::vector<double> ka = {0.1, 0.2, 0.3, 0.4}, kb = {0.2, 0.2, 0.5, 0.1};
  for (int i = 0; i < 4; ++i) {
    a.samples.push_back(KlRec("full", 1, i, 0));
    a.samples.push_back(KlRec("kvslimmer", 0.1, i, ka[i]));
    b.samples.push_back(KlRec("merge-mean", 0.1, i, kb[i]));
  }
  b.samples.push_back(KlRec("merge-mean", 0.1, 9, 5.0));  // only in B: not paired
  a.samples.push_back(Rec("niah", "kvslimmer", 0.1, 0, 1));  // a needle sample: not a KL row
  auto rows = ComparePairedKl(a, "kvslimmer", b, "merge-mean");
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 1u);
  const PairedKl& r = rows->front();
  EXPECT_EQ(r.task, "fidelity");
  EXPECT_EQ(r.n, 4);
  EXPECT_NEAR(r.kl_a, 0.25, 1e-12);
  EXPECT_NEAR(r.kl_b, 0.25, 1e-12);
  EXPECT_NEAR(r.diff, 0.0, 1e-12);
  const double half = 1.959963984540054 * std::sqrt(0.14 / 3 / 4);
  EXPECT_NEAR(r.ci.lo, -half, 1e-12);
  EXPECT_NEAR(r.ci.hi, half, 1e-12);
  EXPECT_EQ(r.a_lower, 2);
  EXPECT_EQ(r.b_lower, 1);
  EXPECT_DOUBLE_EQ(r.p, 1.0);  // 2 (C(3,0) + C(3,1)) / 8 = 1
  // Ten samples where A is lower every time: p = 2 / 2^10.
  Report c;
  c.meta.seed = 1;
  for (int i = 0; i < 10; ++i) {
    c.samples.push_back(KlRec("kvslimmer", 0.25, i, 0.01 * i));
    c.samples.push_back(KlRec("merge-mean", 0.25, i, 0.01 * i + 0.005));
  }
  auto ten = ComparePairedKl(c, "kvslimmer", c, "merge-mean");
  ASSERT_TRUE(ten.ok());
  ASSERT_EQ(ten->size(), 1u);
  EXPECT_EQ(ten->front().a_lower, 10);
  EXPECT_NEAR(ten->front().p, 2.0 / 1024, 1e-15);
  EXPECT_NEAR(ten->front().diff, -0.005, 1e-12);
  EXPECT_NEAR(ten->front().ci.hi - ten->front().ci.lo, 0.0, 1e-12);  // every difference equal
  // Against the full cache: its ratio-1 samples pair with every ratio.
  auto vs_full = ComparePairedKl(a, "kvslimmer", a, "full");
  ASSERT_TRUE(vs_full.ok());
  ASSERT_EQ(vs_full->size(), 1u);
  EXPECT_NEAR(vs_full->front().diff, 0.25, 1e-12);
  EXPECT_EQ(vs_full->front().b_lower, 4);
  // Other contexts are refused.
  Report d = b;
  d.meta.seed = 2;
  EXPECT_FALSE(ComparePairedKl(a, "kvslimmer", d, "merge-mean").ok());
}

TEST(PairedStats, CellsCarryRetentionAndItsInterval) {
  ReportMeta meta;
  meta.tasks = {"niah"}, meta.methods = {"full", "kvzip"}, meta.ratios = {0.1};
  const std::vector<double> full = {1, 1, 1, 0, 1, 1}, method = {0, 1, 0, 1, 1, 0};
  std::vector<SampleRecord> samples;
  for (int i = 0; i < 6; ++i) {
    samples.push_back(Rec("niah", "full", 1, i, full[i]));
    samples.push_back(Rec("niah", "kvzip", 0.1, i, method[i]));
    samples.back().unit = samples[samples.size() - 2].unit = i;
  }
  Report r;
  r.meta = meta;
  r.cells = SummarizeCells(meta, samples);
  ASSERT_EQ(r.cells.size(), 2u);
  EXPECT_EQ(r.cells[0].retention_n, 5);  // the full cache against itself
  EXPECT_DOUBLE_EQ(r.cells[0].retention, 1.0);
  EXPECT_EQ(r.cells[1].retention_n, 5);
  EXPECT_DOUBLE_EQ(r.cells[1].retention, 2 / 5.0);  // sample 3: answered, but the full cache misses it
  const Interval ci = WilsonInterval(2, 5);
  EXPECT_DOUBLE_EQ(r.cells[1].retention_lo, ci.lo);
  EXPECT_DOUBLE_EQ(r.cells[1].retention_hi, ci.hi);
  const std::string t = FormatTable(r);
  EXPECT_NE(t.find("retention [95% CI]"), std::string::npos) << t;
  EXPECT_NE(t.find("0.10 wide needs " + std::to_string(SamplesForWidth(0.95, 0.10)) + " of them"), std::string::npos)
      << t;
  char want[64];
  std::snprintf(want, sizeof want, "0.400 [%.3f, %.3f]", ci.lo, ci.hi);
  EXPECT_NE(t.find(want), std::string::npos) << t;
  // The plot of retention carries the interval: value, low, high per point.
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot not installed";
  const std::string dir = ::testing::TempDir() + "kvtrim-retention-plot";
  auto files = WritePlots(r, dir);
  ASSERT_TRUE(files.ok()) << files.error().message;
  std::ifstream dat(dir + "/retention_niah.dat");
  std::stringstream ss;
  ss << dat.rdbuf();
  EXPECT_NE(ss.str().find("columns: ratio value low high n"), std::string::npos) << ss.str();
  auto shortest = [](double v) {  // as the .dat writes numbers (exact, shortest)
    char b[64];
    return std::string(b, std::to_chars(b, b + sizeof b, v).ptr);
  };
  const std::string row = "0.1 0.4 " + shortest(ci.lo) + " " + shortest(ci.hi) + " 5";
  EXPECT_NE(ss.str().find(row), std::string::npos) << row << "\n" << ss.str();
  std::ifstream gp(dir + "/plot_retention_niah.gp");
  std::stringstream gs;
  gs << gp.rdbuf();
  EXPECT_NE(gs.str().find(":($4*S) with yerrorlines"), std::string::npos) << gs.str();
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval
