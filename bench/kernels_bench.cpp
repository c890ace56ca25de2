// Google Benchmark of the hot kernels: row dot products per type and decode
// attention at several cache lengths. Run: build/bench/kvtrim_kernels_bench
// --benchmark_out=bench.json --benchmark_out_format=json
#include <benchmark/benchmark.h>
#include <cstring>

#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/attention_decode_avx512.h"
#include "kernels/cpu.h"
#include "kernels/matmul.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_packed.h"
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

// rows x cols normal values (seed) quantized row by row to type.
std::vector<uint8_t> QuantizedRows(GgmlType type, int rows, int cols, int seed) {
  std::vector<uint8_t> w(RowBytes(type, cols) * rows);
  const std::vector<float> wf = Rand(rows * cols, seed);
  for (int r = 0; r < rows; ++r)
    QuantizeRow(type, &wf[static_cast<size_t>(r) * cols], w.data() + RowBytes(type, cols) * r, cols);
  return w;
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

// One decode step of one KV head at SmolLM2's shape (d = 64, G = 3).
// Args: entries, KV type (0 F32, 1 F16, 8 Q8_0, 2 Q4_0).
void BM_AttendOne(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0)), d = 64, G = 3;
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
BENCHMARK(BM_AttendOne)->ArgsProduct({{1024, 8192}, {0, 1, 8, 2}});

// The same step as decode runs it for quantized entries (one thread here):
// chunks (DecodeChunkLength for 3 heads on 2 threads), the chunks merged
// (the AVX-512 kernel where the CPU has it; KVTRIM_KERNELS=avx2 for the
// AVX2 one). Args: entries, KV type as BM_AttendOne, query heads per KV
// head (3 SmolLM2-135M, 7 Qwen2.5-0.5B).
void BM_AttendChunks(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0)), d = 64, G = static_cast<int>(st.range(2));
  auto type = static_cast<GgmlType>(st.range(1));
  kv::HeadStore h(d, type);
  for (int j = 0; j < n; ++j) h.Append(Rand(d, j).data(), Rand(d, j + 7).data(), j, 0.f);
  auto q = Rand(G * d, 3);
  const int L = DecodeChunkLength(n, 3, 2), C = DecodeChunks(n, L);
  std::vector<float> out(G * d), outs(static_cast<size_t>(C) * G * d), mls(static_cast<size_t>(C) * G * 2);
  for (auto _ : st) {
    for (int c = 0; c < C; ++c) AttendChunk(h.View(), c, L, q.data(), G, 0.17f, &outs[c * G * d], &mls[c * G * 2]);
    MergeChunks(outs.data(), mls.data(), C, G, d, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(2 * n * h.row_bytes()));
}
BENCHMARK(BM_AttendChunks)->ArgsProduct({{1024, 8192}, {0, 1, 8, 2}, {3, 7}});

// The same step over heads read from memory, not from the caches, as a
// decode at depth reads them: 90 heads (SmolLM2's 30 layers x 3 KV heads)
// of n entries each, one after the other (at 8192 entries q8_0, 200 MB).
// Args as BM_AttendChunks (n, type, G), then the AVX-512 kernel's software
// prefetch (1 on, 0 off); one thread.
void BM_AttendChunksFromMemory(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0)), d = 64, G = static_cast<int>(st.range(2)), heads = 90;
  const bool old_prefetch = SetDecodePrefetch(st.range(3) != 0);
  auto type = static_cast<GgmlType>(st.range(1));
  std::vector<kv::HeadStore> hs;
  hs.reserve(heads);
  auto k = Rand(d, 1), v = Rand(d, 2);
  for (int h = 0; h < heads; ++h) {
    hs.emplace_back(d, type);
    for (int j = 0; j < n; ++j) {
      k[j % d] += 0.5f, v[(j + h) % d] -= 0.5f;  // rows differ without an RNG call each
      hs.back().Append(k.data(), v.data(), j, 0.f);
    }
  }
  auto q = Rand(G * d, 3);
  const int L = DecodeChunkLength(n, 3, 2), C = DecodeChunks(n, L);
  std::vector<float> out(G * d), outs(static_cast<size_t>(C) * G * d), mls(static_cast<size_t>(C) * G * 2);
  for (auto _ : st) {
    for (const kv::HeadStore& h : hs) {
      for (int c = 0; c < C; ++c) AttendChunk(h.View(), c, L, q.data(), G, 0.17f, &outs[c * G * d], &mls[c * G * 2]);
      MergeChunks(outs.data(), mls.data(), C, G, d, out.data());
      benchmark::DoNotOptimize(out.data());
    }
  }
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(heads) * 2 * n * hs[0].row_bytes());
  SetDecodePrefetch(old_prefetch);
}
BENCHMARK(BM_AttendChunksFromMemory)->ArgsProduct({{4096}, {1, 8, 2}, {3, 7}, {1, 0}})->Unit(benchmark::kMillisecond);

