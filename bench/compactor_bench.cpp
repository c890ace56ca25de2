// Compactor's scoring cost against one prefill attention pass, per (layer,
// KV head) at the needle model's shape (head dim 32, 2 query heads per KV
// head) and context (~1000 tokens). Run: build/bench/kvtrim_compactor_bench
// GCC 12 reports false "may be used uninitialized" warnings inside Eigen's
// AVX-512 double-precision packets (_mm512_undefined_pd) with -march=native.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kv/cache.h"
#include "kv/numerics/leverage.h"
#include "kv/policies/compactor.h"
#include "kv/policy.h"

namespace kvtrim::kv {
namespace {

constexpr int kD = 32, kG = 2;

std::vector<float> Rand(size_t n, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

struct Head {
  HeadStore store{kD, GgmlType::F32};
  HeadStats stats;
  explicit Head(int n) {
    auto k = Rand(static_cast<size_t>(n) * kD, 1), v = Rand(static_cast<size_t>(n) * kD, 2);
    for (int i = 0; i < n; ++i) store.Append(&k[i * kD], &v[i * kD], i, 0.f);
    stats.k_pre = Rand(static_cast<size_t>(n) * kD, 3);
    stats.q_rot = Rand(static_cast<size_t>(n) * kG * kD, 4);
  }
};

// The causal attention of the prefill for one KV head (its G query heads).
void BM_PrefillAttentionHead(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  Head h(n);
  std::vector<float> out(static_cast<size_t>(n) * kG * kD);
  for (auto _ : st) {
    kernels::AttendCausal(h.store.View(), h.stats.q_rot.data(), n, kG, kG * kD, 0, 0.17677f, out.data(), kG * kD);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_PrefillAttentionHead)->Arg(976)->Arg(4096)->Unit(benchmark::kMicrosecond);

// A chunk of 64 queries at the end of a long cache (n = 16384): the old
// kernel's score block was [64 * G, n].
void BM_PrefillAttentionLong(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0)), T = 64;
  Head h(n);
  std::vector<float> out(static_cast<size_t>(T) * kG * kD);
  for (auto _ : st) {
    kernels::AttendCausal(h.store.View(), h.stats.q_rot.data(), T, kG, kG * kD, n - T, 0.17677f, out.data(), kG * kD);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_PrefillAttentionLong)->Arg(16384)->Unit(benchmark::kMicrosecond);

// TILE-ONLY (not in the pre-tiling kernel): key tile sizes, and the taps'
// second pass (an empty tap), n = 976 prefill.
void BM_PrefillAttentionTile(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0)), tile = static_cast<int>(st.range(1));
  Head h(n);
  std::vector<float> out(static_cast<size_t>(n) * kG * kD);
  kernels::TileObserver tap = [](const kernels::ProbTile& t) { benchmark::DoNotOptimize(t.p); };
  for (auto _ : st) {
    kernels::AttendCausal(h.store.View(), h.stats.q_rot.data(), n, kG, kG * kD, 0, 0.17677f, out.data(), kG * kD,
                          st.range(2) ? &tap : nullptr, tile);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_PrefillAttentionTile)
    ->ArgsProduct({{976}, {32, 64, 128, 256, 512}, {0}})
    ->ArgsProduct({{976}, {64, 128, 256, 512}, {1}})
    ->Unit(benchmark::kMicrosecond);
// TILE-ONLY end

// The whole policy on one head: scores, blend and selection (ratio 0.5).
void BM_CompactorCompressHead(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  Head h(n);
  auto pol = MakePolicy("compactor", {{"leverage", static_cast<double>(st.range(1))}, {"sketch-dim", 16}});
  PolicyContext ctx;
  ctx.store = &h.store;
  ctx.stats = &h.stats;
  ctx.budget = n / 2;
  ctx.logical_len = n;
  for (auto _ : st) benchmark::DoNotOptimize(pol.value()->Compress(ctx).keep.data());
  st.SetLabel(numerics::LeverageMethodNames()[st.range(1)] + (st.range(1) == 3 ? "" : " k=16"));
}
BENCHMARK(BM_CompactorCompressHead)->ArgsProduct({{976}, {0, 1, 2, 3, 4}})->Unit(benchmark::kMicrosecond);

void BM_ChunkAttentionScores(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  Head h(n);
  std::vector<float> k(static_cast<size_t>(n) * kD);
  for (int i = 0; i < n; ++i) h.store.ReadKey(i, &k[i * kD]);
  for (auto _ : st)
    benchmark::DoNotOptimize(ChunkAttentionScores(h.stats.q_rot.data(), k.data(), n, kG, kD, 256).data());
}
BENCHMARK(BM_ChunkAttentionScores)->Arg(976)->Unit(benchmark::kMicrosecond);

void BM_Leverage(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  Head h(n);
  numerics::LeverageOptions o;
  o.method = static_cast<numerics::LeverageMethod>(st.range(1));
  o.sketch_dim = 16;
  for (auto _ : st) benchmark::DoNotOptimize(numerics::LeverageScores(h.stats.k_pre.data(), n, kD, o).data());
  st.SetLabel(numerics::LeverageMethodNames()[st.range(1)]);
}
BENCHMARK(BM_Leverage)->ArgsProduct({{976}, {0, 1, 2, 3, 4}})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvtrim::kv

BENCHMARK_MAIN();
