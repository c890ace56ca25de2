// Context-calibrated compression end to end on the needle model: the session
// computes NLL(c) exactly as a full forward pass does and compresses at
// r*(tau, alpha NLL(c) + beta); `calibrate` produces points, fits and
// held-out checks, and its file reads back; compactor on a real prefill.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "engine/engine_impl.h"
#include "kvtrim/eval_calibrate.h"
#include "eval/metrics.h"
#include "eval/tasks.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kv/calibration.h"
#include "kv/compressor.h"
#include "kvtrim/calib_fit.h"
#include "model/config.h"
#include "test_util.h"

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::vector<int> Text(const Engine& e, int n) {
  auto hay = Haystack::Load(test::SharedPath("data/frankenstein.txt"));
  EXPECT_TRUE(hay.ok());
  std::vector<int> t = {e.impl().tokenizer().bos()};
  auto f = Filler(*hay, e.impl().tokenizer(), n - 1, 5);
  t.insert(t.end(), f.begin(), f.end());
  return t;
}

std::string WriteCalib(double alpha, double beta) {
  const std::string path = ::testing::TempDir() + "/kvtrim_session_calib.json";
  std::ofstream(path) << R"({"methods": {"compactor": {"alpha": )" << alpha << R"(, "beta": )" << beta << "}}}";
  return path;
}

TEST(CalibratedSession, ChoosesRStarFromTheContextNll) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::vector<int> toks = Text(*e, 300);
  // Reference NLL(c) from an independent full session's ForwardAll.
  auto full = Session::Create(*e, {});
  ASSERT_TRUE(full.ok());
  auto rows = full.value()->ForwardAll(toks);
  ASSERT_TRUE(rows.ok());
  const size_t V = e->impl().config().vocab;
  double ref = 0;
  for (size_t i = 0; i + 1 < toks.size(); ++i) ref += Nll(&(*rows)[i * V], V, toks[i + 1]);
  ref /= static_cast<double>(toks.size() - 1);

  SessionOptions so;
  so.ubatch = 128;  // NLL(c) spans ubatch boundaries
  so.kv.policy = "compactor";
  so.kv.quality = 0.9;
  so.kv.calibration = WriteCalib(0.8, -1.5);
  auto s = Session::Create(*e, so);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(s.value()->Prefill(std::vector<int>(toks.begin(), toks.begin() + 200)).ok());
  ASSERT_TRUE(s.value()->Prefill(std::vector<int>(toks.begin() + 200, toks.end())).ok());
  EXPECT_NEAR(s.value()->context_nll(), ref, 1e-4);
  ASSERT_TRUE(s.value()->Compress().ok());
  const double r = RetentionForQuality(0.9, 0.8 * ref - 1.5);
  EXPECT_NEAR(s.value()->chosen_ratio(), r, 1e-4);
  EXPECT_GT(r, 0.0);
  EXPECT_LT(r, 1.0);
  const int budget = static_cast<int>(std::ceil(s.value()->chosen_ratio() * 300 - 1e-9));
  EXPECT_EQ(s.value()->impl().cache().head(0, 0).size(), budget);
  // The last logits are the full prefill's last row (up to the ubatch split).
  ASSERT_EQ(s.value()->logits().size(), V);
  for (size_t i = 0; i < V; ++i) EXPECT_NEAR(s.value()->logits()[i], (*rows)[rows->size() - V + i], 1e-3);
}

TEST(CalibratedSession, Errors) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SessionOptions so;
  so.kv.policy = "snapkv";
  so.kv.quality = 0.9;
  EXPECT_FALSE(Session::Create(*e, so).ok());  // no calibration file
  so.kv.calibration = WriteCalib(1, 0);
  EXPECT_FALSE(Session::Create(*e, so).ok());  // snapkv is not in it
  so.kv.policy = "compactor";
  so.kv.quality = 1.5;
  EXPECT_FALSE(Session::Create(*e, so).ok());
  so.kv.quality = 0.9;
  auto s = Session::Create(*e, so);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s.value()->Prefill({e->impl().tokenizer().bos()}).ok());
  EXPECT_FALSE(s.value()->Compress().ok());  // one token: no NLL(c)
}

TEST(Calibrate, HeldOutShare) {
  int held = 0;
  for (int i = 0; i < 100; ++i) held += HeldOut(i, 0.25);
  EXPECT_EQ(held, 25);
  EXPECT_FALSE(HeldOut(0, 0.25));
  EXPECT_TRUE(HeldOut(3, 0.25));
  EXPECT_FALSE(HeldOut(7, 0.0));
}

TEST(Calibrate, SmallRunFitsChecksAndReadsBack) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  CalibrateOptions o;
  o.methods = {"compactor", "snapkv"};
  o.ratios = {0.25, 0.75};
  o.tasks = {TaskKind::kPasskey};
  o.samples = 4;
  o.context_tokens = 256;
  o.continuation = 32;
  o.haystacks = {test::SharedPath("data/frankenstein.txt")};
  auto r = RunCalibrate(*e, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->contexts.size(), 8u);  // 4 passkey + 4 plain text
  EXPECT_EQ(r->points.size(), 8u * 2 * 2);
  int held = 0;
  for (const auto& c : r->contexts) {
    held += c.held_out;
    EXPECT_GT(c.nll_c, 0.0);
  }
  EXPECT_EQ(held, 2);
  EXPECT_EQ(r->checks.size(), 2u * 2 * 2);  // held-out contexts x methods x taus
  for (const auto& p : r->points) EXPECT_TRUE(std::isfinite(p.y) && p.y > 0);
  for (const auto& c : r->checks) {
    const auto& f = r->fits.at(c.method);
    EXPECT_DOUBLE_EQ(c.r_star, RetentionForQuality(c.tau, f.alpha * c.nll_c + f.beta));
    EXPECT_EQ(c.met, c.y >= c.tau);
  }
  const std::string path = ::testing::TempDir() + "/kvtrim_calibrate_small.json";
  ASSERT_TRUE(WriteCalibration(r.value(), o, "needle-v1", path).ok());
  auto back = kv::LoadCalibration(path);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->model, "needle-v1");
  EXPECT_DOUBLE_EQ(back->Find("snapkv")->alpha, r->fits.at("snapkv").alpha);
  EXPECT_DOUBLE_EQ(back->Find("compactor")->beta, r->fits.at("compactor").beta);
  EXPECT_EQ(back->Find("compactor")->n, 12);  // 6 fit contexts x 2 ratios
  std::remove(path.c_str());
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval
