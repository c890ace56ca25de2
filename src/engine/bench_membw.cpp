#include "engine/bench_membw.h"

#if defined(__AVX2__)
#include "kernels/intrinsics.h"
#endif

#include <algorithm>
#include <atomic>

#include "engine/engine_impl.h"
#include "kvtrim/bench.h"
#include "kvtrim/clock.h"

namespace kvtrim {
namespace {

// Sum of n floats with 4 independent vector accumulators, so the loop is
// bound by memory reads, not by the add latency chain.
double SumRange(const float* p, int64_t n) {
  int64_t i = 0;
  double s = 0;
#if defined(__AVX2__)
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (float l : lanes) s += l;
#endif
  for (; i < n; ++i) s += p[i];
  return s;
}

}  // namespace

ReadProbe::ReadProbe(kernels::ThreadPool& pool, size_t bytes) : pool_(pool), buf_(bytes / sizeof(float), 1.0f) {
  // Touch pages in the same split the readers use (first-touch placement).
  pool_.ParallelFor(static_cast<int64_t>(buf_.size()), [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) buf_[i] = static_cast<float>(i & 7);
  });
}

double ReadProbe::Measure(int reps) {
  const int64_t n = static_cast<int64_t>(buf_.size());
  if (n == 0) return 0;
  double best = 0;
  std::atomic<double> total{0};  // one add per chunk, whatever the pool's chunking
  // Each repetition reads the buffer as many times as it takes to span the
  // clock's minimum steps (io/clock.h: a 1 GiB read is one 20 ms step).
  const Clock& clock = SteadyClock();
  for (int r = 0; r < reps; ++r) {
    Stopwatch sw(clock);
    int passes = 0;
    Interval t;
    do {
      pool_.ParallelFor(n, [&](int64_t a, int64_t b) { total.fetch_add(SumRange(buf_.data() + a, b - a)); });
      ++passes;
      t = sw.Elapsed();
    } while (!t.resolved());
    best = std::max(best, RatePerSecond(static_cast<double>(n) * sizeof(float) * passes, t.ns).value_or(0) / 1e9);
  }
  volatile double sink = total.load();
  (void)sink;
  return best;
}

double MeasureReadBandwidth(const Engine& e, size_t bytes, int reps) {
  ReadProbe probe(e.impl().pool(), bytes);
  return probe.Measure(reps);
}

}  // namespace kvtrim
