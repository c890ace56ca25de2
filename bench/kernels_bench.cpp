// Google Benchmark of the hot kernels: row dot products per type and decode
// attention at several cache lengths. Run: build/bench/kvtrim_kernels_bench
// --benchmark_out=bench.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/quant.h"
#include "kv/cache.h"

namespace kvtrim::kernels {
namespace {

std::vector<float> Rand(int n, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

void BM_DotRow(benchmark::State& st) {
  auto type = static_cast<GgmlType>(st.range(0));
  const int n = static_cast<int>(st.range(1));
  auto w = Rand(n, 1), x = Rand(n, 2);
  std::vector<uint8_t> row(RowBytesPadded(type, n));
  QuantizeRow(type, w.data(), row.data(), n);
  for (auto _ : st) benchmark::DoNotOptimize(DotRow(type, row.data(), x.data(), n));
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(row.size()));
}
BENCHMARK(BM_DotRow)->ArgsProduct({{0, 1, 8, 2}, {256, 4096}});

void BM_AttendOne(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0)), d = 32, G = 2;
  auto type = static_cast<GgmlType>(st.range(1));
  kv::HeadStore h(d, type);
  for (int j = 0; j < n; ++j) h.Append(Rand(d, j).data(), Rand(d, j + 7).data(), j, 0.f);
  auto q = Rand(G * d, 3);
  std::vector<float> out(G * d), scratch(G * n);
  for (auto _ : st) {
    AttendOne(h.View(), q.data(), G, 0.17f, out.data(), scratch.data());
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(2 * n * h.row_bytes()));
}
BENCHMARK(BM_AttendOne)->ArgsProduct({{128, 1024}, {0, 8}});

}  // namespace
}  // namespace kvtrim::kernels

BENCHMARK_MAIN();
