// Timings on a coarse wall clock (io/clock.h, engine/bench_repeat.h): on
// CI's machines steady_clock ticks in 20 ms steps. A fake clock with that
// step shows that a short interval is reported as below the clock's
// resolution (never 0 tok/s, inf or nan) and that the benchmarks repeat
// their work until a sample spans enough steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kvtrim/bench.h"
#include "kvtrim/bench_llama.h"
#include "kvtrim/bench_repeat.h"
#include "kvtrim/clock.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

constexpr int64_t kStep = 20'000'000;  // 20 ms

// Deterministic time: `t` nanoseconds of simulated work, read in 20 ms steps.
struct SimClock {
  int64_t t = 0;
  Clock clock() {
    return {[this] { return t / kStep * kStep; }, kStep};
  }
};

// The machine's steady clock read in 20 ms steps, as CI's machines read it.
Clock Coarse20ms() {
  return {[] { return SteadyNowNs() / kStep * kStep; }, kStep};
}

TEST(Clock, StepOfAFakeClockIsMeasuredAs20ms) {
  int64_t readings = 0;  // each reading advances 1 us of simulated time
  auto now = [&] { return ++readings * 1000 / kStep * kStep; };
  EXPECT_EQ(MeasureClockStep(now), kStep);
  // A clock that never moves reports 0 after max_readings, never hangs.
  EXPECT_EQ(MeasureClockStep([] { return int64_t{5}; }, 8, 1, 100000), 0);
  // Steps of 20 ms and 40 ms: the smallest counts.
  int64_t n = 0;
  EXPECT_EQ(MeasureClockStep([&] {
    const int64_t i = ++n;
    return i * 1000 / (2 * kStep) * (2 * kStep) + (i > 90000 ? kStep : 0);
  }), kStep);
  // The real clock's step is positive, whatever this machine's is.
  EXPECT_GT(SteadyClock().step_ns, 0);
}

TEST(Clock, ShortIntervalsAreBelowResolutionNeverZeroOrInf) {
  const Interval zero{0, kStep}, one_tick{kStep, kStep}, enough{50 * kStep, kStep};
  EXPECT_FALSE(zero.resolved());
  EXPECT_FALSE(one_tick.resolved());
  EXPECT_TRUE(enough.resolved());
  for (const Interval& t : {zero, one_tick}) {
    const std::string s = FormatMs(t);
    EXPECT_NE(s.find("below the clock's resolution"), std::string::npos) << s;
    EXPECT_NE(s.find("< 1000.00 ms"), std::string::npos) << s;  // 50 steps of 20 ms
    EXPECT_EQ(s.find("inf"), std::string::npos) << s;
    EXPECT_EQ(s.find("nan"), std::string::npos) << s;
  }
  EXPECT_EQ(FormatMs(enough), "1000.00 ms");
  EXPECT_EQ(FormatStep(kStep), "20 ms");
  EXPECT_FALSE(RatePerSecond(16, 0).has_value());
  EXPECT_FALSE(RatePerSecond(16, -1).has_value());
  EXPECT_DOUBLE_EQ(RatePerSecond(16, 2e9).value(), 8.0);
  const std::string r = FormatRate(16, 0.0);
  EXPECT_NE(r.find("below the clock's resolution"), std::string::npos) << r;
  EXPECT_EQ(FormatRate(16, 2.0), "8.0 tok/s");
  EXPECT_TRUE(BelowResolutionMs(0));
}

TEST(BenchRepeat, GrowsTheBatchUntilItSpansFiftySteps) {
  SimClock sim;
  const Clock c = sim.clock();
  RepeatUntilResolved rep(c);
  int batches = 0, last_k = 0;
  auto batch = [&](int k) -> Expected<BatchTiming> {
    ++batches, last_k = k;
    sim.t += 7'000'000;  // untimed preparation (sessions) still takes time
    const int64_t t0 = c.now();
    sim.t += int64_t{k} * 1'000'000;  // 1 ms of work per repetition
    return BatchTiming{{c.now() - t0}, 1000};
  };
  auto m = rep.Measure(batch);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->resolved);
  EXPECT_GT(batches, 1);
  EXPECT_EQ(m->reps, last_k);  // the smaller batches are discarded
  EXPECT_GE(m->ns_per_rep[0] * m->reps, 50.0 * kStep);
  EXPECT_NEAR(m->ns_per_rep[0], 1e6, 0.02 * 1e6);  // within one step in 50
  // The next sample starts from the k that resolved: one batch.
  batches = 0;
  ASSERT_TRUE(rep.Measure(batch).ok());
  EXPECT_EQ(batches, 1);
}

