// Nonuniform head budgets wired through the profile (METHODS.md section 4):
// budgets from stored units sum to the uniform total and keep per-head minima,
// the profile round-trips them, a run holds exactly the budgeted entries per
// head, the measurement's baseline agrees with a plain compressed run, and a
// missing profile or budgets is a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kvtrim/head_budgets.h"
#include "kv/profile.h"
#include "kvtrim/engine.h"
#include "model/config.h"
#include "prose_prompt.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// Skewed units over 4 layers x 4 KV heads (two heads at zero: minima apply).
std::vector<int> SkewedUnits() { return {0, 1, 2, 3, 5, 8, 0, 1, 2, 3, 4, 6, 7, 2, 3, 4}; }

double RefKl(const float* p, const float* q, size_t V) {  // the textbook sum, in long double
  long double zp = 0, zq = 0, kl = 0;
  for (size_t i = 0; i < V; ++i) zp += std::exp((long double)p[i]), zq += std::exp((long double)q[i]);
  for (size_t i = 0; i < V; ++i) {
    const long double pp = std::exp((long double)p[i]) / zp, qq = std::exp((long double)q[i]) / zq;
    if (pp > 0) kl += pp * std::log(pp / qq);
  }
  return static_cast<double>(kl);
}

// Closed form: head i's share of the uniform total base * 16 is
// want_i = base * 16 * u_i / sum(u); without minima binding the budget is
// want_i rounded up or down; with them, heads above the minimum only lose.
void ExpectShare(int b, int i, const std::vector<int>& u, int base, int min_e) {
  const double sum_u = std::accumulate(u.begin(), u.end(), 0.0);
  bool binds = false;
  for (int x : u) binds |= base * 16.0 * x / sum_u < min_e;
  const double want = base * 16.0 * u[i] / sum_u;
  EXPECT_GE(b, min_e) << "head " << i;
  if (!binds) {
    EXPECT_LT(std::abs(b - want), 1.0) << "head " << i;
  } else if (want > min_e) {
    EXPECT_LE(b, std::ceil(want)) << "head " << i;
  }
}

TEST(HeadBudgetProfile, BudgetsSumToUniformTotalAndKeepMinima) {
  for (const char* policy : {"snapkv", "h2o"}) {
    KvOptions o;
    o.policy = policy;
    auto c = kv::Compressor::Create(o, 4, 4, 2, 32);
    ASSERT_TRUE(c.ok()) << c.error().message;
    const std::vector<int> u = SkewedUnits();
    ASSERT_TRUE(c.value()->SetHeadUnits(u).ok());
    EXPECT_TRUE(c.value()->head_budgets());
    const int min_e = std::max(1, c.value()->policy().traits().protected_entries);
    for (double r : {0.25, 0.1, 0.05, 0.02}) {
      const int n = 1000;
      c.value()->SetRatio(r);
      // Like the uniform budget, never below what the policy protects.
      const int base = std::max(min_e, static_cast<int>(std::ceil(r * n - 1e-9)));
      int total = 0;
      for (int i = 0; i < 16; ++i) {
        const int b = c.value()->HeadBudgetAt(i / 4, i % 4, n);
        total += b;
        EXPECT_GE(b, min_e) << policy << " r " << r << " head " << i;
        ExpectShare(b, i, u, base, min_e);
      }
      EXPECT_EQ(total, base * 16) << policy << " r " << r;
    }
    c.value()->SetRatio(1.0);  // the whole sequence: nothing compressed
    EXPECT_EQ(c.value()->HeadBudgetAt(0, 0, 300), 300);
  }
  KvOptions o;
  o.policy = "snapkv";
  auto c = kv::Compressor::Create(o, 4, 4, 2, 32);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c.value()->SetHeadUnits({1, 2, 3}).ok());  // 3 units for 16 heads
}

TEST(HeadBudgetProfile, NonIncreasingMajorantAndItsEffectOnTheSearch) {
  HeadSensitivity s;
  s.ratios = {0.025, 0.05, 0.1, 0.2, 0.4, 1.0};
  s.loss = {{0.0107, 0.0104, 0.0121, 0.0092, 0.0092, 0.0092}, {0.3, 0.2, 0.1, 0.05, 0.06, 0.0}};
  const HeadSensitivity m = NonIncreasing(s);
  EXPECT_EQ(m.loss[0], (std::vector<double>{0.0121, 0.0121, 0.0121, 0.0092, 0.0092, 0.0092}));
  EXPECT_EQ(m.loss[1], (std::vector<double>{0.3, 0.2, 0.1, 0.06, 0.06, 0.0}));
  // Two heads, 2 units each at the start (x = 0.1, loss 1 each). Raw: head 0
  // "loses nothing" at 0.05, so it gives a unit to head 1 (-1.0 - 0.05). On the
  // majorant head 0 is flat below 0.1 but gains 0.25 from a third unit while
  // head 1 loses only 0.2 giving it: the units go the other way.
  HeadSensitivity two;
  two.ratios = {0.05, 0.1, 0.2, 1.0};
  two.loss = {{0.0, 1.0, 0.5, 0.0}, {1.2, 1.0, 0.9, 0.0}};
  HeadBudgetOptions o;
  o.ratio = 0.1;
  o.units_per_head = 20;
  auto raw = SearchHeadBudgets(two, o);
  auto mono = SearchHeadBudgets(NonIncreasing(two), o);
  ASSERT_TRUE(raw.ok() && mono.ok());
  EXPECT_EQ(raw.value(), (std::vector<int>{1, 3}));
  EXPECT_EQ(mono.value(), (std::vector<int>{3, 1}));
}

