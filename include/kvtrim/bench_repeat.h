// Repetition of benchmark work until its timing spans enough clock steps.
// On a machine whose wall clock ticks in 20 ms steps (io/clock.h), a prefill
// of 16 tokens on a tiny model reads 0 ns. A batch prepares k repetitions of
// the work (untimed: sessions, depth prefill) and times their measured
// sections in one span each; k grows until every section spans
// kMinClockSteps steps (the smaller batches are discarded, so the figure's
// error is at most a step in 50), bounded by the memory the prepared
// repetitions hold and by a wall-clock budget. Where the bound stops it, the
// batches at the bound are summed, and a figure that still spans too few
// steps is marked as below the clock's resolution.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kvtrim/clock.h"
#include "kvtrim/status.h"

namespace kvtrim {

// One batch: the span of each timed section over all k repetitions, and the
// bytes one prepared repetition holds (sessions' caches).
struct BatchTiming {
  std::vector<int64_t> spans_ns;
  size_t bytes_per_rep = 0;
};

// Per-section time per repetition, from `reps` repetitions.
struct RepeatedTiming {
  std::vector<double> ns_per_rep;
  int reps = 0;
  bool resolved = true;  // every section spans >= kMinClockSteps steps
};

struct RepeatLimits {
  int min_steps = kMinClockSteps;
  size_t max_batch_bytes = size_t{256} << 20;  // prepared repetitions held at once
  int max_k = 1 << 16;
  double max_wall_s = 20;  // per measurement, summed over its batches
};

class RepeatUntilResolved {
 public:
  explicit RepeatUntilResolved(const Clock& clock, RepeatLimits lim = {}) : clock_(clock), lim_(lim) {}
  // `batch(k)` prepares and times k repetitions. The k that resolved is kept
  // for the next call (the next sample of the same test).
  Expected<RepeatedTiming> Measure(const std::function<Expected<BatchTiming>(int k)>& batch);
  int k() const { return k_; }

 private:
  bool Resolved(const std::vector<int64_t>& spans) const;
  int NextK(int k, const std::vector<int64_t>& spans, int cap) const;
  const Clock& clock_;
  RepeatLimits lim_;
  int k_ = 1;
};

}  // namespace kvtrim
