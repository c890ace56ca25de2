#include "kvtrim/clock.h"

#include <chrono>
#include <cstdio>

namespace kvtrim {

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t MeasureClockStep(const std::function<int64_t()>& now, int changes, int64_t max_wait_ns,
                         int64_t max_readings) {
  const int64_t start = now();
  int64_t prev = start, best = 0;
  int seen = 0;
  for (int64_t r = 0; r < max_readings; ++r) {
    const int64_t t = now();
    if (t != prev) {
      const int64_t d = t - prev;
      if (d > 0 && (best == 0 || d < best)) best = d;
      prev = t;
      if (++seen >= changes) break;
    }
    if (t - start >= max_wait_ns) break;
  }
  return best;
}

const Clock& SteadyClock() {
  static const Clock c = [] {
    Clock k;
    k.now = SteadyNowNs;
    const int64_t step = MeasureClockStep(SteadyNowNs);
    k.step_ns = step > 0 ? step : 1;
    return k;
  }();
  return c;
}

bool BelowResolutionMs(double ms) { return !(ms * 1e6 >= static_cast<double>(SteadyClock().Span())); }

std::optional<double> RatePerSecond(double count, double ns) {
  if (!(ns > 0)) return std::nullopt;
  return count / (ns * 1e-9);
}

std::string FormatRate(double count, double seconds, const char* unit) {
  if (BelowResolutionMs(seconds * 1e3))
    return "rate below the clock's resolution (step " + FormatStep(SteadyClock().step_ns) + ")";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s", count / seconds, unit);
  return buf;
}

std::string FormatStep(int64_t step_ns) {
  char buf[48];
  if (step_ns >= 1'000'000)
    std::snprintf(buf, sizeof buf, "%g ms", step_ns / 1e6);
  else if (step_ns >= 1000)
    std::snprintf(buf, sizeof buf, "%g us", step_ns / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%lld ns", static_cast<long long>(step_ns));
  return buf;
}

std::string FormatMs(const Interval& t, int decimals) {
  char buf[96];
  if (t.resolved()) {
    std::snprintf(buf, sizeof buf, "%.*f ms", decimals, t.ms());
  } else {
    const double bound = kMinClockSteps * t.step_ns * 1e-6;
    std::snprintf(buf, sizeof buf, "< %.*f ms (below the clock's resolution: step %s)", decimals, bound,
                  FormatStep(t.step_ns).c_str());
  }
  return buf;
}

}  // namespace kvtrim