// A [768 x 256] weight matrix (needle's FFN shape) times T tokens on one
// thread. Args: type, T, path (0 scalar, 1 AVX2, 2 AVX-512; 3 = the float path
// before issue 16: DequantRow + Eigen GEMM for T > 1, DotRow for T == 1).
void BM_MatMul(benchmark::State& st) {
  auto type = static_cast<GgmlType>(st.range(0));
  const int T = static_cast<int>(st.range(1)), path = static_cast<int>(st.range(2));
  const int rows = 768, cols = 256;
  if (path < 3 && static_cast<KernelPath>(path) > BestKernelPath()) {
    st.SkipWithError("path not supported here");
    return;
  }
  const std::vector<uint8_t> w = QuantizedRows(type, rows, cols, 5);
  WeightView view{type, w.data(), rows, cols};
  auto x = Rand(T * cols, 6);
  std::vector<float> y(static_cast<size_t>(T) * rows), deq(static_cast<size_t>(rows) * cols);
  ThreadPool pool(1);
  const KernelPath old = SetKernelPath(static_cast<KernelPath>(std::min(path, 2)));
  for (auto _ : st) {
    if (path < 3) {
      MatMul(pool, view, x.data(), T, y.data());
    } else if (T == 1) {
      for (int r = 0; r < rows; ++r) y[r] = DotRow(type, view.row(r), x.data(), cols);
    } else {
      for (int r = 0; r < rows; ++r) DequantRow(type, view.row(r), &deq[static_cast<size_t>(r) * cols], cols);
      GemmABt(T, rows, cols, x.data(), cols, deq.data(), cols, y.data(), rows);
    }
    benchmark::DoNotOptimize(y.data());
  }
  SetKernelPath(old);
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * T * st.iterations(), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_MatMul)->ArgsProduct({{0, 8, 2}, {1, 4, 16, 64, 512}, {0, 1, 2, 3}})->MeasureProcessCPUTime();

// Prefill products on Q8_0/Q4_0, one thread, activation quantization
// included. Args: type (8 Q8_0, 2 Q4_0), T, shape (0: [768 x 256], 1:
// [256 x 768], 2: [2048 x 256]), mode (0: MatMul without a repack, i.e. the
// path before the repack: integer 4 x 2 tiles below 32 tokens, dequantized
// row blocks + Eigen from 32 on; 1: repacked row-lane kernel, AVX2; 2: the
// same, AVX-512 VNNI; 3: scalar).
void BM_PrefillGemm(benchmark::State& st) {
  auto type = static_cast<GgmlType>(st.range(0));
  const int T = static_cast<int>(st.range(1)), mode = static_cast<int>(st.range(3));
  static constexpr int kShapes[3][2] = {{768, 256}, {256, 768}, {2048, 256}};
  const int rows = kShapes[st.range(2)][0], cols = kShapes[st.range(2)][1];
  const KernelPath want = mode == 0 ? KernelPath::kAvx2 : mode == 1 ? KernelPath::kAvx2
                        : mode == 2 ? KernelPath::kAvx512 : KernelPath::kScalar;
  if (want > BestKernelPath()) {
    st.SkipWithError("path not supported here");
    return;
  }
  const std::vector<uint8_t> w = QuantizedRows(type, rows, cols, 5);
  WeightView view{type, w.data(), rows, cols};
  const PackedWeights packed = PackWeights(view);
  auto x = Rand(T * cols, 6);
  std::vector<float> y(static_cast<size_t>(T) * rows);
  ThreadPool pool(1);
  QActs acts;
  const KernelPath old = SetKernelPath(want);
  for (auto _ : st) {
    if (mode == 0) {
      MatMul(pool, view, x.data(), T, y.data());
    } else {
      QuantizeActs(x.data(), T, cols, &acts);
      PackedGemmRows(packed, acts, 0, rows, y.data(), rows);
    }
    benchmark::DoNotOptimize(y.data());
  }
  SetKernelPath(old);
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * T * st.iterations(), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_PrefillGemm)
    ->ArgsProduct({{8, 2}, {1, 4, 16, 32, 64, 128, 512}, {0, 1, 2}, {0, 1, 2, 3}})
    ->MeasureProcessCPUTime();

// Decode (T = 1) products from memory: 96 repacked [1536 x 576] matrices
// (SmolLM2-135M's FFN shape; 85 MB in Q8_0, 48 MB in Q4_0) one after the
// other on one thread, activation quantization included, as a decode step
// reads its weights. Arg: type (8 Q8_0, 2 Q4_0). Bytes: the repacked codes
// and scales.
void BM_MatVecFromMemory(benchmark::State& st) {
  auto type = static_cast<GgmlType>(st.range(0));
  const int rows = 1536, cols = 576, count = 96;
  const std::vector<uint8_t> w = QuantizedRows(type, rows, cols, 5);
  const PackedWeights one = PackWeights(WeightView{type, w.data(), rows, cols});
  std::vector<PackedWeights> mats(count, one);
  auto x = Rand(cols, 6);
  std::vector<float> y(rows);
  QActs acts;
  for (auto _ : st) {
    for (const PackedWeights& p : mats) {
      QuantizeActs(x.data(), 1, cols, &acts);
      PackedGemmRows(p, acts, 0, rows, y.data(), rows);
      benchmark::DoNotOptimize(y.data());
    }
  }
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(count) * static_cast<int64_t>(one.bytes()));
}
BENCHMARK(BM_MatVecFromMemory)->Arg(8)->Arg(2)->Unit(benchmark::kMillisecond);