TEST(HeadBudgetProfile, ProfileRoundTripsHeadBudgetsAndReadersAcceptNone) {
  StoredHeadBudgets b;
  b.ratio = 0.1;
  b.units = SkewedUnits();
  b.sensitivity.ratios = DefaultRatioGrid(0.1);
  b.sensitivity.loss.assign(16, std::vector<double>(b.sensitivity.ratios.size(), 0.5));
  b.sensitivity.loss[3][1] = 0.125;
  b.contexts = 4;
  b.context_tokens = 896;
  b.continuation_tokens = 64;
  b.seed = 7;
  b.seconds = 12.5;
  ModelProfile p;
  p.model = {"m.gguf", 1234, "0123456789abcdef"};
  p.n_layer = 4, p.n_head = 8, p.n_head_kv = 4, p.ctx = 1024, p.probe_len = 3;
  p.echo.assign(32, 0.25);
  p.induction.assign(32, 0.5);
  p.heads = SelectRetrievalHeads(p.echo, p.induction, 4, 8, 4, p.echo_frac, p.induction_frac);
  const std::string path = ::testing::TempDir() + "/hb_profile.json";
  ASSERT_TRUE(WriteProfile(path, p).ok());
  auto none = ReadProfile(path);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_FALSE(HasHeadBudgets(none.value()));
  EXPECT_FALSE(HeadBudgetsOf(none.value(), 16).ok());
  SetHeadBudgets(&p, b);
  ASSERT_TRUE(WriteProfile(path, p).ok());
  auto r = ReadProfile(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(HasHeadBudgets(r.value()));
  auto back = HeadBudgetsOf(r.value(), 16);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back.value().units, b.units);
  EXPECT_EQ(back.value().ratio, 0.1);
  EXPECT_EQ(back.value().sensitivity.ratios, b.sensitivity.ratios);
  EXPECT_EQ(back.value().sensitivity.loss, b.sensitivity.loss);
  EXPECT_EQ(back.value().seed, 7u);
  EXPECT_EQ(back.value().context_tokens, 896);
  EXPECT_EQ(kv::ProfileToJson(r.value()), kv::ProfileToJson(p));
  // Shapes are checked: wrong head count, units out of range.
  auto bad = HeadBudgetsOf(r.value(), 32);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("16 units for 32 KV heads"), std::string::npos) << bad.error().message;
  nlohmann::json j = nlohmann::json::parse(r.value().extra.at(kHeadBudgetsKey));
  j["units"][0] = b.units_per_head + 1;  // one unit over a whole head
  ModelProfile over = r.value();
  over.extra[kHeadBudgetsKey] = j.dump();
  EXPECT_FALSE(HeadBudgetsOf(over, 16).ok());
  std::remove(path.c_str());
}

// The skewed units, stored at 0.1 with curves on the default grid whose
// sensitivity grows with the head's index (another ratio searches them again).
StoredHeadBudgets SkewedBudgets() {
  StoredHeadBudgets b;
  b.ratio = 0.1;
  b.units = SkewedUnits();
  b.sensitivity.ratios = DefaultRatioGrid(0.1);
  b.sensitivity.ratios.push_back(1.0);
  for (int h = 0; h < 16; ++h) {
    std::vector<double> l;
    for (double x : b.sensitivity.ratios) l.push_back((0.2 + h) * (1 - x) * (1 - x));
    b.sensitivity.loss.push_back(l);
  }
  return b;
}

// A real profile of needle v1 with the skewed units stored (or none).
std::string WriteNeedleProfile(const Engine& e, bool with_budgets, const std::string& name) {
  auto p = e.Profile("");
  EXPECT_TRUE(p.ok());
  ModelProfile prof = *p.value();
  if (with_budgets) {
    SetHeadBudgets(&prof, SkewedBudgets());
  }
  const std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(WriteProfile(path, prof).ok());
  return path;
}

