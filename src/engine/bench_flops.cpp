// `kvtrim bench --flops`: the multiply-add peak of the pool's threads and the
// prefill's FLOPs per token, so a prefill's rate reads as a share of the
// peak as a decode's reads as a share of the read bandwidth.
#include <algorithm>
#include <atomic>

#include "engine/engine_impl.h"
#include "kernels/fma_peak.h"
#include "kernels/thread_pool.h"
#include "kvtrim/bench.h"
#include "kvtrim/clock.h"
#include "model/config.h"

namespace kvtrim {

namespace {

// One kind on every thread at once: each of 8 items a thread runs `iters`
// rounds, doubled until the run spans the clock's minimum steps and 50 ms.
double PeakOf(kernels::ThreadPool& pool, kernels::PeakKind kind, int reps) {
  const int items = pool.size() * 8;
  const Clock& clock = SteadyClock();
  double best = 0;
  int64_t iters = 1 << 10;
  for (int r = 0; r < reps; ++r) {
    for (;;) {
      std::atomic<double> ops{0};
      Stopwatch sw(clock);
      pool.ParallelFor(items, [&](int64_t a, int64_t b) {
        double check = 0, done = 0;
        for (int64_t i = a; i < b; ++i) done += kernels::RunPeakLoop(kind, iters, &check);
        ops.fetch_add(done);
      });
      const Interval t = sw.Elapsed();
      if (t.resolved() && t.ns >= 50e6) {
        best = std::max(best, RatePerSecond(ops.load(), t.ns).value_or(0) / 1e9);
        break;
      }
      iters *= 2;
    }
  }
  return best;
}

}  // namespace

FmaPeak MeasureFmaPeak(const Engine& e, int reps) {
  kernels::ThreadPool& pool = e.impl().pool();
  FmaPeak p;
  using kernels::PeakKind;
  if (kernels::HasPeakKind(PeakKind::kF32)) p.f32 = PeakOf(pool, PeakKind::kF32, reps);
  if (kernels::HasPeakKind(PeakKind::kBf16)) p.bf16 = PeakOf(pool, PeakKind::kBf16, reps);
  if (kernels::HasPeakKind(PeakKind::kInt8)) p.int8 = PeakOf(pool, PeakKind::kInt8, reps);
  return p;
}

double PrefillFlopsPerToken(const Engine& e, int64_t n) {
  const model::ModelConfig& c = e.impl().config();
  const double D = c.dim, q = static_cast<double>(c.n_head) * c.head_dim, kv = static_cast<double>(c.n_head_kv) * c.head_dim;
  const double weights = D * q + 2 * D * kv + q * D + 3 * D * c.ffn_dim;  // per layer
  const double attention = 2.0 * 2.0 * c.head_dim * c.n_head * (static_cast<double>(n) + 1) / 2;  // per layer
  return c.n_layer * (2 * weights + attention);
}

}  // namespace kvtrim
