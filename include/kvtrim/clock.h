// The wall clock as the machine really has it. On some of the machines this
// project runs on (CI's among them) CLOCK_MONOTONIC, and so
// std::chrono::steady_clock, advances in steps of 20 ms: an interval shorter
// than a step reads 0 or one step. The step is measured once (the smallest
// non-zero difference of consecutive readings), and a figure that spans
// fewer than kMinClockSteps steps is either measured again over repeated work
// (benchmarks) or reported as below the clock's resolution.
// Written by hand: no Debian library measures a clock's effective step.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace kvtrim {

// A figure is trusted when it spans at least this many clock steps (a
// reading is off by up to one step, so the error is at most 2%).
inline constexpr int kMinClockSteps = 50;

// A monotonic clock: readings in nanoseconds and the step they advance by.
struct Clock {
  std::function<int64_t()> now;  // nanoseconds since an arbitrary origin
  int64_t step_ns = 1;           // smallest non-zero difference of readings
  // The smallest interval that spans `steps` steps.
  int64_t Span(int steps = kMinClockSteps) const { return steps * step_ns; }
};

// steady_clock's reading in nanoseconds.
int64_t SteadyNowNs();

// Smallest non-zero difference of consecutive readings of `now`, from
// readings taken until `changes` differences were seen, `max_wait_ns`
// passed by `now` itself or `max_readings` were taken (returns 0 if the
// clock never moved).
int64_t MeasureClockStep(const std::function<int64_t()>& now, int changes = 8, int64_t max_wait_ns = 200'000'000,
                         int64_t max_readings = 50'000'000);

// The steady clock with its step, measured on the first call (at most
// ~0.2 s of readings; a few microseconds where the clock is fine).
const Clock& SteadyClock();

// An interval read from a clock, with the clock's step.
struct Interval {
  int64_t ns = 0;
  int64_t step_ns = 1;
  double seconds() const { return ns * 1e-9; }
  double ms() const { return ns * 1e-6; }
  // Spans at least kMinClockSteps steps.
  bool resolved() const { return ns >= kMinClockSteps * step_ns; }
};

// Starts at construction; Elapsed() reads the clock again.
class Stopwatch {
 public:
  explicit Stopwatch(const Clock& c = SteadyClock()) : clock_(c), t0_(c.now()) {}
  Interval Elapsed() const { return {clock_.now() - t0_, clock_.step_ns}; }

 private:
  const Clock& clock_;
  int64_t t0_;
};

// A figure of `ms` milliseconds read from the steady clock spans fewer than
// kMinClockSteps of its steps.
bool BelowResolutionMs(double ms);

// count / seconds, or nothing when the interval is not positive (a rate is
// never inf or nan).
std::optional<double> RatePerSecond(double count, double ns);

// "12.34 ms", or "< 1000 ms (below the 20 ms clock step x 50)" style text for
// an interval that spans fewer than kMinClockSteps steps.
std::string FormatMs(const Interval& t, int decimals = 2);

// "12.3 tok/s" (count / seconds), or "below the clock's resolution (step
// 20 ms)" when `seconds` spans fewer than kMinClockSteps steps of the
// steady clock: never inf, nan or a figure made of one tick.
std::string FormatRate(double count, double seconds, const char* unit = "tok/s");

// The clock's step for headers: "20 ms", "20 ns", "1.5 us".
std::string FormatStep(int64_t step_ns);

}  // namespace kvtrim
