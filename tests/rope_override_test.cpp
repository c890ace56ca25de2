// RoPE overrides from the command line (--rope-scaling, --rope-scale,
// --rope-freq-base, --yarn-orig-ctx; EngineOptions::rope): a model loaded
// with them computes the same logits as a file carrying the same keys, and
// an override that cannot apply is an error naming the flag.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/engine_impl.h"
#include "kvtrim/engine.h"
#include "model/config.h"
#include "test_util.h"
#include "tiny_llama.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

struct TempModel {
  std::string path;
  explicit TempModel(const test::TinySpec& s, const std::string& tag) {
    path = (std::filesystem::temp_directory_path() / (std::to_string(getpid()) + "-rope-" + tag + ".gguf")).string();
    std::ofstream(path, std::ios::binary) << test::MakeTinyModel(s).bytes;
  }
  ~TempModel() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

std::vector<float> Logits(const Engine& e) {
  std::vector<int> toks = {1};
  for (int i = 0; i < 40; ++i) toks.push_back(3 + (i * 37 + 11) % 500);
  auto s = Session::Create(e, {});
  EXPECT_TRUE(s.ok());
  auto all = s.value()->ForwardAll(toks);
  EXPECT_TRUE(all.ok());
  return all.value();
}

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(double{a[i]} - b[i]));
  return a.size() == b.size() ? d : INFINITY;
}

test::TinySpec Plain() {
  test::TinySpec s;
  s.base = 500000.f;
  s.rope_dims = 16;
  s.ctx = 64;
  return s;
}

void ExpectSameAsFile(const test::TinySpec& keyed, const RopeOverrides& o, const std::string& tag) {
  TempModel with_keys(keyed, tag + "-keys"), plain(Plain(), tag + "-plain");
  auto a = Engine::Load({with_keys.path, 1});
  auto b = Engine::Load({plain.path, 1, o});
  auto none = Engine::Load({plain.path, 1});
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok()) << b.error().message;
  const model::ModelConfig &ca = a.value()->impl().config(), &cb = b.value()->impl().config();
  EXPECT_EQ(ca.rope_scaling, cb.rope_scaling) << tag;
  EXPECT_EQ(ca.rope_freq_scale, cb.rope_freq_scale) << tag;
  EXPECT_EQ(ca.rope_base, cb.rope_base) << tag;
  EXPECT_EQ(ca.rope_orig_ctx, cb.rope_orig_ctx) << tag;
  const std::vector<float> la = Logits(*a.value()), lb = Logits(*b.value()), ln = Logits(*none.value());
  EXPECT_EQ(MaxDiff(la, lb), 0.0) << tag;       // bit for bit: the same config
  EXPECT_GT(MaxDiff(la, ln), 1e-3) << tag;      // and the keys matter on this model
}

TEST(RopeOverrides, YarnFlagsEqualAFileWithTheKeys) {
  test::TinySpec k = Plain();
  k.base = 10000.f, k.scaling_type = "yarn", k.factor = 4, k.orig_ctx = 16;
  ExpectSameAsFile(k, {"yarn", 4, 10000, 16}, "yarn");
}

TEST(RopeOverrides, LinearScaleAloneEqualsAFactorKey) {
  test::TinySpec k = Plain();
  k.factor = 2;  // no type key: llama.cpp reads linear
  ExpectSameAsFile(k, {"", 2, 0, 0}, "linear");
  k.scaling_type = "linear";
  ExpectSameAsFile(k, {"linear", 2, 0, 0}, "linear-typed");
}

TEST(RopeOverrides, WhatCannotApplyIsAnErrorNamingTheFlag) {
  TempModel plain(Plain(), "errors");
  // Built field by field: brace-initialised aggregates holding a string
  // inside a vector trip GCC 12's -Wmaybe-uninitialized.
  auto R = [](const std::string& scaling, double scale, double base, int orig) {
    RopeOverrides o;
    o.scaling = scaling, o.scale = scale, o.freq_base = base, o.yarn_orig_ctx = orig;
    return o;
  };
  struct Case {
    RopeOverrides o;
    std::string flag;
  };
  std::vector<Case> cases;
  cases.push_back({R("none", 2, 0, 0), "--rope-scale"});
  cases.push_back({R("", 0, 0, 32), "--yarn-orig-ctx"});
  cases.push_back({R("linear", 2, 0, 32), "--yarn-orig-ctx"});
  cases.push_back({R("yarn", 0, 0, 0), "--rope-scaling"});
  cases.push_back({R("ntk", 2, 0, 0), "--rope-scaling"});
  cases.push_back({R("", 0, 0.5, 0), "--rope-freq-base"});
  cases.push_back({R("", -1, 0, 0), "--rope-scale"});
  for (const Case& c : cases) {
    auto e = Engine::Load({plain.path, 1, c.o});
    ASSERT_FALSE(e.ok()) << c.flag;
    EXPECT_NE(e.error().message.find(c.flag), std::string::npos) << e.error().message;
  }
  // A file with YaRN keys takes a new factor alone, keeping its type and
  // original context.
  test::TinySpec k = Plain();
  k.scaling_type = "yarn", k.factor = 4, k.orig_ctx = 16;
  TempModel yarn(k, "yarn-refactor");
  auto e = Engine::Load({yarn.path, 1, {"", 8, 0, 0}});
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e.value()->impl().config().rope_scaling, "yarn");
  EXPECT_FLOAT_EQ(e.value()->impl().config().rope_freq_scale, 0.125f);
  EXPECT_EQ(e.value()->impl().config().rope_orig_ctx, 16);
}

TEST(RopeOverrides, ContextLengthGrowsAndTheOriginalContextStays) {
  TempModel plain(Plain(), "ctx");
  auto e = Engine::Load({plain.path, 1, {"yarn", 4, 0, 0}, 256});
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e.value()->impl().config().ctx, 256);
  EXPECT_EQ(e.value()->impl().config().rope_orig_ctx, 64);  // the trained context, YaRN's default
  auto s = Session::Create(*e.value(), {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value()->ctx(), 256);
  std::vector<int> toks(200, 5);
  toks[0] = 1;
  EXPECT_TRUE(s.value()->Prefill(toks).ok());  // past the trained 64 positions
  EXPECT_FALSE(Engine::Load({plain.path, 1, {}, -1}).ok());
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
