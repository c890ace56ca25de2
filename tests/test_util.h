// Shared helpers for the tests: paths to the shared models and goldens.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kvtrim/bench.h"
#include "kvtrim/engine.h"

namespace kvtrim::test {

// Built by append: GCC 12 reports a false -Warray-bounds on `string + "/"` once
// inlined into some callers.
inline std::string SharedPath(const std::string& rel) {
  std::string path = KVTRIM_SHARED_DIR;
  path.append("/").append(rel);
  return path;
}
inline std::string ModelPath(const std::string& name) { return SharedPath("models/" + name); }

// n normal samples with standard deviation `scale` (kernel tests).
inline std::vector<float> RandVec(std::mt19937& rng, int n, float scale = 1.f) {
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline const nlohmann::json& Goldens() {
  static const nlohmann::json j = nlohmann::json::parse(ReadFile(ModelPath("goldens.json")));
  return j;
}

// RunBench options for a small model in a test: the given depths, `gen`
// decode steps, `reps` repetitions, a prefill of `prefill` tokens at depth
// 0 and no warm-up.
inline BenchOptions SmallBench(std::vector<int> depths, int gen, int reps, int prefill) {
  BenchOptions o;
  o.depths = std::move(depths);
  o.gen = gen;
  o.reps = reps;
  o.warmup_s = 0;
  o.prefill_tokens = prefill;
  return o;
}

inline std::unique_ptr<Engine> LoadEngine(const std::string& name, int threads = 2) {
  auto e = Engine::Load({ModelPath(name), threads});
  if (!e.ok()) ADD_FAILURE() << e.error().message;
  return e.ok() ? std::move(e.value()) : nullptr;
}

// A suite sharing one engine on the default model (needle v1, f32), loaded
// once for the suite; its tests are skipped where the model is absent.
class DefaultModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(ModelPath("needle-v1-3.7M-f32.gguf")))
      engine_ = LoadEngine("needle-v1-3.7M-f32.gguf", 2).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    if (!engine_) GTEST_SKIP() << "default model absent";
  }
  static const Engine& engine() { return *engine_; }
  inline static Engine* engine_ = nullptr;
};

// Runs a shell command, returns its stdout and exit code.
struct CmdResult {
  std::string out;
  int code = -1;
};
CmdResult RunCommand(const std::string& cmd);

}  // namespace kvtrim::test
