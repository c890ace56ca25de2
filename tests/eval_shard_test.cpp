// Sharded sweeps: shards merged equal the unsharded run bit for bit (in
// memory and through the report files), and bad merges are refused. The CLI
// records the command as typed and runs fidelity-only sweeps.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "kvtrim/eval_report.h"
#include "kvtrim/eval_sweep.h"
#include "test_util.h"

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

SweepOptions Opts() {
  SweepOptions o;
  o.methods = {"h2o", "snapkv", "window"};
  o.ratios = {0.5, 0.2};
  o.tasks = {TaskKind::kNiah, TaskKind::kPasskey};
  o.samples = 3;
  o.context_tokens = 256;
  o.fidelity_continuation = 48;
  o.haystack = test::SharedPath("data/frankenstein.txt");
  return o;
}

// Same bits, NaN equal to NaN.
void ExpectSame(double a, double b, const std::string& what) {
  if (std::isnan(a) && std::isnan(b)) return;
  EXPECT_EQ(a, b) << what;
}

void ExpectSameCells(const Report& a, const Report& b) {
  ASSERT_EQ(a.cells.size(), b.cells.size());
  for (size_t i = 0; i < a.cells.size(); ++i) {
    const Cell &x = a.cells[i], &y = b.cells[i];
    const std::string w = x.task + " " + x.method + " " + std::to_string(x.ratio);
    EXPECT_EQ(x.task, y.task);
    EXPECT_EQ(x.method, y.method);
    EXPECT_EQ(x.ratio, y.ratio);
    EXPECT_EQ(x.n, y.n) << w;
    EXPECT_EQ(x.note, y.note) << w;
    ExpectSame(x.accuracy, y.accuracy, w);
    ExpectSame(x.accuracy_se, y.accuracy_se, w);
    ExpectSame(x.kl, y.kl, w);
    ExpectSame(x.kl_se, y.kl_se, w);
    ExpectSame(x.nll_ratio, y.nll_ratio, w);
    ExpectSame(x.nll_ratio_se, y.nll_ratio_se, w);
    ExpectSame(x.kv_bytes, y.kv_bytes, w);
  }
}

TEST(EvalShard, TwoShardsMergedEqualTheWholeRun) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  auto whole = RunSweep(*e, Opts());
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  std::vector<Report> parts;
  for (int i = 0; i < 2; ++i) {
    SweepOptions o = Opts();
    o.shard_index = i, o.shard_count = 2;
    auto r = RunSweep(*e, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->meta.shard, std::to_string(i) + "/2");
    EXPECT_EQ(r->meta.units_total, whole->meta.units_total);
    EXPECT_LT(r->meta.units.size(), whole->meta.units.size());
    parts.push_back(std::move(r.value()));
  }
  EXPECT_EQ(whole->meta.units_total, 4 * 3);  // (niah, passkey, fidelity, fidelity-decode) x 3 samples
  // In memory, in either order.
  auto merged = MergeReports({parts[1], parts[0]});
  ASSERT_TRUE(merged.ok()) << merged.error().message;
  ExpectSameCells(whole.value(), merged.value());
  // Through the files eval writes (report.json + samples.jsonl).
  std::vector<Report> read;
  for (int i = 0; i < 2; ++i) {
    const std::string dir = testing::TempDir() + "/shard" + std::to_string(i);
    std::filesystem::create_directories(dir);
    ASSERT_TRUE(WriteJson(parts[i], dir + "/report.json").ok());
    ASSERT_TRUE(WriteSamples(parts[i], dir + "/samples.jsonl").ok());
    auto r = ReadReportDir(dir);
    ASSERT_TRUE(r.ok()) << r.error().message;
    read.push_back(std::move(r.value()));
  }
  auto from_files = MergeReports(read);
  ASSERT_TRUE(from_files.ok()) << from_files.error().message;
  ExpectSameCells(whole.value(), from_files.value());
  EXPECT_EQ(FormatTable(from_files.value()).substr(FormatTable(from_files.value()).find("\ntask")),
            FormatTable(merged.value()).substr(FormatTable(merged.value()).find("\ntask")));

  // Refused: a missing shard, a shard twice, a shard of another sweep.
  EXPECT_NE(MergeReports({parts[0]}).error().message.find("a shard is missing"), std::string::npos);
  EXPECT_NE(MergeReports({parts[0], parts[0]}).error().message.find("repeats unit"), std::string::npos);
  Report other = parts[1];
  other.meta.fingerprint += "x";
  EXPECT_NE(MergeReports({parts[0], other}).error().message.find("other options"), std::string::npos);
  SweepOptions bad = Opts();
  bad.shard_index = 2, bad.shard_count = 2;
  EXPECT_FALSE(RunSweep(*e, bad).ok());
}

std::string Cli() { return KVTRIM_CLI; }