TEST(BenchRepeat, MemoryBoundSumsBatchesAndMarksWhatStaysUnresolved) {
  SimClock sim;
  const Clock c = sim.clock();
  RepeatLimits lim;
  lim.max_batch_bytes = 2000;  // 2 repetitions of 1000 bytes at once
  lim.max_wall_s = 5;
  auto work = [&](int64_t per_rep_ns, int64_t setup_ns) {
    return [&, per_rep_ns, setup_ns](int k) -> Expected<BatchTiming> {
      EXPECT_LE(k, 2);
      sim.t += setup_ns;
      const int64_t t0 = c.now();
      sim.t += k * per_rep_ns;
      return BatchTiming{{c.now() - t0}, 1000};
    };
  };
  RepeatUntilResolved a(c, lim);
  auto m = a.Measure(work(3'000'000, 0));  // 3 ms a repetition: 334 of them in 2s
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->resolved);
  EXPECT_NEAR(m->ns_per_rep[0], 3e6, 0.03 * 3e6);
  // 1 us of work after 50 ms of preparation: 5 s of wall budget cannot span
  // 50 steps; the figure is marked and stays finite.
  RepeatUntilResolved b(c, lim);
  auto u = b.Measure(work(1000, 50'000'000));
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(u->resolved);
  EXPECT_TRUE(std::isfinite(u->ns_per_rep[0]));
  EXPECT_GE(u->ns_per_rep[0], 0);
}

TEST(BenchRepeat, LlamaBenchRepeatsTinyTestsOnA20msClock) {
  auto e = test::LoadEngine("stories260K.gguf", 1);
  ASSERT_TRUE(e);
  const Clock coarse = Coarse20ms();
  LlamaBenchOptions o;
  o.prompts = {16};
  o.gens = {4};
  o.depths = {0, 20};
  o.reps = 2;
  o.warmup_s = 0;
  o.clock = &coarse;
  o.limits.min_steps = 5;  // 100 ms a sample keeps the test short; the default is 50
  auto r = RunLlamaBench(*e, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (const LlamaBenchTest& t : r.value()) {
    EXPECT_FALSE(t.below_resolution) << t.name();
    // A 16-token prefill or 4 decode steps take well under a millisecond:
    // the work is repeated. (One run may span the 100 ms alone when the
    // process is descheduled on a loaded machine, so not every sample.)
    EXPECT_GT(*std::max_element(t.samples_reps.begin(), t.samples_reps.end()), 1) << t.name();
    for (size_t i = 0; i < t.samples_ns.size(); ++i) {
      EXPECT_GE(t.samples_ns[i] * t.samples_reps[i], 5.0 * kStep) << t.name();
      EXPECT_GT(t.samples_ts()[i], 0) << t.name();
      EXPECT_TRUE(std::isfinite(t.samples_ts()[i])) << t.name();
    }
  }
}

TEST(BenchRepeat, BenchRowsRepeatPrefillAndDecodeOnA20msClock) {
  auto e = test::LoadEngine("stories260K.gguf", 1);
  ASSERT_TRUE(e);
  const Clock coarse = Coarse20ms();
  BenchOptions o = test::SmallBench({0, 32}, 4, 2, 8);
  o.clock = &coarse;
  o.limits.min_steps = 5;
  auto rows = RunBench(*e, o);
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  for (const BenchRow& r : rows.value()) {
    EXPECT_FALSE(r.below_resolution);
    EXPECT_GT(r.inner_reps, 1);  // the last repetition starts from the k the first one needed
    EXPECT_GT(r.prefill_tok_s.mean, 0);
    EXPECT_GT(r.decode_tok_s.mean, 0);
    EXPECT_TRUE(std::isfinite(r.prefill_tok_s.mean) && std::isfinite(r.decode_tok_s.mean));
    // The counters and bytes of one repetition, whatever the batch size.
    EXPECT_GT(r.kv_bytes, 0u);
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
