/* LD_PRELOAD shim that makes the wall clocks tick in 20 ms steps, as
 * CLOCK_MONOTONIC does on some of the machines kvtrim runs on (CI's among
 * them): CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_REALTIME and
 * gettimeofday() are rounded down to a multiple of the step; the CPU-time
 * clocks are left alone. To run the test suite as such a machine would:
 *   bash scripts/coarse_clock/run.sh ctest --test-dir build -j2
 * The step is KVTRIM_COARSE_STEP_NS (default 20000000). Test tooling only:
 * nothing in kvtrim links it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long long step_ns(void) {
  static long long s = 0;
  if (s == 0) {
    const char* e = getenv("KVTRIM_COARSE_STEP_NS");
    s = e ? atoll(e) : 20000000LL;
    if (s <= 0) s = 20000000LL;
  }
  return s;
}

int clock_gettime(clockid_t id, struct timespec* ts) {
  static int (*real)(clockid_t, struct timespec*) = 0;
  if (!real) real = (int (*)(clockid_t, struct timespec*))dlsym(RTLD_NEXT, "clock_gettime");
  int r = real(id, ts);
  if (r == 0 && (id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_RAW || id == CLOCK_REALTIME ||
                 id == CLOCK_MONOTONIC_COARSE || id == CLOCK_REALTIME_COARSE || id == CLOCK_BOOTTIME)) {
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec;
    ns -= ns % step_ns();
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
  }
  return r;
}

int gettimeofday(struct timeval* tv, void* tz) {
  struct timespec ts;
  int r = clock_gettime(CLOCK_REALTIME, &ts);
  (void)tz;
  if (r == 0 && tv) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return r;
}