TEST(HeadBudgetProfile, RunHoldsExactlyTheBudgetedEntriesPerHead) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::string path = WriteNeedleProfile(*e, true, "hb_needle.json");
  const std::vector<int> prompt = test::ProsePrompt(*e, 600);
  for (double r : {0.25, 0.1}) {
    // 0.1: the stored units; 0.25: searched again on the stored curves.
    const std::vector<int> u = r == 0.1 ? SkewedUnits() : UnitsAtRatio(SkewedBudgets(), r).value();
    if (r != 0.1) {
      EXPECT_NE(u, SkewedUnits());
    }
    SessionOptions so;
    so.kv.policy = "snapkv";
    so.kv.ratio = r;
    so.kv.profile = path;
    so.kv.head_budgets = 1;
    auto s = Session::Create(*e, so);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_TRUE(s.value()->Prefill(prompt).ok());
    ASSERT_TRUE(s.value()->Compress().ok());
    const int min_e = std::max(1, s.value()->impl().compressor().policy().traits().protected_entries);
    const int base = std::max(min_e, static_cast<int>(std::ceil(r * 600 - 1e-9)));
    const std::vector<int> want = kv::budget::DistributeBudget(u, base, 600, min_e);
    int total = 0;
    for (int i = 0; i < 16; ++i) {
      const int held = s.value()->impl().cache().head(i / 4, i % 4).size();
      EXPECT_EQ(held, want[i]) << "r " << r << " head " << i;
      total += held;
      ExpectShare(held, i, u, base, min_e);
    }
    EXPECT_EQ(total, base * 16) << r;
  }
  // am: on by default with a profile that has budgets, off when asked.
  for (int mode : {-1, 0}) {
    SessionOptions so;
    so.kv.policy = "am";
    so.kv.ratio = 0.1;
    so.kv.profile = path;
    so.kv.head_budgets = mode;
    auto s = Session::Create(*e, so);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s.value()->impl().compressor().head_budgets(), mode == -1);
    auto f = s.value()->Fork(so.kv);  // forks attach them too
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f.value()->impl().compressor().head_budgets(), mode == -1);
  }
  std::remove(path.c_str());
}

TEST(HeadBudgetProfile, MissingProfileOrBudgetsIsAClearError) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SessionOptions so;
  so.kv.policy = "snapkv";
  so.kv.ratio = 0.1;
  so.kv.head_budgets = 1;
  auto s = Session::Create(*e, so);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("kvtrim profile --head-budgets"), std::string::npos) << s.error().message;
  const std::string path = WriteNeedleProfile(*e, false, "hb_none.json");
  so.kv.profile = path;
  s = Session::Create(*e, so);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("has no head budgets"), std::string::npos) << s.error().message;
  so.kv.policy = "am";  // am's default: no budgets in the profile, uniform
  so.kv.head_budgets = -1;
  s = Session::Create(*e, so);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_FALSE(s.value()->impl().compressor().head_budgets());
  std::remove(path.c_str());
  // Budgets measured from 0.025 up are not stretched to 0.02: the error names the grid.
  const std::string with = WriteNeedleProfile(*e, true, "hb_low.json");
  so.kv.profile = with;
  so.kv.ratio = 0.02;
  s = Session::Create(*e, so);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnreachable);
  EXPECT_NE(s.error().message.find("below the smallest measured ratio 0.025"), std::string::npos) << s.error().message;
  std::remove(with.c_str());
}

TEST(HeadBudgetProfile, MeasuredBaselineIsThePlainCompressedRunsKl) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const int cont = 12;
  const std::vector<int> ctx = test::ProsePrompt(*e, 600 + cont);
  HeadBudgetMeasureOptions mo;
  mo.ratio = 0.1;
  mo.policy.policy = "snapkv";
  mo.continuation = cont;
  auto hb = MeasureHeadBudgets(*e, {ctx}, mo);
  ASSERT_TRUE(hb.ok()) << hb.error().message;
  const StoredHeadBudgets& b = hb.value();
  std::vector<double> grid = DefaultRatioGrid(0.1);
  grid.push_back(1.0);  // measured, not assumed 0: the other heads stay at r
  ASSERT_EQ(b.sensitivity.ratios, grid);
  ASSERT_EQ(b.units.size(), 16u);
  EXPECT_EQ(std::accumulate(b.units.begin(), b.units.end(), 0), static_cast<int>(std::lround(0.1 * 128 * 16)));
  for (int u : b.units) EXPECT_GE(u, 1);
  // Reference: every head at r (a plain snapkv run) against the full cache.
  const std::vector<int> prefix(ctx.begin(), ctx.end() - cont), next(ctx.end() - cont, ctx.end());
  auto run = [&](const char* policy) {
    SessionOptions so;
    so.kv.policy = policy;
    so.kv.ratio = 0.1;
    auto s = Session::Create(*e, so);
    EXPECT_TRUE(s.ok());
    EXPECT_TRUE(s.value()->Prefill(prefix).ok());
    EXPECT_TRUE(s.value()->Compress().ok());
    return s.value()->ForwardAll(next).value();
  };
  const std::vector<float> full = run("full"), comp = run("snapkv");
  const size_t V = e->impl().config().vocab;
  double kl = 0;
  for (int t = 0; t < cont; ++t) kl += RefKl(full.data() + t * V, comp.data() + t * V, V);
  kl /= cont;
  EXPECT_GT(kl, 1e-4);
  const int base_idx = 2;  // {r/4, r/2, r, 2r, 4r}
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(b.sensitivity.loss[i][base_idx], kl, 1e-6 + 1e-4 * kl) << i;
  for (const auto& row : b.sensitivity.loss)
    for (double v : row) EXPECT_TRUE(std::isfinite(v) && v >= 0);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
