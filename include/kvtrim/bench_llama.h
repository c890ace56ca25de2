// llama-bench-style throughput tests (`kvtrim bench -o md|json`): pp<P> times a
// prefill of P tokens, tg<N> times N decode steps, each after an untimed
// prefill of `depth` tokens (llama-bench's -d; its test names "pp512 @ d960").
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kvtrim/bench_repeat.h"
#include "kvtrim/clock.h"
#include "kvtrim/engine.h"

namespace kvtrim {

struct LlamaBenchOptions {
  std::vector<int> prompts = {512};  // pp tests (0 entries: none)
  std::vector<int> gens = {128};     // tg tests
  std::vector<int> depths = {0};
  int reps = 5;
  uint64_t seed = 1;
  double warmup_s = 0.5;  // untimed warm-up before the first test
  SessionOptions session;
  std::function<void(const std::string&)> progress;  // may be empty
  // The clock the samples are read from (null: SteadyClock()); a sample
  // repeats its work until it spans limits.min_steps of the clock's steps.
  const Clock* clock = nullptr;
  RepeatLimits limits;
};

struct LlamaBenchTest {
  int n_prompt = 0, n_gen = 0, n_depth = 0;
  std::vector<double> samples_ns;  // one per repetition: the time of one run of the test
  std::vector<int> samples_reps;   // runs of the test timed for each sample (bench_repeat.h)
  bool below_resolution = false;   // some sample spans fewer than limits.min_steps clock steps
  std::string name() const;        // "pp512", "tg64 @ d960"
  double avg_ns() const;
  double stddev_ns() const;
  std::vector<double> samples_ts() const;  // tokens / second per sample
  double avg_ts() const;
  double stddev_ts() const;
};

Expected<std::vector<LlamaBenchTest>> RunLlamaBench(const Engine& e, const LlamaBenchOptions& o);

// What llama-bench prints about the model and the run (-o md|json).
struct LlamaBenchMeta {
  std::string model_filename, model_type, type_kv;
  uint64_t model_size = 0, model_n_params = 0;
  int n_threads = 0;
  std::string kernels;  // dispatch path of the int8 kernels (KernelPathsLabel)
};
// model_type: the architecture, the parameters and the weight type holding
// most of them ("llama 3.7M Q8_0").
LlamaBenchMeta DescribeForBench(const Engine& e, const std::string& path, const std::string& kv_quant);

}  // namespace kvtrim

namespace kvtrim {

// Where a prefill of `tokens` tokens spends its time (mean over reps), from
// model::ForwardProfile: the weight products, attention, the statistics taps
// (their thread time divided by the pool's threads), and the rest (norms,
// RoPE, SwiGLU, residuals, embedding lookup, compression of the batch is not
// included: it runs after the prefill).
struct PrefillBreakdown {
  int tokens = 0;
  double total_s = 0, matmul_s = 0, attention_s = 0, stats_s = 0, other_s = 0;
};
Expected<PrefillBreakdown> MeasurePrefillBreakdown(const Engine& e, const SessionOptions& so, int tokens, int reps);

}  // namespace kvtrim
