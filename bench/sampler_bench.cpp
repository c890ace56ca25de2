// The sampler's cost per token (src/engine/sampler.cpp) at real vocabulary
// sizes (SmolLM2 49,152; Llama 3 128,256) on flat logits, as noise weights
// give and as make top-p keep most of the vocabulary: the default chain
// (top-k 40), top-k off (top-p alone over the whole vocabulary), min-p, the
// repetition penalty, and greedy. Run: build/bench/kvtrim_sampler_bench.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kvtrim/engine.h"

namespace {

// Args: vocabulary, chain (0 greedy, 1 defaults, 2 top-k off, 3 top-k off + min-p 0.05, 4 defaults + penalty 1.1, 5 every filter off).
void BM_Sample(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.f, 0.5f);  // flat: the nucleus holds most of the vocabulary
  std::vector<float> logits(n);
  for (float& x : logits) x = d(rng);
  kvtrim::SamplingOptions o;
  switch (st.range(1)) {
    case 0: o.temp = 0; break;
    case 2: o.top_k = 0; break;
    case 3: o.top_k = 0, o.min_p = 0.05f; break;
    case 4: o.repeat_penalty = 1.1f; break;
    case 5: o.top_k = 0, o.top_p = 1.f; break;
    default: break;
  }
  kvtrim::Sampler s(o);
  for (int i = 0; i < 64; ++i) s.Accept(i * 7);
  for (auto _ : st) benchmark::DoNotOptimize(s.Sample(logits));
  st.SetLabel(st.range(1) == 0 ? "greedy" : st.range(1) == 1 ? "defaults" : st.range(1) == 2 ? "top-k off"
              : st.range(1) == 3 ? "top-k off, min-p" : st.range(1) == 4 ? "defaults, penalty" : "every filter off");
}
BENCHMARK(BM_Sample)->ArgsProduct({{49152, 128256}, {0, 1, 2, 3, 4, 5}})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
