#include "kernels/scratch.h"

#include <algorithm>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kvtrim::kernels {

HugeBuffer AllocHuge(size_t floats) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = (floats * sizeof(float) + kHuge - 1) / kHuge * kHuge;  // aligned_alloc: a multiple
  void* p = bytes ? std::aligned_alloc(kHuge, bytes) : nullptr;
#if defined(__linux__)
  if (p) ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without THP the pages stay small
#endif
  if (!p) p = std::malloc(std::max<size_t>(floats * sizeof(float), 1));  // never malloc(0): its null is no failure
  if (!p) throw std::bad_alloc();
  return HugeBuffer(static_cast<float*>(p));
}

}  // namespace kvtrim::kernels