TEST(EvalCli, CommandIsRecordedAsTypedAndTasksNoneRunsFidelityOnly) {
  const std::string dir = testing::TempDir() + "/evalcli";
  auto r = test::RunCommand(Cli() + " eval -m " + test::ModelPath("needle-v1-3.7M-f32.gguf") + " --haystack " +
                            test::SharedPath("data/frankenstein.txt") +
                            " --methods snapkv,h2o --ratios 0.5 --tasks none --fidelity-tasks fidelity --samples 1"
                            " --context 200 --continuation 32 --no-plots --out " + dir + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string table = test::ReadFile(dir + "/table.txt");
  EXPECT_NE(table.find("--methods snapkv,h2o --ratios 0.5 --tasks none --fidelity-tasks fidelity"), std::string::npos)
      << table;
  EXPECT_EQ(table.find("niah"), std::string::npos);
  EXPECT_EQ(table.find("fidelity-decode "), std::string::npos);
  EXPECT_NE(table.find("fidelity  snapkv"), std::string::npos) << table;
  EXPECT_TRUE(std::filesystem::exists(dir + "/samples.jsonl"));
  // An empty list is the same as none.
  auto r2 = test::RunCommand(Cli() + " eval -m " + test::ModelPath("needle-v1-3.7M-f32.gguf") + " --haystack " +
                             test::SharedPath("data/frankenstein.txt") +
                             " --methods window --ratios 0.5 --tasks '' --fidelity-tasks fidelity --samples 1"
                             " --context 200 --continuation 32 --no-plots --out " + dir + "2 2>&1");
  ASSERT_EQ(r2.code, 0) << r2.out;
  EXPECT_EQ(test::ReadFile(dir + "2/table.txt").find("niah"), std::string::npos);
  // Nothing at all to run, and a bad shard, are errors.
  auto r3 = test::RunCommand(Cli() + " eval --tasks none --no-fidelity --out " + dir + "3 2>&1");
  EXPECT_NE(r3.code, 0);
  EXPECT_NE(r3.out.find("nothing to run"), std::string::npos) << r3.out;
  auto r4 = test::RunCommand(Cli() + " eval --shard 3/2 --out " + dir + "4 2>&1");
  EXPECT_NE(r4.code, 0);
  EXPECT_NE(r4.out.find("0 <= i < n"), std::string::npos) << r4.out;
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

TEST(EvalQuality, ChosenRatioFollowsTheCalibration) {
  // alpha = 0, beta = 0: k = 0, so r* = TAU for every context (METHODS.md
  // section 3). A quality-0.5 sweep must then equal the fixed-ratio 0.5 sweep
  // bit for bit, with r* = 0.5 reported and y = 1 / NLL ratio per cell.
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::string calib = testing::TempDir() + "/calib-k0.json";
  std::ofstream(calib) << R"({"methods": {"h2o": {"alpha": 0, "beta": 0}, "window": {"alpha": 0, "beta": 0}}})";
  SweepOptions o = Opts();
  o.methods = {"h2o", "window"};
  o.ratios = {0.5};
  o.tasks = {TaskKind::kPasskey};
  o.samples = 2;
  auto fixed = RunSweep(*e, o);
  ASSERT_TRUE(fixed.ok()) << fixed.error().message;
  o.ratios = {0.25, 0.1};  // replaced by the target
  o.quality = 0.5;
  o.calibration = calib;
  auto q = RunSweep(*e, o);
  ASSERT_TRUE(q.ok()) << q.error().message;
  ASSERT_EQ(q->cells.size(), fixed->cells.size());
  EXPECT_EQ(q->meta.quality_target, 0.5);
  for (size_t i = 0; i < q->cells.size(); ++i) {
    const Cell &a = q->cells[i], &b = fixed->cells[i];
    EXPECT_EQ(a.method, b.method);
    if (!a.note.empty()) continue;  // n/a cells
    ExpectSame(a.kl, b.kl, a.task + " " + a.method);
    ExpectSame(a.kv_bytes, b.kv_bytes, a.task + " " + a.method);
    if (a.method == "full") {
      EXPECT_TRUE(std::isnan(a.chosen_ratio));
      continue;
    }
    EXPECT_EQ(a.ratio, 0.5);
    EXPECT_EQ(a.chosen_ratio, 0.5);
    // quality = mean of y = 1 / NLL ratio over the samples; below = #(y < TAU).
    double sum = 0;
    int n = 0, below = 0;
    for (const SampleRecord& r : q->samples)
      if (r.task == a.task && r.method == a.method && r.note.empty()) {
        EXPECT_EQ(r.chosen_ratio, 0.5);
        sum += 1.0 / r.nll_ratio, ++n, below += 1.0 / r.nll_ratio < 0.5;
      }
    ASSERT_EQ(n, a.n);
    EXPECT_DOUBLE_EQ(a.quality, sum / n);
    EXPECT_EQ(a.below_target, below);
  }
  o.methods = {"h2o", "snapkv"};
  auto missing = RunSweep(*e, o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("'snapkv' is not in the calibration file"), std::string::npos);
  o.calibration = "";
  EXPECT_NE(RunSweep(*e, o).error().message.find("needs --calibration"), std::string::npos);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval
