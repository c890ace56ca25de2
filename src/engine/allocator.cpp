// TuneAllocator (include/kvtrim/allocator.h): glibc's mallopt.
#include "kvtrim/allocator.h"

#include <cstdlib>  // defines __GLIBC__ (through <features.h>) where the C library is glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kvtrim {

bool TuneAllocator() {
#if defined(__GLIBC__)
  // Setting either disables glibc's dynamic thresholds, so both are set: the
  // trim threshold alone leaves the mmap threshold at 128 KiB, every
  // megabyte buffer mapped afresh (3.1 prefills where the defaults take
  // 1.5-1.6). 32 MiB is the largest mmap threshold glibc accepts on 64-bit.
  constexpr int kMmapThreshold = 32 << 20, kTrimThreshold = 256 << 20;
  const bool mmap_set = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1;
  const bool trim_set = mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
  return mmap_set && trim_set;
#else
  return false;
#endif
}

}  // namespace kvtrim