// A decode step's products of one layer input on two threads, in cache:
// SmolLM2-135M's Q, K and V ([576 x 576], [192 x 576] twice) and its FFN
// gate and up ([1536 x 576] twice), Q8_0 repacked, T = 1. Arg: 0 one
// MatMul each (five forks, five activation quantizations), 1 MatMulShared
// per input (two of each). Wall time: what the forks and joins cost.
void BM_LayerProducts(benchmark::State& st) {
  const bool shared = st.range(0) != 0;
  const int D = 576, KV = 192, F = 1536;
  const int rows[5] = {D, KV, KV, F, F};
  std::vector<std::vector<uint8_t>> data(5);
  std::vector<PackedWeights> packs(5);
  std::vector<WeightView> views(5);
  for (int i = 0; i < 5; ++i) {
    data[i] = QuantizedRows(GgmlType::Q8_0, rows[i], D, 10 + i);
    views[i] = WeightView{GgmlType::Q8_0, data[i].data(), rows[i], D};
    packs[i] = PackWeights(views[i]);
    views[i].packed = &packs[i];
  }
  auto x = Rand(D, 7);
  std::vector<std::vector<float>> y(5);
  for (int i = 0; i < 5; ++i) y[i].resize(rows[i]);
  ThreadPool pool(2);
  for (auto _ : st) {
    if (shared) {
      MatMulShared(pool, {{&views[0], y[0].data()}, {&views[1], y[1].data()}, {&views[2], y[2].data()}}, x.data(), 1);
      MatMulShared(pool, {{&views[3], y[3].data()}, {&views[4], y[4].data()}}, x.data(), 1);
    } else {
      for (int i = 0; i < 5; ++i) MatMul(pool, views[i], x.data(), 1, y[i].data());
    }
    benchmark::DoNotOptimize(y[4].data());
  }
}
BENCHMARK(BM_LayerProducts)->Arg(0)->Arg(1)->UseRealTime();

// One thread's read bandwidth: a sum over 256 MB of floats (Eigen-free, the
// compiler's vector loop), the ceiling BM_MatVecFromMemory is read against.
void BM_ReadFromMemory(benchmark::State& st) {
  std::vector<float> buf(size_t{64} << 20, 1.f);
  for (auto _ : st) {
    float acc[16] = {};
    for (size_t i = 0; i < buf.size(); i += 16)
      for (int j = 0; j < 16; ++j) acc[j] += buf[i + j];
    benchmark::DoNotOptimize(acc);
  }
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(buf.size() * sizeof(float)));
}
BENCHMARK(BM_ReadFromMemory)->Unit(benchmark::kMillisecond);

// Decode (T = 1) on K-quant rows [768 x 256] (random codes, scales 0.01):
// arg 0 the type (12 Q4_K, 14 Q6_K), arg 1 the path (0 scalar: float dots,
// 1 AVX2, 2 AVX-512: the int16 row tiles).
void BM_MatVecK(benchmark::State& st) {
  auto type = static_cast<GgmlType>(st.range(0));
  const int path = static_cast<int>(st.range(1));
  const int rows = 768, cols = 256;
  if (static_cast<KernelPath>(path) > BestKernelPath()) {
    st.SkipWithError("path not supported here");
    return;
  }
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(type));
  std::vector<uint8_t> w(RowBytes(type, cols) * rows);
  uint32_t s = 12345;
  for (uint8_t& b : w) b = static_cast<uint8_t>((s = s * 1664525u + 1013904223u) >> 24);
  const uint16_t h = F32ToF16(0.01f);
  const int off = type == GgmlType::Q6_K ? 208 : 0;
  for (size_t b = 0; b < w.size(); b += tt->block_bytes) {
    std::memcpy(&w[b + off], &h, 2);
    if (type == GgmlType::Q4_K) std::memcpy(&w[b + 2], &h, 2);
  }
  WeightView view{type, w.data(), rows, cols};
  auto x = Rand(cols, 6);
  std::vector<float> y(rows);
  ThreadPool pool(1);
  const KernelPath old = SetKernelPath(static_cast<KernelPath>(path));
  for (auto _ : st) {
    MatMul(pool, view, x.data(), 1, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  SetKernelPath(old);
}
BENCHMARK(BM_MatVecK)->ArgsProduct({{12, 14}, {0, 1, 2}})->MeasureProcessCPUTime();

}  // namespace
}  // namespace kvtrim::kernels

BENCHMARK_MAIN();
